"""The conversation's (hand raise) charts: will per turn, approvals as a Sankey, wills, the context ablation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import MUTED, _layout, rgba, series_colors
from dashboard.text import plot_text

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
