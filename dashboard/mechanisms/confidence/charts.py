"""The Confidence lab's charts: the gauge, the penalty waterfall, the factor breakdown, reliability, risk and
coverage, level shares, the steps' scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, LEVEL_COLORS, MUTED, _layout
from dashboard.text import plot_text

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
