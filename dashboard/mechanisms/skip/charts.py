"""The skip cache's charts: a conversation scope's timeline and the calls saved against the delay."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, MUTED, _layout, _legend_below
from dashboard.text import duration, plot_text
from engine.skip.workload import EPOCH

SKIP_ROWS = ["replies", "cache hits", "skip window", "judgments", "messages"]


RESPOND = "#D95F02"


SILENT_COLOR = "#1B9E77"


def _scope(message: Mapping[str, Any]) -> str:
    return f"{message['channel_id']}:{message['thread_ts'] or 'top'}"


def skip_scope_timeline(
    scope: str,
    messages: Sequence[Mapping[str, Any]],
    judgments: Sequence[Mapping[str, Any]],
    timeline: Sequence[Mapping[str, Any]],
) -> go.Figure:
    """One scope over simulated time: its messages, judgments (colour: respond or not; flagged ones say they
    were not cached), skip windows, cache hits and replies, one row each."""

    fig = go.Figure()
    mine = [m for m in messages if _scope(m) == scope]
    fig.add_trace(
        go.Scatter(
            x=[m["at"] for m in mine],
            y=["messages"] * len(mine),
            mode="markers",
            name="message",
            marker={"symbol": "circle", "size": 10, "color": "#7570B3"},
            text=[plot_text(f"{m['author']}: {m['text']}") for m in mine],
            hoverinfo="text+x",
        )
    )
    judged = [j for j in judgments if j["scope"] == scope]
    for j in judged:
        if j["skip_seconds"]:
            fig.add_trace(
                go.Scatter(
                    x=[j["at"], j["at"] + timedelta(seconds=j["skip_seconds"])],
                    y=["skip window"] * 2,
                    mode="lines",
                    showlegend=False,
                    line={"color": MUTED, "width": 8},
                    hovertext=f"confidence {j['confidence']:.2f} → not judged again for {duration(j['skip_seconds'])}",
                )
            )
    # One trace per outcome, each with its own colour: one trace coloured point by point drew a legend swatch
    # of one colour for diamonds of two.
    for respond, name, color in ((True, "judgment: reply", RESPOND), (False, "judgment: stay silent", SILENT_COLOR)):
        mine_judged = [j for j in judged if bool(j["should_respond"]) == respond]
        fig.add_trace(
            go.Scatter(
                x=[j["at"] for j in mine_judged],
                y=["judgments"] * len(mine_judged),
                mode="markers",
                name=name,
                marker={"symbol": "diamond", "size": 12, "color": color},
                text=[
                    f"{'reply' if respond else 'stay silent'} · confidence {j['confidence']:.2f}"
                    + (f" ⚠ {plot_text(', '.join(j['flags']))} (not cached)" if j.get("flags") else "")
                    for j in mine_judged
                ],
                hoverinfo="text+x",
            )
        )
    for kind, row, name, marker in (
        ("cache_hit", "cache hits", "cache hit", {"symbol": "line-ns-open", "size": 8, "color": BASE_COLOR}),
        ("reply", "replies", "bot reply", {"symbol": "star", "size": 12, "color": "#E7298A"}),
    ):
        events = [e for e in timeline if e["type"] == kind and e["scope"] == scope]
        fig.add_trace(
            go.Scatter(
                x=[EPOCH + timedelta(seconds=e["t"]) for e in events],
                y=[row] * len(events),
                mode="markers",
                name=name,
                marker=marker,
            )
        )
    fig.update_layout(yaxis={"categoryorder": "array", "categoryarray": SKIP_ROWS})
    channel, _, thread = scope.partition(":")
    title = f"Channel {channel}" if thread in ("", "top") else f"A thread in {channel}"
    # the legend under the plot: at the right it took a third of a 900 px window's width
    return _legend_below(_layout(fig, plot_text(title), 400))


def skip_tradeoff(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Judge calls against staleness p95 per swept configuration; the Pareto front as a dotted line. Settings
    with the same outcome are one marker (sized and labelled by how many), and the calls axis counts in whole
    calls: a handful of calls no longer reads as ticks at 7.2 and 7.4."""
    merged: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for r in rows:
        merged.setdefault((r["judge calls"], r["staleness p95 s"]), []).append(r)
    points = list(merged.items())
    stale = [float(y) for (_, y), _ in points] or [0.0]
    unit, per = ("h", 3600.0) if max(stale) >= 3 * 3600 else ("min", 60.0) if max(stale) >= 180 else ("s", 1.0)
    fig = go.Figure()
    # Two traces, each one colour (on the front / not): one trace coloured point by point drew its legend
    # swatch in one colour for markers of two.
    for on_front, name, color in ((True, "on the Pareto front", RESPOND), (False, "other settings", MUTED)):
        mine = [(xy, group) for xy, group in points if any(r["pareto"] for r in group) == on_front]
        fig.add_trace(
            go.Scatter(
                x=[x for (x, _), _ in mine],
                y=[float(y) / per for (_, y), _ in mine],
                mode="markers+text",
                name=name,
                showlegend=bool(mine),
                marker={"size": [10 + 3 * min(len(group), 6) for _, group in mine], "color": color},
                text=[f"×{len(group)}" if len(group) > 1 else "" for _, group in mine],
                textposition="top center",
                hovertext=[
                    f"{x} judge calls · staleness p95 {duration(float(y))}<br>"
                    + "<br>".join(
                        f"high skip {duration(r['high skip s'])} · default skip {duration(r['default skip s'])}"
                        for r in group
                    )
                    for (x, y), group in mine
                ],
                hoverinfo="text",
            )
        )
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["judge calls"])
    fig.add_trace(
        go.Scatter(
            x=[r["judge calls"] for r in front],
            y=[float(r["staleness p95 s"]) / per for r in front],
            mode="lines",
            name="Pareto front",
            line={"color": RESPOND, "dash": "dot"},
            hoverinfo="skip",
        )
    )
    calls = [float(r["judge calls"]) for r in rows] or [0.0]
    low, high = min(calls), max(calls)
    pad = max(1.0, (high - low) * 0.1)
    fig.update_xaxes(title="judge calls (with cache)", tickformat="d", range=[max(0.0, low - pad), high + pad])
    if high - low < 10:
        fig.update_xaxes(dtick=1)
    fig.update_yaxes(title=f"staleness p95 ({unit})", rangemode="tozero")
    # the legend under the axis title: at the right it took a third of a 900 px window's width
    return _layout(fig, "Calls saved vs. staleness", 420).update_layout(
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "xanchor": "left", "x": 0.0},
        margin={"l": 10, "r": 10, "t": 48, "b": 90},
    )
