"""Plotly figure builders: pure functions, data in, figure out (tested without a browser).

Plotly renders a subset of HTML (<a href>, <br>, <b>, <span style>) in labels, legends and hover text;
every string that comes from data (roles, verdict labels, step names, factor names) goes in through
`plot_text`, so it is shown as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from dashboard.text import duration, in_words, plot_text
from engine.experiments.analysis import number
from engine.skip import EPOCH

LEVEL_COLORS = {"SILENT": "#1B9E77", "NOTIFY": "#66A61E", "CONFIRM": "#E6AB02", "ESCALATE": "#D95F02"}
BASE_COLOR = "#1B6E5A"
MUTED = "#B8C4BE"
# Series colours (participants, jurors, stages): colour-blind-safe Dark2 first, then Paired's darker half.
PALETTE = ("#1B9E77", "#D95F02", "#7570B3", "#E7298A", "#66A61E", "#E6AB02", "#A6761D", "#1F78B4", "#666666", "#B15928")
# An export draws on this explicit light template: the dashboard's own ("streamlit") holds placeholder colours
# (#000001…#000030) that only the Streamlit front end replaces, so in a plain HTML file they are black.
EXPORT_TEMPLATE = "plotly_white"


def series_colors(names: Sequence[Any]) -> dict[str, str]:
    """One colour per name (a participant, a juror, a stage), the same in every chart that shows the same set:
    the names sorted, the palette taken in order. Keys are the names as text."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted({str(n) for n in names}))}


def rgba(color: str, alpha: float) -> str:
    """`#RRGGBB` at the given opacity (Sankey links, bands)."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def for_export(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a file that opens outside the dashboard: every colour explicit (the export template
    in full, on white), never the dashboard theme's placeholders."""
    out = go.Figure(fig)
    out.update_layout(template=pio.templates[EXPORT_TEMPLATE], paper_bgcolor="white", plot_bgcolor="white")
    return out


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.0, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 48, "b": 10},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig


# The confidence factors as a stakeholder reads them (the engine's names are identifiers).
FACTOR_WORDS = {
    "search_quality": "search quality",
    "tool_success": "tool success",
    "source_agreement": "source agreement",
    "llm_self_confidence": "self-confidence",
    "query_coverage": "query coverage",
}


def factor_words(name: str) -> str:
    return FACTOR_WORDS.get(name, name.replace("_", " "))


def confidence_gauge(score: float, thresholds: Mapping[str, float], level: str, title: str | None = None) -> go.Figure:
    """A gauge from 0 to 1 with the four level bands; `title` (default: the level) says more when the page
    overrides the score's level (a result that is not trustworthy)."""
    silent, notify, confirm = thresholds["silent"], thresholds["notify"], thresholds["confirm"]
    steps = [
        {"range": [0, confirm], "color": "#F6D5BF"},
        {"range": [confirm, notify], "color": "#F8EAB5"},
        {"range": [notify, silent], "color": "#D7EBC0"},
        {"range": [silent, 1], "color": "#BFE5D8"},
    ]
    fig = go.Figure(
        go.Indicator(
            mode="gauge+number",
            value=score,
            number={"valueformat": ".3f"},
            gauge={
                "axis": {"range": [0, 1], "tickvals": [0, confirm, notify, silent, 1]},
                "bar": {"color": LEVEL_COLORS.get(level, BASE_COLOR), "thickness": 0.3},
                "steps": steps,
                "threshold": {"line": {"color": "#1F2A24", "width": 3}, "thickness": 0.85, "value": score},
            },
            title={
                "text": plot_text(title or level),
                "font": {"color": LEVEL_COLORS.get(level, BASE_COLOR), "size": 18 if title is None else 15},
            },
        )
    )
    # The dial's end labels (0 and 1) sit outside the arc: side margins keep them from being cut off.
    return _layout(fig, "Confidence", 280).update_layout(margin={"l": 36, "r": 36, "t": 48, "b": 10})


def penalty_waterfall(
    base: float,
    penalties: Sequence[Mapping[str, Any]],
    final: float,
    breakdown: Mapping[str, Mapping[str, Any]] | None = None,
) -> go.Figure:
    """How the score is built, one bar a step: with `breakdown`, each counted factor's share of the base score
    (its value × weight over the counted weights) adds up to the base; then each penalty takes its step down;
    then the final (clamped, rounded) score. Without penalties the chart still shows where the score comes
    from, not two equal bars. Horizontal: the steps' names read in full at 900 px."""
    shares = [(n, c) for n, c in (breakdown or {}).items() if c.get("included") and c.get("contribution")]
    labels = [plot_text(factor_words(n)) for n, _ in shares]
    values = [float(c["contribution"]) for _, c in shares]
    text = [f"{float(c['contribution']):+.3f}" for _, c in shares]
    hover = [
        f"{factor_words(n)} {float(c['value']):.2f} × weight {float(c['weight']):g} → {float(c['contribution']):+.3f}"
        for n, c in shares
    ]
    measures = ["relative"] * len(shares)
    if not shares:  # no breakdown: the base is where the chart starts
        labels, values, text, hover, measures = ["base score"], [base], [f"{base:.3f}"], ["base score"], ["absolute"]
    else:
        labels, values, measures = labels + ["base score"], values + [base], measures + ["total"]
        text, hover = text + [f"{base:.3f}"], hover + ["base score: the weighted mean of the counted factors"]
    labels += [plot_text(p["name"]) for p in penalties] + ["score"]
    values += [p["after"] - p["before"] for p in penalties] + [final]
    text += [f"×{p['factor']:.3g}" for p in penalties] + [f"{final:.3f}"]
    hover += [f"{plot_text(p['name'])}: ×{p['factor']:.3g} → {p['after'] - p['before']:+.3f}" for p in penalties]
    hover += ["the score (clamped to [0, 1], rounded)"]
    measures += ["relative"] * len(penalties) + ["total"]
    fig = go.Figure(
        go.Waterfall(
            y=labels,
            x=values,
            orientation="h",
            measure=measures,
            text=text,
            textposition="auto",
            cliponaxis=False,
            decreasing={"marker": {"color": LEVEL_COLORS["ESCALATE"]}},
            increasing={"marker": {"color": LEVEL_COLORS["SILENT"]}},
            totals={"marker": {"color": BASE_COLOR}},
            connector={"line": {"color": MUTED}},
            hovertext=hover,
            hoverinfo="text",
        )
    )
    fig.update_xaxes(range=[0, max(1.0, base * 1.05)])
    fig.update_yaxes(autorange="reversed")
    title = "How the score is built" + ("" if penalties else " (no penalty)")
    return _layout(fig, title, 90 + 34 * len(labels)).update_layout(margin={"l": 10, "r": 50, "t": 48, "b": 10})


def breakdown_bars(breakdown: Mapping[str, Mapping[str, Any]]) -> go.Figure:
    """Each factor's value (named in words); a counted factor's bar says what it adds to the base score, one
    that is not counted is grey and says so. The text sits inside the bar, or beyond it when the bar is short
    (the axis leaves it room), so at 900 px none is cut."""
    names = list(breakdown)
    values = [breakdown[n]["value"] for n in names]
    colors = [BASE_COLOR if breakdown[n]["included"] else MUTED for n in names]
    labels = [plot_text(factor_words(n)) for n in names]
    text = [
        f"{breakdown[n]['value']:.2f} → {breakdown[n]['contribution']:+.3f}"
        if breakdown[n]["included"]
        else f"{breakdown[n]['value']:.2f}, not counted"
        for n in names
    ]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=colors,
            text=text,
            # short bars (a factor at 0 has none) carry their text beyond them: 'auto' drew none there
            textposition=["inside" if float(v) >= 0.35 else "outside" for v in values],
            insidetextanchor="end",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0, 1.0])
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Factor values (grey: not counted)").update_layout(margin={"l": 10, "r": 90, "t": 48, "b": 10})


def reliability_diagram(bins: Sequence[Mapping[str, Any]], ece: float) -> go.Figure:
    """Accuracy per confidence bin against the diagonal of perfect calibration; bar width = bin."""
    used = [b for b in bins if b["count"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect", line={"dash": "dot", "color": MUTED}))
    fig.add_trace(
        go.Bar(
            x=[(b["lower"] + b["upper"]) / 2 for b in used],
            y=[b["accuracy"] for b in used],
            width=[b["upper"] - b["lower"] for b in used],
            name="accuracy",
            marker_color=BASE_COLOR,
            opacity=0.75,
            customdata=[[b["count"], b["mean_confidence"]] for b in used],
            hovertemplate="bin %{x:.2f}<br>accuracy %{y:.2f}<br>n=%{customdata[0]}<br>mean conf %{customdata[1]:.3f}",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[b["mean_confidence"] for b in used],
            y=[b["accuracy"] for b in used],
            mode="markers",
            name="mean confidence",
            marker={"color": "#D95F02", "size": 9},
        )
    )
    fig.update_xaxes(range=[0, 1], title="confidence")
    fig.update_yaxes(range=[0, 1.05], title="accuracy")
    return _layout(fig, f"Reliability diagram · ECE {ece:.3f}", 360)


def risk_coverage_curve(points: Sequence[Mapping[str, Any]], marks: Mapping[str, Mapping[str, Any]]) -> go.Figure:
    """Error rate of the kept items as the threshold drops; the level thresholds are marked on it."""
    fig = go.Figure(
        go.Scatter(
            x=[p["coverage"] for p in points],
            y=[p["risk"] for p in points],
            mode="lines+markers",
            line={"shape": "hv", "color": BASE_COLOR},
            name="risk",
            customdata=[p["threshold"] for p in points],
            hovertemplate="score ≥ %{customdata:.3f}<br>coverage %{x:.2f}<br>risk %{y:.2f}",
        )
    )
    for name, point in marks.items():
        if point.get("risk") is None:
            continue
        color = LEVEL_COLORS.get(name.upper(), "#333")
        fig.add_trace(
            go.Scatter(
                x=[point["coverage"]],
                y=[point["risk"]],
                mode="markers+text",
                marker={"size": 13, "color": color, "symbol": "diamond"},
                text=[f"{name} ≥ {point['threshold']:g}"],
                textposition="top center",
                name=name,
            )
        )
    fig.update_xaxes(range=[0, 1.02], title="coverage (share of items acted on without asking)")
    fig.update_yaxes(range=[0, 1.02], title="risk (error rate of those items)")
    return _layout(fig, "Risk–coverage", 360)


def level_shares(shares: Mapping[str, float]) -> go.Figure:
    """One stacked bar: the share of items at each intervention level."""
    fig = go.Figure()
    for level in ("SILENT", "NOTIFY", "CONFIRM", "ESCALATE"):
        fig.add_trace(
            go.Bar(
                x=[shares.get(level, 0.0)],
                y=["items"],
                orientation="h",
                name=level,
                marker_color=LEVEL_COLORS[level],
                text=[f"{level} {shares.get(level, 0.0):.0%}"],
                textposition="inside",
            )
        )
    fig.update_layout(barmode="stack", showlegend=False)
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    return _layout(fig, "Share of items at each level", 170)


def step_scores(
    steps: Sequence[str], scores: Sequence[float], levels: Sequence[str], aggregates: Mapping[str, float]
) -> go.Figure:
    """Per-step scores coloured by level, with each aggregation method as a line."""
    fig = go.Figure(
        go.Bar(
            x=[plot_text(s) for s in steps],
            y=list(scores),
            marker_color=[LEVEL_COLORS.get(lv, BASE_COLOR) for lv in levels],
            text=[f"{s:.3f}" for s in scores],
            textposition="outside",
            name="step",
        )
    )
    dashes = {"mean": "solid", "min": "dot", "weighted": "dash"}
    for method, value in aggregates.items():
        fig.add_hline(
            y=value,
            line_dash=dashes.get(method, "dashdot"),
            line_color="#1F2A24",
            annotation_text=f"{plot_text(method)} {value:.3f}",
            annotation_position="top left",
        )
    fig.update_yaxes(range=[0, 1.1])
    return _layout(fig, "Plan: step scores and aggregates")


VERDICT_COLORS = {"safe_pass": "#54A24B", "needs_review": "#EECA3B", "unsafe_fail": "#E45756", "failed": "#8C8C8C"}


def _legend_below(fig: go.Figure) -> go.Figure:
    """A horizontal legend under the plot: in a narrow column (the Replay page's side-by-side compare) a legend
    at the right would cover the plot and the neighbouring figure's."""
    fig.update_layout(
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
        margin={"l": 10, "r": 10, "t": 48, "b": 80},
    )
    return fig


def jury_trajectory(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
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
    fig.update_yaxes(range=[-5, 105], title="score")
    title = "Score trajectory per juror" if len(steps) > 1 else "Phase-1 scores (no discussion round)"
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
    return _legend_below(_layout(fig, "Round timeline: request → answer", 360))


def jury_verdicts(distribution: Mapping[str, Mapping[str, int]], labels: Sequence[str]) -> go.Figure:
    """How many jurors held each verdict, per stage ('phase 1', and 'after discussion' once a round ran), the
    verdicts in words; a verdict no juror held at any stage is left out of the bars and the legend."""
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
    title = "Verdict distribution" if len(distribution) > 1 else "Phase-1 verdicts (no discussion round)"
    return _legend_below(_layout(fig, title, 360))


# -- director ------------------------------------------------------------------------------------------------

RUBRIC_GREEN = "#1B6E5A"
HIT_COLORS = {"WARN": "#E6AB02", "RETRY": "#D95F02"}


def rubric_radar(scores: Mapping[str, float], labels: Mapping[str, str]) -> go.Figure:
    """The rubric's criteria (1–5) on a closed radar; `labels` maps each criterion to its display name."""
    names = [plot_text(labels.get(k, k)) for k in scores]
    values = [scores[k] for k in scores]
    fig = go.Figure(
        go.Scatterpolar(
            r=values + values[:1], theta=names + names[:1], fill="toself", line_color=RUBRIC_GREEN, name="rubric"
        )
    )
    fig.update_layout(polar={"radialaxis": {"range": [0, 5], "tickvals": [1, 2, 3, 4, 5]}}, showlegend=False)
    return _layout(fig, "Rubric (1–5 per criterion)", 320)


def rule_hit_rates(rates: Mapping[str, Mapping[str, Any]]) -> go.Figure:
    """Per rule, the share of lines at WARN and at RETRY side by side, each with its 95 % Wilson interval as an
    error bar where the rates carry one (`warn_ci`, `retry_ci`)."""
    rules = [plot_text(r.replace("_", " ")) for r in rates]  # 'topic loop', not the identifier
    bars = []
    for status in ("WARN", "RETRY"):
        name = status.lower()
        rows = list(rates.values())
        shown = any(isinstance(r.get(f"{name}_ci"), list) for r in rows)
        error = error_bars(rows, name, "#555555") if shown else None
        values = [float(r[name]) for r in rows]
        bars.append(go.Bar(name=status, x=rules, y=values, marker_color=HIT_COLORS[status], error_y=error))
    fig = go.Figure(bars)
    fig.update_layout(barmode="group", yaxis_tickformat=".0%")
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Rule hit rates with 95 % intervals (the spec's cut-offs)", 300)


# -- skip cache ----------------------------------------------------------------------------------------------

SKIP_ROWS = ["replies", "cache hits", "skip window", "judgments", "messages"]
RESPOND, SILENT_COLOR = "#D95F02", "#1B9E77"


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


# -- conversation (hand raise) -------------------------------------------------------------------------------

# A raised hand is approved, skipped by the user or timed out; a hand that stayed down is "stayed quiet" (never
# "skipped": nobody skipped it) unless a rule let it speak anyway (brainstorm's auto-approve).
SANKEY_NODES = ["raised", "not raised", "approved", "skipped", "timeout", "stayed quiet", "answered"]


def _by_participant(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row["participant"]), []).append(row)
    return groups


def will_per_turn(rows: Sequence[Mapping[str, Any]], threshold: float | None) -> go.Figure:
    """Each participant's will per turn (telemetry rows), with the threshold (when known) as a dotted line."""
    fig = go.Figure()
    groups = _by_participant(rows)
    colors = series_colors(list(groups))
    for pid, mine in groups.items():
        fig.add_trace(
            go.Scatter(
                x=[r["turn"] for r in mine],
                y=[r["will"] for r in mine],
                mode="lines+markers",
                name=plot_text(pid),
                line={"color": colors[pid]},
                marker={"color": colors[pid]},
            )
        )
    if threshold is not None:
        fig.add_hline(y=threshold, line_dash="dot", line_color="#8C8C8C", annotation_text="threshold")
    fig.update_yaxes(range=[0, 1], title="will")
    return _layout(fig, "Will per participant per turn")


# The approval flow's nodes: where a hand goes (green: spoke, grey: held back, amber: nobody decided).
SANKEY_COLORS = {
    "raised": "#1F78B4",
    "not raised": MUTED,
    "approved": "#1B9E77",
    "skipped": "#8C8C8C",
    "timeout": "#E6AB02",
    "stayed quiet": "#B8BCC4",
    "answered": "#1B6E5A",
}


def approval_flows(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """How many hands went each way: raised → approved / skipped / timed out, not raised → stayed quiet (or
    approved, when a rule let it speak), and every approved hand → answered. Only a raised hand can be
    skipped: the user never saw a card for one that stayed down."""
    flows: dict[tuple[str, str], int] = {}
    for row in rows:
        raised = row["status"] in ("raised", "mentioned")
        if row["allowed"]:
            middle = "timeout" if row["decided_by"] == "timeout" else "approved"
        elif not raised:
            middle = "stayed quiet"
        else:
            middle = "timeout" if row["decided_by"] == "timeout" else "skipped"
        start = "raised" if raised else "not raised"
        flows[(start, middle)] = flows.get((start, middle), 0) + 1
        if row["allowed"]:
            flows[(middle, "answered")] = flows.get((middle, "answered"), 0) + 1
    return flows


def approval_sankey(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Raised → approved / skipped / timed out → answered; not raised → stayed quiet. Each link
    takes its destination's colour (see-through), so the flows read on a light page."""
    flows = approval_flows(rows)
    index = {label: i for i, label in enumerate(SANKEY_NODES)}
    fig = go.Figure(
        go.Sankey(
            node={
                "label": SANKEY_NODES,
                "color": [SANKEY_COLORS[n] for n in SANKEY_NODES],
                "line": {"color": "white", "width": 1},
                "pad": 18,
            },
            link={
                "source": [index[a] for a, _ in flows],
                "target": [index[b] for _, b in flows],
                "value": list(flows.values()),
                "color": [rgba(SANKEY_COLORS[b], 0.45) for _, b in flows],
            },
            textfont={"color": "#262730", "size": 13},
        )
    )
    return _layout(fig, "Approval flow")


def will_histogram(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Will distribution per participant in 0.1 bins, the participants' bars side by side in each bin (overlaid,
    their colours blended into ones the legend does not show); an over-raising participant is marked in the
    legend."""
    fig = go.Figure()
    groups = _by_participant(rows)
    colors = series_colors(list(groups))
    for pid, mine in groups.items():
        over = any("over_raise" in str(r.get("flags") or "") for r in mine)
        fig.add_trace(
            go.Histogram(
                x=[r["will"] for r in mine],
                name=plot_text(pid) + (" ⚠ over-raise" if over else ""),
                xbins={"start": 0, "end": 1, "size": 0.1},
                marker={"color": colors[pid], "line": {"color": colors[pid], "width": 1}},
                opacity=0.85,  # side by side: each bar in its participant's own colour, none blended
            )
        )
    fig.update_layout(barmode="group", bargap=0.15, bargroupgap=0.05)
    # the whole 0–1 scale with a tick at each bin's edge (not only the bins that hold a hand), and whole counts
    fig.update_xaxes(title="will", range=[0, 1], dtick=0.1)
    most = max((len(mine) for mine in groups.values()), default=0)
    fig.update_yaxes(title="turns", rangemode="tozero", **({"dtick": 1} if most <= 10 else {}))
    return _layout(fig, "Will distribution per participant", 300)


ABLATION_METRICS = ("accuracy", "precision", "recall", "f1", "consistency")


def context_ablation(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """The judge benchmark's metrics per method and context, grouped (a missing figure is drawn at 0)."""
    fig = go.Figure()
    for row in rows:
        fig.add_trace(
            go.Bar(
                name=plot_text(f"{row['method']} · {row['context']}"),
                x=list(ABLATION_METRICS),
                y=[row.get(m) if row.get(m) is not None else 0 for m in ABLATION_METRICS],
            )
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1])
    return _layout(fig, "Context ablation")


# -- experiments ------------------------------------------------------------------------------------------------

BEST = "#D95F02"
TIED = "#7570B3"  # cells tied with the best: Dark2's purple, apart from the base green and the best's orange


def _axis_values(values: Sequence[Any]) -> list[Any]:
    """Numbers stay numbers (a numeric axis); anything else is untrusted text on a category axis."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return list(values)
    return [plot_text(v) for v in values]


def _cell_hover(rows: Sequence[Mapping[str, Any]], parameters: Sequence[str]) -> list[str]:
    return [plot_text(f"cell {r.get('cell')} · " + " · ".join(f"{p}={r.get(p)}" for p in parameters)) for r in rows]


def experiment_metric_vs(
    rows: Sequence[Mapping[str, Any]],
    parameter: str,
    metric: str,
    *,
    parameters: Sequence[str] = (),
    best_cell: int | None = None,
    maximize: bool = True,
) -> go.Figure:
    """Every cell's `metric` against one parameter (the others spread as points), the best value per
    parameter value as a line, the best cell marked."""

    scored = [r for r in rows if number(r.get(metric)) is not None and r.get(parameter) is not None]
    fig = go.Figure()
    ci_key = f"{metric}_ci"
    has_ci = any(isinstance(r.get(ci_key), list) for r in scored)
    tied = [r for r in scored if r.get("tied_with_best") and r.get("cell") != best_cell]
    rest = [r for r in scored if not (r.get("tied_with_best") and r.get("cell") != best_cell)]
    for group, name, color in (
        (rest, "cell", BASE_COLOR),
        (tied, "cell tied with the best (not significantly worse)", TIED),
    ):
        if not group:
            continue
        fig.add_trace(
            go.Scatter(
                x=_axis_values([r[parameter] for r in group]),
                y=[r[metric] for r in group],
                mode="markers",
                name=name,
                marker={"size": 8, "color": color, "opacity": 0.7},
                text=_cell_hover(group, parameters),
                error_y=error_bars(group, metric, color) if has_ci and len(scored) <= ERROR_BAR_CELLS else None,
            )
        )
    best_row = next((r for r in scored if best_cell is not None and r.get("cell") == best_cell), None)
    band = best_row.get(ci_key) if best_row is not None else None
    if isinstance(band, list) and len(band) == 2:
        # the tie band: cells inside the best cell's 95 % interval are within its noise
        fig.add_hrect(y0=band[0], y1=band[1], fillcolor=BEST, opacity=0.12, line_width=0, layer="below")
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name="best cell's 95 % interval",
                marker={"size": 12, "color": BEST, "opacity": 0.3, "symbol": "square"},
            )
        )
    pick = max if maximize else min
    by_value: dict[Any, float] = {}
    for r in scored:
        v = r[parameter]
        by_value[v] = pick(by_value.get(v, r[metric]), r[metric])
    order = sorted(by_value, key=lambda v: (0, v, "") if isinstance(v, int | float) else (1, 0, str(v)))
    fig.add_trace(
        go.Scatter(
            x=_axis_values(order),
            y=[by_value[v] for v in order],
            mode="lines",
            name="best per value",
            line={"color": BASE_COLOR},
        )
    )
    best = [r for r in scored if best_cell is not None and r.get("cell") == best_cell]
    if best:
        fig.add_trace(
            go.Scatter(
                x=_axis_values([best[0][parameter]]),
                y=[best[0][metric]],
                mode="markers",
                name=f"best cell {best_cell}",
                marker={"size": 15, "color": BEST, "symbol": "star"},
            )
        )
    fig.update_xaxes(title=plot_text(words(parameter)))
    fig.update_yaxes(title=plot_text(words(metric)))
    return _legend_below(_layout(fig, f"{plot_text(words(metric))} against {plot_text(words(parameter))}", 340))


def words(name: str) -> str:
    """A parameter or metric identifier as words on a chart: "thresholds.notify" → "thresholds notify"."""
    return str(name).replace("_", " ").replace(".", " ").strip()


ERROR_BAR_CELLS = 100  # above this, one bar per cell hides the cells: the tie band and colours say it instead


def error_bars(rows: Sequence[Mapping[str, Any]], metric: str, color: str) -> dict[str, Any]:
    """Each cell's 95 % interval as asymmetric error bars (none where a cell has no interval)."""
    plus, minus = [], []
    for r in rows:
        ci, value = r.get(f"{metric}_ci"), float(r[metric])
        low, high = (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else (value, value)
        plus.append(high - value)
        minus.append(value - low)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": color, "thickness": 1}


def experiment_heatmap(
    grid: Mapping[str, Any], x: str, y: str, metric: str, *, best: Mapping[str, Any] | None = None
) -> go.Figure:
    """The best `metric` for each pair of two parameters' values (`engine.experiments.analysis.heatmap_grid`);
    `best` (the best cell's row) is starred on its square."""
    values = [v for row in grid["z"] for v in row if isinstance(v, int | float)]
    # A rate is coloured on its whole 0–1 scale: a scale stretched over 0.82–0.87 paints one item's difference
    # as purple against yellow. Each square also says its value.
    rate = bool(values) and all(0.0 <= v <= 1.0 for v in values)
    fig = go.Figure(
        go.Heatmap(
            x=[plot_text(v) for v in grid["x"]],
            y=[plot_text(v) for v in grid["y"]],
            z=grid["z"],
            colorscale="Viridis",
            zmin=0.0 if rate else None,
            zmax=1.0 if rate else None,
            texttemplate="%{z:.2f}",
            colorbar={"title": {"text": plot_text(words(metric))}},
            hovertemplate="%{x} × %{y}: %{z}<extra></extra>",
        )
    )
    if best is not None and best.get(x) is not None and best.get(y) is not None:
        fig.add_trace(
            go.Scatter(
                x=[plot_text(best[x])],
                y=[plot_text(best[y])],
                mode="markers",
                name=f"best cell {best.get('cell')}",
                marker={"size": 18, "color": BEST, "symbol": "star", "line": {"color": "white", "width": 1.5}},
                hovertemplate=f"best cell {best.get('cell')}<extra></extra>",
                showlegend=False,
            )
        )
    fig.update_xaxes(title=plot_text(words(x)), type="category")
    fig.update_yaxes(title=plot_text(words(y)), type="category")
    return _layout(fig, f"best {plot_text(words(metric))} by {plot_text(words(x))} × {plot_text(words(y))}", 380)


def experiment_pareto(
    rows: Sequence[Mapping[str, Any]],
    front: Sequence[Mapping[str, Any]],
    quality: str,
    cost: str,
    *,
    parameters: Sequence[str] = (),
    best_cell: int | None = None,
) -> go.Figure:
    """Quality against a cost for every cell; the Pareto front (`analysis.pareto_front`) as a line, the best
    cell marked."""

    on_front = {r.get("cell") for r in front}
    points = [r for r in rows if number(r.get(cost)) is not None and number(r.get(quality)) is not None]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[r[cost] for r in points],
            y=[r[quality] for r in points],
            mode="markers",
            name="cell",
            marker={"size": 10, "color": [BASE_COLOR if r.get("cell") in on_front else MUTED for r in points]},
            text=_cell_hover(points, parameters),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[r[cost] for r in front],
            y=[r[quality] for r in front],
            mode="lines+markers",
            name="Pareto front",
            line={"color": BASE_COLOR, "dash": "dot", "shape": "hv"},
            text=_cell_hover(front, parameters),
        )
    )
    best = [r for r in points if best_cell is not None and r.get("cell") == best_cell]
    if best:
        fig.add_trace(
            go.Scatter(
                x=[best[0][cost]],
                y=[best[0][quality]],
                mode="markers",
                name=f"best cell {best_cell}",
                marker={"size": 16, "color": BEST, "symbol": "star"},
            )
        )
    fig.update_xaxes(title=plot_text(cost) + " (lower is better)")
    fig.update_yaxes(title=plot_text(quality))
    return _legend_below(_layout(fig, f"{plot_text(quality)} against {plot_text(cost)}", 380))


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


def agreement_over_time(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """A judge's agreement with your labels per period (a day, or ten labels): the share matched, its 95 %
    interval as error bars, the number of labels in the hover. `date` is a day or a label such as 'labels 1–10'."""
    shown = [
        {**r, "accuracy_ci": list(r["accuracy_ci"]) if r.get("accuracy_ci") is not None else None}
        for r in rows
        if r.get("accuracy") is not None
    ]
    fig = go.Figure(
        go.Scatter(
            x=[plot_text(r.get("date")) for r in shown],
            y=[float(r["accuracy"]) for r in shown],
            mode="lines+markers",
            name="agreement",
            line={"color": BASE_COLOR},
            marker={"color": BASE_COLOR, "size": 8},
            error_y=error_bars(shown, "accuracy", BASE_COLOR),
            customdata=[int(r.get("n") or 0) for r in shown],
            hovertemplate="%{x}<br>agreement %{y:.0%} on %{customdata} labels<extra></extra>",
        )
    )
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", title="agreement with you")
    fig.update_xaxes(type="category", title=None)
    return _layout(fig, "Agreement over time (95 % interval)")
