"""The jury's charts: each juror's trajectory, the timeline of calls, the verdicts, the discussion's effect."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, MUTED, PALETTE, _layout, _legend_below, series_colors
from dashboard.text import in_words, plot_text

VERDICT_COLORS = {"safe_pass": "#54A24B", "needs_review": "#EECA3B", "unsafe_fail": "#E45756", "failed": "#8C8C8C"}


def jury_trajectory(rows: Sequence[Mapping[str, Any]], settled: bool = True) -> go.Figure:
    """Score per juror across phase 1 and the rounds; fallback points drawn hollow. Jurors with the same score at
    a step would hide under one dot (three identical seats read as one juror): each juror's points sit a little
    to the side of the step, in legend order, so every juror stays visible and hoverable."""
    fig = go.Figure()
    roles = list(dict.fromkeys(r["role"] for r in rows))
    steps = list(dict.fromkeys(r["label"] for r in rows))
    colors = series_colors(roles)
    spread = min(0.12, 0.5 / max(len(roles) - 1, 1))  # the side-by-side offset between jurors at one step
    for i, role in enumerate(roles):
        mine = [r for r in rows if r["role"] == role]
        name = plot_text(role)
        offset = (i - (len(roles) - 1) / 2) * spread
        fig.add_trace(
            go.Scatter(
                x=[steps.index(r["label"]) + offset for r in mine],
                y=[r["score"] for r in mine],
                mode="lines+markers",
                name=name,
                customdata=[plot_text(r["label"]) for r in mine],
                text=[plot_text(in_words(r["verdict"])) + (" (fallback)" if r.get("fallback") else "") for r in mine],
                line={"color": colors[str(role)]},
                marker={
                    "symbol": ["circle-open" if r.get("fallback") else "circle" for r in mine],
                    "size": 10,
                    "color": colors[str(role)],
                    "line": {"width": 1, "color": "white"},
                },
                hovertemplate="%{customdata}: %{y:.0f} — %{text}<extra>" + name + "</extra>",
            )
        )
    fig.update_xaxes(
        tickvals=list(range(len(steps))),
        ticktext=[plot_text(s) for s in steps],
        range=[-0.5, len(steps) - 0.5],
        showgrid=False,
    )
    fig.update_yaxes(range=[-5, 105], title="score (100 safe, 0 unsafe)")
    title = (
        "Score trajectory per juror"
        if len(steps) > 1
        else "Phase-1 scores" + (" (no discussion round)" if settled else "")
    )
    return _legend_below(_layout(fig, title, 360))


def jury_timeline(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Each juror call as a bar from its start to its end (seconds since the run started)."""
    fig = go.Figure()
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    for i, stage in enumerate(stages):  # stages in the order they ran, so phase 1 is always the first colour
        mine = [r for r in rows if r["stage"] == stage]
        name = plot_text(stage)
        fig.add_trace(
            go.Bar(
                marker_color=PALETTE[i % len(PALETTE)],
                y=[plot_text(r["role"]) for r in mine],
                x=[r["end"] - r["start"] for r in mine],
                base=[r["start"] for r in mine],
                orientation="h",
                name=name,
                hovertemplate="%{y}: %{base:.2f}–%{x:.2f}s<extra>" + name + "</extra>",
            )
        )
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title="seconds since the run started")
    fig.update_yaxes(autorange="reversed")  # the first seat on top, as the cards read
    return _legend_below(_layout(fig, "Round timeline: request → answer", 360))


def jury_verdicts(
    distribution: Mapping[str, Mapping[str, int]], labels: Sequence[str], settled: bool = True
) -> go.Figure:
    """How many jurors held each verdict, per stage ('phase 1', and 'after discussion' once a round ran), the
    verdicts in words; a verdict no juror held at any stage is left out of the bars and the legend. `settled`: the
    run is over (a replay part way through has not said yet whether a round will run)."""
    fig = go.Figure()
    for label in labels:
        counts = [distribution[k].get(label, 0) for k in distribution]
        if not any(counts):
            continue
        fig.add_trace(
            go.Bar(
                x=[plot_text(k) for k in distribution],
                y=counts,
                name=plot_text(in_words(label)),
                marker_color=VERDICT_COLORS.get(label, PALETTE[len(fig.data) % len(PALETTE)]),
            )
        )
    fig.update_layout(barmode="stack", showlegend=True)
    fig.update_yaxes(title="jurors", dtick=1)
    title = (
        "Verdict distribution"
        if len(distribution) > 1
        else "Phase-1 verdicts" + (" (no discussion round)" if settled else "")
    )
    return _legend_below(_layout(fig, title, 360))


def jury_discussion_effect(effect: Mapping[str, Any]) -> go.Figure:
    """Accuracy, Fleiss κ and Krippendorff α before and after the discussion (`analysis.jury_effect`)."""
    pairs = effect["pairs"]
    fig = go.Figure()
    for side, color in (("before discussion", MUTED), ("after discussion", BASE_COLOR)):
        fig.add_trace(
            go.Bar(
                x=[p["measure"] for p in pairs],
                y=[p[side] for p in pairs],
                name=side,
                marker_color=color,
                text=[None if p[side] is None else f"{p[side]:.3f}" for p in pairs],
            )
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(
        range=[min(0.0, *(p[s] or 0 for p in pairs for s in ("before discussion", "after discussion"))), 1]
    )
    return _legend_below(_layout(fig, "Before and after the discussion", 320))
