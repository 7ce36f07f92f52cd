"""The HTML report of a run: the page's charts for its kind (built by `dashboard.charts` where a builder
exists), drawn from the stored run only, inside `engine.exports.html_report` with plotly.js inlined.

Every string from the run goes into a figure through `plot_text`, as on the pages."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dashboard import charts
from dashboard.mechanism_ui import FigureBuilder
from dashboard.text import plot_text, scope_words
from dashboard.ui_registry import uis
from engine.confidence.settings import LevelThresholds
from engine.director.rubric import RUBRIC_CRITERIA
from engine.experiments.analysis import LOWER_IS_BETTER, available_costs, heatmap_grid, pareto_front
from engine.experiments.report import to_csv, to_html, to_json
from engine.exports import Figure, RunRecord, html_report, load_run
from engine.handraise.exports import hands
from engine.jury.view import JuryView
from engine.skip.exports import simulation
from engine.store import Store


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle that ships with the plotly package (no download: the report opens offline)."""

    return str(get_plotlyjs())


def _small(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.0, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 48, "b": 10},
    )
    return fig


def _jury(record: RunRecord) -> list[tuple[str, go.Figure]]:

    view = JuryView.fold(record.pairs())
    if not view.phase1 or (view.identical_seats and not view.rounds):
        return []  # one judgment repeated: per-juror charts would draw it as three jurors agreeing (as on the page)
    labels = view.rubric.get("verdicts") or ["safe_pass", "needs_review", "unsafe_fail"]
    out = [("Score trajectory per juror", charts.jury_trajectory(view.trajectory()))]
    timeline = view.timeline()
    if timeline:
        out.append(("Round timeline", charts.jury_timeline(timeline)))
    out.append(("Verdict distribution", charts.jury_verdicts(view.verdicts(), [*labels, "failed"])))
    return out


def _confidence(record: RunRecord) -> list[tuple[str, go.Figure]]:

    scored = record.pairs("confidence_scored")
    if not scored:
        return []
    p = scored[-1][1]
    score, level = p.get("score") or {}, (p.get("decision") or {}).get("level", "")
    settings = record.run.config.get("settings") or {}
    thresholds = {**LevelThresholds().model_dump(), **(settings.get("thresholds") or {})}
    return [
        ("Confidence", charts.confidence_gauge(float(score.get("score", 0.0)), thresholds, str(level))),
        (
            "How the score is built",
            charts.penalty_waterfall(
                float(score.get("base", 0.0)),
                score.get("penalties") or [],
                float(score.get("score", 0.0)),
                score.get("breakdown") or {},
            ),
        ),
        ("Factor breakdown", charts.breakdown_bars(score.get("breakdown") or {})),
    ]


def _conversation(record: RunRecord) -> list[tuple[str, go.Figure]]:
    rows = hands(record)  # the `conversation_hands` export table's builder
    if not rows:
        return []
    threshold = (record.run.config.get("config") or {}).get("threshold")
    will = charts.will_per_turn(rows, float(threshold) if isinstance(threshold, int | float) else None)
    return [
        ("Will per participant per turn", _small(will, "Will per participant per turn")),
        ("Approval flow", _small(charts.approval_sankey(rows), "Approval flow")),
    ]


def _metric_bars(record: RunRecord, names: tuple[str, ...], title: str) -> list[tuple[str, go.Figure]]:
    """The run's headline rates as bars, each with its stored 95 % interval (`<metric>_ci`) as an error bar and
    in its label, "0.50 (0.27–0.73)"."""
    summary = record.run.summary
    present = [n for n in names if isinstance(summary.get(n), int | float)]
    if not present:
        return []

    def label(name: str) -> str:
        ci = summary.get(f"{name}_ci")
        spread = f" ({ci[0]:.2f}–{ci[1]:.2f})" if isinstance(ci, list) and len(ci) == 2 else ""
        return f"{summary[name]:.2f}{spread}"

    rows = [{"value": summary[n], "value_ci": summary.get(f"{n}_ci")} for n in present]
    fig = go.Figure(
        go.Bar(
            x=list(present),
            y=[summary[n] for n in present],
            marker_color=charts.BASE_COLOR,
            text=[label(n) for n in present],
            textposition="outside",
            error_y=charts.error_bars(rows, "value", "#555555"),
        )
    )
    fig.update_yaxes(range=[0, 1.1])
    return [(title, _small(fig, title))]


def _handraise_eval(record: RunRecord) -> list[tuple[str, go.Figure]]:
    if record.run.kind != "handraise.eval":
        return []
    return _metric_bars(record, ("accuracy", "precision", "recall", "f1", "consistency"), "Judge benchmark")


def _jury_eval(record: RunRecord) -> list[tuple[str, go.Figure]]:
    if record.run.kind != "jury.eval":
        return []
    return _metric_bars(record, ("phase1_accuracy", "accuracy", "outcome_changed_rate"), "Case-set evaluation")


def _director(record: RunRecord) -> list[tuple[str, go.Figure]]:

    out: list[tuple[str, go.Figure]] = []
    rubrics = [p.get("rubric") for _, p in record.pairs("director_verdict")]
    scored = [r for r in rubrics if isinstance(r, dict) and isinstance(r.get("scores"), dict)]
    if record.run.kind == "director.check" and scored:
        scores = scored[-1]["scores"]
        names = [k for k in RUBRIC_CRITERIA if k in scores]
        values = [scores[k] for k in names]
        radar = go.Figure(
            go.Scatterpolar(
                r=values + values[:1],
                theta=[plot_text(n) for n in names + names[:1]],
                fill="toself",
                line_color=charts.BASE_COLOR,
            )
        )
        radar.update_layout(polar={"radialaxis": {"range": [0, 5]}}, showlegend=False)
        out.append(("Rubric", _small(radar, "Rubric")))
    # a script's lines: `director_line` events (the rubric average in `rubric`), or the older `director_rubric`
    lines = [
        {"id": p.get("id"), "average": p.get("rubric") if t == "director_line" else p.get("average")}
        for t, p in record.pairs("director_line", "director_rubric")
    ]
    lines = [p for p in lines if isinstance(p["average"], int | float) and not isinstance(p["average"], bool)]
    if record.run.kind == "director.batch" and lines:
        fig = go.Figure(
            go.Bar(
                x=[plot_text(p.get("id")) for p in lines],
                y=[p["average"] for p in lines],
                marker_color=charts.BASE_COLOR,
            )
        )
        fig.update_yaxes(range=[0, 5.2], title="rubric average")
        out.append(("Rubric average per line", _small(fig, "Rubric average per line")))
    result = record.run.summary.get("result")
    rates = result.get("hit_rates") if isinstance(result, dict) else None
    if record.run.kind == "director.batch" and isinstance(rates, dict) and rates:
        title = "Rule hit rates with 95 % intervals"
        out.append((title, _small(charts.rule_hit_rates(rates), title)))
    turns = [p for _, p in record.pairs("director_turn")]
    if turns:
        colors = {"PASS": "#1B9E77", "WARN": "#E6AB02", "RETRY": "#D95F02"}
        fig = go.Figure(
            go.Bar(
                x=[f"{p.get('index')}: {plot_text(p.get('speaker'))}" for p in turns],
                y=[p.get("attempts", 1) for p in turns],
                marker_color=[colors.get(str(p.get("status")), charts.MUTED) for p in turns],
                text=[plot_text(p.get("outcome")) for p in turns],
                textposition="outside",
            )
        )
        fig.update_yaxes(title="drafts", dtick=1)
        out.append(("Drafts per turn (colour: status)", _small(fig, "Drafts per turn (colour: status)")))
    return out


def _simulation(record: RunRecord) -> list[tuple[str, go.Figure]]:
    rows = [r for r in simulation(record) if isinstance(r.get("judge_calls"), int | float)]  # its export table
    if not rows:
        return []
    fig = go.Figure(
        go.Bar(
            x=[plot_text(r["setting"]) for r in rows],
            y=[r["judge_calls"] for r in rows],
            marker_color=[charts.MUTED, charts.BASE_COLOR][: len(rows)],
        )
    )
    fig.update_yaxes(title="judge calls")
    out = [("Judge calls with and without the cache", _small(fig, "Judge calls with and without the cache"))]
    sweep = record.run.summary.get("sweep")
    if isinstance(sweep, list) and sweep:  # the page's "Calls saved vs. delay" tab
        out.append(("Calls saved vs. delay (trade-off sweep)", charts.skip_tradeoff(sweep)))
    stored = next((p for _, p in record.pairs("skip_scope_timeline")), None)
    if stored and stored.get("scope"):  # the page's timeline, of the busiest conversation (the page's first)
        try:
            messages = [m | {"at": datetime.fromisoformat(m["at"])} for m in stored.get("messages") or []]
            judgments = [j | {"at": datetime.fromisoformat(j["at"])} for j in stored.get("judgments") or []]
            title = f"Per-conversation timeline ({scope_words(str(stored['scope']))})"
            timeline = stored.get("timeline") or []
            out.append((title, charts.skip_scope_timeline(str(stored["scope"]), messages, judgments, timeline)))
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):  # not of its shape: no chart
            pass
    return out


def _calibration(record: RunRecord) -> list[tuple[str, go.Figure]]:
    summary = record.run.summary
    if isinstance(summary.get("result"), dict):  # `confidence.calibrate_labels` keeps the report under "result"
        summary = summary["result"]
    out: list[tuple[str, go.Figure]] = []
    if isinstance(summary.get("bins"), list) and isinstance(summary.get("ece"), int | float):
        out.append(("Reliability diagram", charts.reliability_diagram(summary["bins"], summary["ece"])))
    if isinstance(summary.get("risk_coverage"), list):
        thresholds = summary.get("thresholds")
        marks: dict[str, Any] = thresholds if isinstance(thresholds, dict) else {}
        out.append(("Risk–coverage", charts.risk_coverage_curve(summary["risk_coverage"], marks)))
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
    return [("LLM calls: tokens and latency", _small(fig, "LLM calls: tokens and latency"))]


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
