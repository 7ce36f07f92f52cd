"""The Labels page's chart: a judge's agreement with your labels over time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, _layout, error_bars
from dashboard.text import plot_text


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
