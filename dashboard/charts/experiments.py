"""The Experiments page's charts: a metric against a parameter, the heatmap, the Pareto front."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, ERROR_BAR_CELLS, MUTED, _layout, _legend_below, error_bars, words
from dashboard.text import plot_text
from engine.experiments.analysis import number

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
