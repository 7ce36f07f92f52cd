"""The director's charts: the rubric radar and the rules' hit rates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import _layout, error_bars
from dashboard.text import plot_text

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
    fig = _layout(fig, "Rubric (1–5 per criterion)", 340)
    # room below and beside the circle: the criterion at the bottom (自然さ) was cut off at the default margin
    return fig.update_layout(margin={"l": 40, "r": 40, "t": 56, "b": 36})


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
