"""Experiments: define a sweep in a form or load its YAML (a shipped one or an upload), validated with
errors that name the line and the field; launch it in the run registry (progress per cell, Cancel); then
the results table with the best cell marked and each cell's run one click away, metric-vs-parameter
charts, a heatmap of two parameters, the Pareto front of quality against calls, tokens, latency or $, two
cells side by side, the jury's before/after-discussion view, and CSV / JSON / HTML exports."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import yaml

from dashboard import charts, state
from dashboard import formstate as form
from dashboard.components import GLOSSARY, details_on, md
from dashboard.live_runs import RegistryError
from dashboard.mechanisms.jury import charts as jury_charts
from dashboard.report import experiment_export
from dashboard.watch import set_url_run, url_run, watch_run
from engine.comparison import ROUNDING, compact_rows, comparison_row
from engine.config import get_settings
from engine.experiments import DefinitionError, Experiment, mechanism, parse_definition, run_experiment
from engine.experiments.analysis import (
    LOWER_IS_BETTER,
    compare_cells,
    heatmap_grid,
    jury_cases,
    jury_effect,
    metric_columns,
    pareto_front,
    shared_costs,
    traded_costs,
)
from engine.experiments.evidence import cell_diff, table_evidence
from engine.experiments.results import list_experiments, show_experiment
from engine.history import figure_text
from engine.inputs import InputError, read_text, read_upload, shown_problems
from engine.registry import mechanisms
from models import safe_yaml

KEY = "experiments."
FORM = KEY.removesuffix(".")  # its form's marker: "experiments.form_for" names the run the form shows
DETAILS = "experiments"  # the page's Details toggle (dashboard.components.details_on)
SOURCES = ("Shipped YAML", "Upload a YAML", "Form")


def shipped_files() -> list[Path]:
    return sorted((get_settings().data_dir / "experiments").glob("*.y*ml"))


def _init_state() -> None:
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "error", None)


def render() -> None:
    _init_state()
    st.title("🧪 Experiments")
    st.caption(
        "Try every combination of a few settings on a case set and compare them: thresholds, weights and stop "
        "rules are re-decided from one recording with no new model call."
    )
    details_on(DETAILS, help="Show the experiment's run id and every parameter identifier of its mechanism.")
    run_id = _watched_run()
    live = run_id is not None and state.get_registry().is_live(run_id)
    with st.expander("Define or load an experiment", expanded=run_id is None):
        definition, source = _render_definition()
    if st.button(
        "Launch the experiment",
        type="primary",
        key=KEY + "launch",
        disabled=definition is None or live,
        help="An experiment is running: watch it below, or cancel it" if live else None,
    ):
        assert definition is not None
        if handle_launch(definition, source):
            st.rerun()
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    _render_earlier()
    if run_id:
        st.divider()
        watch_run(run_id, CellsView, lambda view, live: _render_results(run_id, live), key=KEY + "watch")


def _watched_run() -> str | None:
    run_id = url_run() or st.session_state[KEY + "run_id"]
    if run_id:
        st.session_state[KEY + "run_id"] = run_id
        set_url_run(run_id)
        form.restore_from(FORM, run_id, restore_form)  # first sight of this run: the form shows its file
    return run_id


def restore_form(run_id: str) -> None:
    """After a reload the definition shown is the attached experiment's, when it came from a shipped file
    (a form or an upload is not kept: the page then shows its results only, under a collapsed definition)."""
    run = state.get_store().get_run(run_id)
    source = str(run.config.get("source") or "") if run is not None else ""
    shipped = next((p for p in shipped_files() if source and (str(p) == source or p.name == Path(source).name)), None)
    if shipped is not None:
        form.restore({KEY + "source": "Shipped YAML", KEY + "file": shipped})


class CellsView:
    """The experiment run stores no events of its own: each finished cell is a run, read from the store."""

    def apply(self, type_: str, payload: Any) -> None:
        return None


# -- defining ---------------------------------------------------------------------------------------------------


def _render_definition() -> tuple[Experiment | None, str]:
    how = form.choice(st.radio, "Start from", SOURCES, KEY + "source", horizontal=True)
    if how == "Shipped YAML":
        files = shipped_files()
        if not files:
            st.warning("No experiment files under data/experiments.")
            return None, ""
        path = form.choice(st.selectbox, "File", files, KEY + "file", format_func=lambda p: p.name)
        try:
            text = read_text(path)
        except InputError as exc:
            st.error(f"Cannot read {md(path.name)}: {md(exc)}")
            return None, ""
        source = str(path)
    elif how == "Upload a YAML":
        upload = st.file_uploader("Experiment YAML", type=["yaml", "yml"], key=KEY + "upload")
        if upload is None:
            st.info("Upload a definition (the format of data/experiments/*.yaml).")
            return None, ""
        try:  # the input limit before a byte is parsed or shown
            text = read_upload(upload.name, upload.getvalue())
        except InputError as exc:
            st.error(f"Nothing to validate: {md(exc)}")
            return None, ""
        source = upload.name
    else:
        text, source = _render_form(), "<form>"
    st.code(text, language="yaml")
    return validated(text, source, beside=how == "Shipped YAML"), source


def _render_form() -> str:
    """The form's fields as the YAML they stand for (so one validator, with lines, covers both)."""
    c1, c2, c3 = st.columns(3)
    name = form.field(c1.text_input, "Name", KEY + "f.name", initial="my sweep")
    specs = {s.name: s for s in mechanisms() if s.experiment}  # every mechanism an experiment sweeps
    mech = form.choice(c1.selectbox, "Mechanism", list(specs), KEY + "f.mechanism")
    cases = form.field(c2.text_input, "Case set", KEY + "f.cases." + mech, initial=specs[mech].experiment_cases)
    limit = form.field(c2.number_input, "Only the first N cases (0: all)", KEY + "f.limit", 0, 100_000, initial=0)
    repeats = form.field(c3.number_input, "Repeats", KEY + "f.repeats", 1, 1000, initial=1)
    seed = form.field(c3.number_input, "Seed", KEY + "f.seed", 0, 2**31 - 1, initial=0)
    m = mechanism(mech)
    st.caption(
        f"Decision parameters (no call): {md(', '.join(sorted(m.decision)))}. "
        f"Call parameters: {md(', '.join(sorted(m.calls)) or 'none')}. Metrics: {md(', '.join(m.metrics))}."
    )
    base = form.field(st.text_area, "Base settings (YAML mapping)", KEY + "f.base." + mech, initial="{}", height=80)
    space = form.field(
        st.text_area,
        "Parameter space (YAML: parameter → list, or {from, to, step})",
        KEY + "f.space." + mech,
        initial=specs[mech].experiment_space,
        height=120,
    )
    ids = state.get_catalog().ids if m.calls else []
    chosen = st.session_state.get(KEY + "f.models", [])
    if [i for i in chosen if i in ids] != chosen:  # a model gone from the catalog leaves the choice
        form.put(KEY + "f.models", [i for i in chosen if i in ids])
    form.default(KEY + "f.models", [])
    models = (
        form.field(st.multiselect, "Models (a call parameter)", KEY + "f.models", ids, value_arg="default")
        if ids
        else []
    )
    data: dict[str, Any] = {"name": name, "mechanism": mech, "cases": cases}
    if limit:
        data["limit"] = int(limit)
    data["base"] = _yaml_or_text(base)
    data["space"] = _yaml_or_text(space)
    if models:
        data["models"] = list(models)
    data["repeats"] = int(repeats)
    data["seed"] = int(seed)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _yaml_or_text(text: str) -> Any:
    try:
        return safe_yaml.load(text) or {}
    except yaml.YAMLError:
        return text  # shown and refused by the validator ("base: a mapping"), never half-parsed


def validated(text: str, source: str, *, beside: bool = False) -> Experiment | None:
    """The definition, or None with every problem shown as text (file:line: field: message). `beside`: the
    case set may be a path relative to the file `source` (a shipped file; an upload has no folder)."""
    try:
        definition = parse_definition(text, source)
    except DefinitionError as exc:
        st.error(f"The definition does not validate ({len(exc.problems)} problem(s)):")
        st.code("\n".join(shown_problems(exc.problems)), language=None)
        return None
    if beside:
        definition = definition.model_copy(update={"cases": str(definition.case_path(source))})
    cells = definition.cell_count()  # arithmetic: nothing is built (the cap was checked at validation)
    st.success(
        f"Valid: {md(definition.mechanism)}, {cells} cells"
        + (f", an Optuna search of {definition.search.n_trials} trials" if definition.search else "")
    )
    return definition


# -- launching --------------------------------------------------------------------------------------------------


def _models(definition: Experiment) -> Any:
    """The page's models (shared with the other pages), in the definition's call mode."""
    hub = state.get_hub()
    replay = definition.calls != "live"
    fallthrough = definition.calls == "replay_fallthrough"

    def get(model_id: str) -> Any:
        return hub.get(model_id, replay=replay, delay_s=definition.delay_s, fallthrough=fallthrough)

    return get


def handle_launch(definition: Experiment, source: str) -> str | None:
    """Start the experiment in the registry and return its run id at once; the page then watches it."""
    store = state.get_store()
    models = _models(definition)
    st.session_state[KEY + "error"] = None
    settings = {"definition": definition.model_dump(mode="json", by_alias=True), "source": source}
    try:
        run_id = state.get_registry().start(
            "experiment", settings, lambda: run_experiment(definition, store, models, source=source)
        )
    except (RegistryError, DefinitionError, ValueError) as exc:
        st.session_state[KEY + "error"] = f"The experiment could not start: {exc}"
        return None
    st.session_state[KEY + "run_id"] = run_id
    form.shown(FORM, run_id)
    set_url_run(run_id)
    state.clear_reads()
    return run_id


def _render_earlier() -> None:
    earlier = list_experiments(state.get_store())
    if not earlier:
        return
    labels = {e["run_id"]: f"{e['experiment_id']} · {e['name']} · {e['status']} · {e['cells']} cells" for e in earlier}
    c1, c2 = st.columns([5, 1])
    chosen = c1.selectbox(
        "Earlier experiments", list(labels), format_func=lambda r: labels[r], index=None, key=KEY + "earlier"
    )
    if c2.button("Open", key=KEY + "open", disabled=chosen is None):
        st.session_state[KEY + "run_id"] = chosen
        set_url_run(chosen)
        st.rerun()


# -- results ----------------------------------------------------------------------------------------------------


def _experiment_id(run_id: str) -> str | None:
    run = state.get_store().get_run(run_id)
    if run is None:
        return None
    eid = run.config.get("experiment_id")
    return str(eid) if eid else None


def _render_results(run_id: str, live: bool) -> None:
    eid = _experiment_id(run_id)
    if eid is None:
        st.warning("This run is not an experiment.")
        return
    try:
        shown = show_experiment(state.get_store(), eid)
    except KeyError:
        st.info("Starting…")
        return
    rows, parameters = shown["rows"], shown["parameters"]
    st.subheader(md(shown["name"]))  # one id for the experiment, said once below: the run's stays in the link
    st.caption(summary_text(shown, live))
    if st.session_state.get(f"details.{DETAILS}"):  # the page's Details toggle, drawn at its top
        st.caption(
            f"Experiment run `{run_id}`. Decision parameters of this mechanism (re-decided from the recording with "
            f"no call): {md(', '.join(shown['decision_parameters']))}. Call parameters: "
            f"{md(', '.join(shown.get('call_parameters') or []) or 'none')}."
        )
    if not rows:
        st.info(
            "Recording the cases first (the progress above counts them and their calls); each cell is then "
            "decided from the recording."
            if live
            else "No cell has finished yet."
        )
        return
    if live:
        _render_table(rows, parameters, None)  # the cells so far; the charts wait for the end
        return
    metrics = metric_columns(rows, parameters)
    default = shown["metric"] if shown["metric"] in metrics else (metrics[0] if metrics else None)
    if default is None:
        _render_table(rows, parameters, None)
        return
    c1, c2 = st.columns(2)
    metric = c1.selectbox(
        "Metric", metrics, index=metrics.index(default), key=KEY + "metric", format_func=readable_name
    )
    maximize = (
        c2.radio(
            "Better is",
            ["higher", "lower"],
            index=1 if metric in LOWER_IS_BETTER else 0,
            horizontal=True,
            key=KEY + "direction." + metric,
        )
        == "higher"
    )
    scored = [r for r in rows if isinstance(r.get(metric), int | float)]
    best = (max if maximize else min)(scored, key=lambda r: r[metric]) if scored else None
    best_cell = best["cell"] if best else None
    rows = [dict(r) for r in rows]  # annotated for this metric and direction, not the stored ones
    evidence = cell_evidence(shown, rows, metric, maximize)
    if best is not None:
        params = ", ".join(f"{p}={best.get(p)}" for p in parameters)
        interval = next((r.get(f"{metric}_ci") for r in rows if r.get("cell") == best_cell), None)
        figure = f"{best[metric]}" + (f" (95 % interval {interval[0]:.2f}–{interval[1]:.2f})" if interval else "")
        params = ", ".join(f"{readable_name(p)} {best.get(p)}" for p in parameters)
        st.success(f"Best cell {best_cell}: {md(readable_name(metric))} = {figure} ({md(params)})")
        holm = (
            " The Holm adjustment runs across every cell's comparison with the best; one pair compared alone (Compare"
            " two cells) adjusts only across its own metrics, so it can show a difference this does not."
            if evidence.get("best_cell") is not None
            else ""
        )
        st.caption(md(evidence["text"] + "." + holm) + f" · [Open the best cell's run](/runs?run={best['run_id']})")
    _render_table(rows, parameters, best_cell)
    tabs = st.tabs(["Charts", "Pareto front", "Compare two cells", "Jury evaluation", "Export"])
    with tabs[0]:
        _render_charts(rows, parameters, metric, best_cell, maximize)
    with tabs[1]:
        _render_pareto(rows, parameters, metric, best_cell, maximize)
    with tabs[2]:
        _render_compare(rows, parameters, metrics, best_cell, shown.get("outcomes"))
    with tabs[3]:
        _render_jury(shown, rows, best_cell)
    with tabs[4]:
        _render_export(shown)


def cell_evidence(shown: dict[str, Any], rows: list[dict[str, Any]], metric: str, maximize: bool) -> dict[str, Any]:
    """Each row's interval on the chosen metric and whether it ties with the best (in place), and the one-line
    summary — from the cells' stored per-item outcomes (engine/experiments/evidence.py)."""
    outcomes = shown.get("outcomes") or {}
    evidence = table_evidence(
        [outcomes.get(int(r["cell"])) for r in rows], [r.get(metric) for r in rows], metric, minimize=not maximize
    )
    evidence.annotate(rows)
    return evidence.summary(rows)


def readable_name(parameter: str) -> str:
    """A parameter identifier as words: "thresholds.notify" → "thresholds notify", "weight_self_confidence" →
    "weight self confidence"."""
    return parameter.replace("_", " ").replace(".", " ").strip()


def summary_text(shown: dict[str, Any], live: bool = False) -> str:
    """The experiment in one line a stakeholder reads: its id (the one the CLI and the exports use), how far
    it got, the calls it made, and what it swept with how many values each — never the mechanism's whole list
    of parameter identifiers (that is under Details)."""
    rows = shown["rows"]
    parts = [f"Experiment {shown['experiment_id']}", f"{shown['finished']} of {shown['cells']} cells finished"]
    if rows or not live:  # while recording, the progress bar counts the calls
        calls = int(shown.get("new_calls") or 0)
        parts.append(f"{calls:,} new model call{'' if calls == 1 else 's'}" if calls else "no new model call")
    values = {p: len({str(r.get(p)) for r in rows}) for p in shown["parameters"]}
    swept = [f"{readable_name(p)} ({n} values)" for p, n in values.items() if n > 1]
    if swept:
        parts.append("varies " + ", ".join(swept))
    return md(" · ".join(parts) + ".")


CHART_PX = 430  # a metric-vs-parameter chart: two to a row at 1440 px, one at 900 px (its main column is ~440 px)


COST_UNITS = {"calls": "calls", "tokens": "tokens", "latency_s": "s median latency", "cost": "$"}


def cost_text(costs: dict[str, float]) -> str:
    """'24 calls, 6,432 tokens, $0' — the costs every cell shares."""
    parts = []
    for name, value in costs.items():
        if name == "cost":
            parts.append(f"${value:,.4g}")
        elif name == "latency_s":
            parts.append(f"{value:.3g} s median latency")
        else:
            parts.append(f"{value:,.0f} {COST_UNITS.get(name, name)}")
    return ", ".join(parts)


def table_rows(rows: list[dict[str, Any]], best_cell: int | None) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The rows as the table shows them, and the costs they all share (said once, above the table, rather
    than on every row as if each cell had paid them): each row keeps its own new calls."""
    same = shared_costs(rows)
    hidden = {"run_id", "recording_run", *same}
    return [
        {
            "best": "★" if r.get("cell") == best_cell else "≈" if r.get("tied_with_best") else "",
            **{k: _shown_cell(k, v) for k, v in r.items() if k not in hidden},
            "run": f"/runs?run={r['run_id']}",
            "replay": f"/replay?run={r['run_id']}",
        }
        for r in rows
    ], same


def _shown_cell(key: str, value: Any) -> Any:
    """An interval as text; the tie's p as text ("—" for the best cell, which is not tested against itself)."""
    if key.endswith("_ci"):
        return _interval_text(value)
    if key == "tie_p":
        return "—" if value is None else "< 0.001" if value < 0.001 else f"{value:.2g}"
    return value


def _interval_text(value: Any) -> str:
    return f"{value[0]:.2f}–{value[1]:.2f}" if isinstance(value, list) and len(value) == 2 else ""


def _render_table(rows: list[dict[str, Any]], parameters: list[str], best_cell: int | None) -> None:
    shown, same = table_rows(rows, best_cell)
    if same and len(rows) > 1:
        st.caption(
            f"The same for every cell, so not repeated on each row: {md(cost_text(same))}. *new_calls* is what "
            "each cell made itself: the first cell decided from a recording pays for it, the others pay nothing."
        )
    frame = pd.DataFrame(shown)
    for column in frame.columns:  # mixed types (a parameter of strings and numbers) shown as text
        if frame[column].map(type).nunique() > 1:
            frame[column] = frame[column].map(lambda v: "" if v is None else str(v))
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key=KEY + "table",
        column_config={
            "best": st.column_config.TextColumn(
                "best", help="★ the best cell; ≈ not significantly worse than it (paired test, Holm-adjusted)"
            ),
            "tied_with_best": None,
            "tie_p": st.column_config.NumberColumn(
                "tie p", help="p-value of this cell against the best, Holm-adjusted over all cells", format="%.3f"
            ),
            "run": st.column_config.LinkColumn("run", display_text="open"),
            "replay": st.column_config.LinkColumn("replay", display_text="replay"),
            **agreement_columns(list(frame.columns)),
        },
    )


def _render_charts(
    rows: list[dict[str, Any]], parameters: list[str], metric: str, best_cell: int | None, maximize: bool
) -> None:
    swept = [p for p in parameters if len({str(r.get(p)) for r in rows}) > 1]
    if not swept:
        st.info("Only one value per parameter: nothing to chart against.")
        return
    # a row of charts that wraps: two side by side in a wide window, one under the other in a 900 px one, each
    # wide enough for its title (two columns at 900 px cut "… against weight_self_confidence" off)
    with st.container(horizontal=True, wrap=True):
        for p in swept:
            fig = charts.experiment_metric_vs(
                rows, p, metric, parameters=parameters, best_cell=best_cell, maximize=maximize
            )
            st.plotly_chart(fig, key=KEY + "vs." + p, width=CHART_PX)
    if len(swept) >= 2:
        c1, c2 = st.columns(2)
        x = c1.selectbox("Heatmap: across", swept, index=0, key=KEY + "hx")
        y = c2.selectbox("Heatmap: down", [p for p in swept if p != x], index=0, key=KEY + "hy")
        grid = heatmap_grid(rows, x, y, metric, maximize=maximize)
        best = next((r for r in rows if best_cell is not None and r.get("cell") == best_cell), None)
        st.plotly_chart(charts.experiment_heatmap(grid, x, y, metric, best=best), key=KEY + "heatmap")


def _render_pareto(
    rows: list[dict[str, Any]], parameters: list[str], metric: str, best_cell: int | None, maximize: bool
) -> None:
    costs = [c for c in traded_costs(rows) if c != metric]
    if not costs:
        same = shared_costs(rows)
        st.info(
            f"Every cell costs the same ({md(cost_text(same))}): there is no cost to trade quality against, so no "
            "Pareto chart."
            if same
            else "These cells record no cost (calls, tokens, latency or $)."
        )
        return
    cost = st.selectbox("Cost", costs, key=KEY + "cost", help="calls, tokens, latency_s (median per case) or cost ($)")
    front = pareto_front(rows, metric, cost, maximize=maximize)
    st.plotly_chart(
        charts.experiment_pareto(rows, front, metric, cost, parameters=parameters, best_cell=best_cell),
        key=KEY + "pareto",
    )
    st.caption(f"On the front: cells {md(', '.join(str(r['cell']) for r in front))}")


def _render_compare(
    rows: list[dict[str, Any]],
    parameters: list[str],
    metrics: list[str],
    best_cell: int | None,
    outcomes: dict[int, Any] | None = None,
) -> None:
    cells = [r["cell"] for r in rows]
    if len(cells) < 2:
        st.info("One cell: nothing to compare.")
        return
    by_cell = {r["cell"]: r for r in rows}
    c1, c2 = st.columns(2)
    a = c1.selectbox("Cell A", cells, index=cells.index(best_cell) if best_cell in cells else 0, key=KEY + "ca")
    b = c2.selectbox("Cell B", cells, index=1 if cells[0] == a else 0, key=KEY + "cb")
    c1.caption(f"[Open cell {a}'s run](/runs?run={by_cell[a]['run_id']})")
    c2.caption(f"[Open cell {b}'s run](/runs?run={by_cell[b]['run_id']})")
    shown = compare_cells(by_cell[a], by_cell[b], parameters, metrics)
    st.markdown("**Settings**")
    st.dataframe(_as_text(shown["config"]), hide_index=True, width="stretch", key=KEY + "cmp.config")
    one, other = (outcomes or {}).get(a), (outcomes or {}).get(b)
    diff: dict[str, Any] = (
        cell_diff(one, other) if one and other else {"error": "No per-item outcomes stored for these cells."}
    )
    compared: dict[str, Any] = diff.get("comparisons") or {}
    if diff.get("error"):
        st.caption(md(diff["error"]) + " The metrics below are side by side, without an interval.")
    else:
        st.markdown("**Compared on the items**")
        tested = sum(c.p_value is not None for c in compared.values())
        rows, shared = compact_rows([comparison_row(name, comp) for name, comp in compared.items()])
        st.caption(
            f"Paired on the {diff['items']} items both cells decided"
            + (f"; p Holm-adjusted across this pair's {tested} metrics" if tested > 1 else "")
            + (f"; every metric by {md(shared)}" if shared else "")
            + ". "
            + ROUNDING
        )
        st.dataframe(
            pd.DataFrame(rows),
            hide_index=True,
            width="stretch",
            key=KEY + "cmp.compared",
        )
    rest = [r for r in shown["metrics"] if r["metric"] not in compared and not _evidence_column(r["metric"])]
    if rest:
        st.markdown("**Other metrics**" if compared else "**Headline metrics**")
        st.caption("One value per cell (no per-item outcomes behind it): no interval or test.")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "metric": readable_name(r["metric"]),
                        "cell A": figure_text(r["cell A"]),
                        "cell B": figure_text(r["cell B"]),
                        "B − A": "" if r["B − A"] is None else "0" if r["B − A"] == 0 else f"{r['B − A']:+.4g}",
                    }
                    for r in rest
                ]
            ),
            hide_index=True,
            width="stretch",
            key=KEY + "cmp.metrics",
        )
    if not diff.get("error"):
        _render_cell_items(diff)


def _evidence_column(name: str) -> bool:
    """A column the evidence adds to the table (an interval, a tie and its p): not a metric to compare."""
    return name.endswith("_ci") or name in ("tied_with_best", "tie_p")


def _render_cell_items(diff: dict[str, Any]) -> None:
    """The items whose outcome really differs between the two cells (right→wrong, wrong→right, another decision
    or label), with both outputs and the gold label where the items have one."""
    changes = diff["changes"]
    counts: dict[str, int] = {}
    for change in changes:
        counts[change["change"]] = counts.get(change["change"], 0) + 1
    said = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no item changed"
    st.markdown(f"**Items that changed** — {diff['items']} in both: {said}")
    if changes:
        st.dataframe(pd.DataFrame(changes), hide_index=True, width="stretch", key=KEY + "cmp.items")


def _as_text(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{k: (v if isinstance(v, bool) else "" if v is None else str(v)) for k, v in r.items()} for r in rows]
    )


def _render_jury(shown: dict[str, Any], rows: list[dict[str, Any]], best_cell: int | None) -> None:
    if shown["definition"].get("mechanism") != "jury":
        st.info("The jury's case-set evaluation: shown for jury experiments.")
        return
    cells = [r["cell"] for r in rows]
    cell = st.selectbox("Cell", cells, index=cells.index(best_cell) if best_cell in cells else 0, key=KEY + "jury.cell")
    row = next(r for r in rows if r["cell"] == cell)
    effect = jury_effect(row)
    c1, c2, c3 = st.columns(3)
    c1.metric("Outcome changed by the discussion", _pct(effect["outcome_changed_rate"]))
    c2.metric("Rounds (mean)", "—" if effect["rounds_mean"] is None else f"{effect['rounds_mean']:.2f}")
    c3.metric("No verdict", "—" if effect["no_verdict"] is None else str(effect["no_verdict"]))
    st.caption(
        "Accuracy against the gold labels, and how much the jurors agree: Fleiss κ and Krippendorff α.",
        help=AGREEMENT_HELP,
    )
    st.dataframe(
        pd.DataFrame(effect["pairs"]),
        hide_index=True,
        width="stretch",
        key=KEY + "jury.pairs",
        column_config={"measure": st.column_config.TextColumn("measure", help=AGREEMENT_HELP)},
    )
    if effect["agreement_note"]:
        st.caption("Fleiss κ and Krippendorff α: not computed — the seats are " + md(effect["agreement_note"]) + ".")
    st.plotly_chart(jury_charts.jury_discussion_effect(effect), key=KEY + "jury.chart")
    cases = _jury_cases(shown["definition"], row)
    if cases is not None:
        st.markdown("**Each case** (re-decided from the recording: no call)")
        st.dataframe(_as_text(cases), hide_index=True, width="stretch", key=KEY + "jury.cases")


def _jury_cases(definition: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any]] | None:
    store = state.get_store()
    recording = next((e.payload for e in store.events(row["recording_run"]) if e.type == "experiment_recording"), None)
    if recording is None:
        return None
    params = {k: row[k] for k in mechanism("jury").decision | mechanism("jury").calls if k in row}
    try:
        return jury_cases(recording, definition.get("base") or {}, params)
    except ValueError as exc:  # a recording this cell's setting cannot be derived from: say so, show the rest
        st.warning(f"The cases cannot be re-decided: {md(exc)}")
        return None


AGREEMENT_HELP = GLOSSARY["κ"] + "\n\n" + GLOSSARY["α"]


def agreement_columns(columns: list[str]) -> dict[str, Any]:
    """The results table's κ and α columns (kappa_phase1, alpha_final, …) with the glossary as their help."""
    out: dict[str, Any] = {}
    for column in columns:
        if column.startswith("kappa"):
            out[column] = st.column_config.NumberColumn(column, help=GLOSSARY["κ"])
        elif column.startswith("alpha"):
            out[column] = st.column_config.NumberColumn(column, help=GLOSSARY["α"])
    return out


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


EXPORTS = (("⬇ CSV", "csv", "text/csv"), ("⬇ JSON", "json", "application/json"), ("⬇ HTML report", "html", "text/html"))


def export_bytes(experiment_id: str, fmt: str) -> bytes:
    """An export built from the store when its button is clicked (keys redacted, text escaped in HTML)."""
    shown = show_experiment(state.get_store(), experiment_id)
    text = experiment_export(shown, fmt)
    return text.encode("utf-8")


def _render_export(shown: dict[str, Any]) -> None:
    eid = shown["experiment_id"]
    st.caption(f"Export experiment {md(eid)}: its finished cells, built from the store when clicked")
    with st.container(horizontal=True, wrap=True):  # the buttons wrap in a narrow window rather than squeeze
        for label, fmt, mime in EXPORTS:
            st.download_button(
                label,
                partial(export_bytes, eid, fmt),
                file_name=f"{eid}.{fmt}",
                mime=mime,
                key=f"{KEY}export.{fmt}",
                on_click="ignore",
            )
