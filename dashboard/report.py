"""The HTML report of a run: the page's charts for its kind (built by `dashboard.charts` where a builder
exists), drawn from the stored run only, inside `engine.exports.html_report` with plotly.js inlined.

Every string from the run goes into a figure through `plot_text`, as on the pages."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dashboard import charts
from dashboard.charts.base import small
from dashboard.mechanism_ui import FigureBuilder
from dashboard.mechanisms.confidence import charts as confidence_charts
from dashboard.text import plot_text
from dashboard.ui_registry import uis
from engine.experiments.analysis import LOWER_IS_BETTER, available_costs, heatmap_grid, pareto_front
from engine.experiments.report import to_csv, to_html, to_json
from engine.exports import Figure, RunRecord, html_report, load_run
from engine.store import Store


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle that ships with the plotly package (no download: the report opens offline)."""

    return str(get_plotlyjs())


def _calibration(record: RunRecord) -> list[tuple[str, go.Figure]]:
    summary = record.run.summary
    if isinstance(summary.get("result"), dict):  # `confidence.calibrate_labels` keeps the report under "result"
        summary = summary["result"]
    out: list[tuple[str, go.Figure]] = []
    if isinstance(summary.get("bins"), list) and isinstance(summary.get("ece"), int | float):
        out.append(("Reliability diagram", confidence_charts.reliability_diagram(summary["bins"], summary["ece"])))
    if isinstance(summary.get("risk_coverage"), list):
        thresholds = summary.get("thresholds")
        marks: dict[str, Any] = thresholds if isinstance(thresholds, dict) else {}
        out.append(("Risk–coverage", confidence_charts.risk_coverage_curve(summary["risk_coverage"], marks)))
    return out


def _calls(record: RunRecord) -> list[tuple[str, go.Figure]]:
    if not record.calls:
        return []
    x = [f"#{c.id}" for c in record.calls]
    hover = [plot_text(f"{c.model_id} · {c.purpose}" + (f" · {c.error_type}" if c.error else "")) for c in record.calls]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=x,
            y=[c.prompt_tokens for c in record.calls],
            name="prompt tokens",
            marker_color=charts.MUTED,
            hovertext=hover,
        )
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=[c.completion_tokens for c in record.calls],
            name="completion tokens",
            marker_color=charts.BASE_COLOR,
            hovertext=hover,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[c.latency_s for c in record.calls],
            name="latency (s)",
            yaxis="y2",
            mode="markers",
            marker={"color": "#D95F02", "size": 8},
            hovertext=hover,
        )
    )
    fig.update_layout(  # counts and seconds start at 0: an axis never reaches below it
        barmode="stack",
        yaxis={"title": "tokens", "rangemode": "tozero"},
        yaxis2={
            "title": "latency (s)",
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "tickmode": "auto",  # its own round ticks (0.5 s), not the token axis' gridlines
            "tickformat": ".3~g",  # 0.002, 0.5, 12: three significant digits at any scale (".2~f" read 0.01, 0.01, 0)
            "showgrid": False,
        },
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0},  # off the axis
    )
    return [("LLM calls: tokens and latency", small(fig, "LLM calls: tokens and latency"))]


COMMON_FIGURES: list[FigureBuilder] = [_calibration, _calls]  # after each mechanism's (`MechanismUI.figures`)


def figure_builders() -> list[FigureBuilder]:
    """Every chart builder in its fixed order: each registered mechanism's, then the common ones."""
    return [build for u in uis() for build in u.figures()] + COMMON_FIGURES


def figures_for(record: RunRecord) -> list[Figure]:
    """The charts of this run's page, then its calls' tokens and latency; a chart that cannot be drawn from
    what the run stored is left out, never made up."""
    found: list[Figure] = []
    for build in figure_builders():
        for title, fig in build(record):
            found.append(Figure(title=title, spec=charts.for_export(fig).to_json()))
    return found


def report_of(record: RunRecord) -> str:
    """The self-contained HTML report of a loaded run."""
    figures = figures_for(record)
    return html_report(record, figures, plotly_js() if figures else "")


def run_report(store: Store, run_id: str) -> str:
    """The self-contained HTML report of a stored run."""
    return report_of(load_run(store, run_id))


# -- experiments -------------------------------------------------------------------------------------------------


def experiment_figures(shown: Mapping[str, Any]) -> list[Figure]:
    """The Experiments page's charts of a result, as it opens (the experiment's metric, its usual direction):
    the metric against every swept parameter, the heatmap of the first two, and the Pareto front against the
    first cost the cells differ in — each with the best cell starred, every colour explicit."""

    rows = list(shown.get("rows") or [])
    metric = str(shown.get("metric") or "")
    parameters = list(shown.get("parameters") or [])
    if not rows or not any(isinstance(r.get(metric), int | float) for r in rows):
        return []
    maximize = metric not in LOWER_IS_BETTER
    best = shown.get("best") or {}
    best_cell = best.get("cell") if isinstance(best, Mapping) else None
    found: list[tuple[str, go.Figure]] = []
    swept = [p for p in parameters if len({str(r.get(p)) for r in rows}) > 1]
    for p in swept:
        fig = charts.experiment_metric_vs(
            rows, p, metric, parameters=parameters, best_cell=best_cell, maximize=maximize
        )
        found.append((f"{metric} against {p}", fig))
    if len(swept) >= 2:
        x, y = swept[0], swept[1]
        grid = heatmap_grid(rows, x, y, metric, maximize=maximize)
        found.append((f"best {metric} by {x} × {y}", charts.experiment_heatmap(grid, x, y, metric, best=best or None)))
    costs = [c for c in available_costs(rows) if c != metric and len({r.get(c) for r in rows}) > 1]
    if costs:
        front = pareto_front(rows, metric, costs[0], maximize=maximize)
        fig = charts.experiment_pareto(rows, front, metric, costs[0], parameters=parameters, best_cell=best_cell)
        found.append((f"{metric} against {costs[0]}", fig))
    return [Figure(title=title, spec=charts.for_export(fig).to_json()) for title, fig in found]


def experiment_report(shown: Mapping[str, Any]) -> str:
    """The self-contained HTML report of an experiment: the page's charts, the cells, the definition."""

    figures = experiment_figures(shown)
    return to_html(shown, figures, plotly_js() if figures else "")


def experiment_export(shown: Mapping[str, Any], fmt: str) -> str:
    """An experiment's export in `fmt` (csv, json or html), for the page's buttons and the CLI alike."""

    if fmt == "csv":
        return to_csv(shown["rows"])
    if fmt == "json":
        return to_json(shown)
    return experiment_report(shown)
