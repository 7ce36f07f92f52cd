"""The Experiments page (AppTest): load a shipped YAML or build one in the form (validated, errors by line and
field), launch it in the run registry and watch it (progress, Cancel), then the results: table with the best
cell and links to each cell's run, charts, Pareto front, two cells compared, the jury's before/after view and
the exports. Jurors are scripted (with latency where the test watches a live run)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from tests.dashboard.rendered import app_test, rerun_until, run_ended, shown
from tests.engine.test_experiments import jury_answer
from tests.fakes.forms import wkey
from tests.fakes.scripted import ScriptedHub

HOSTILE = "<b>bold</b> **stars** <a href=x>y</a>"


def _experiments_page() -> None:
    from pages import experiments

    experiments.render()


@pytest.fixture
def slow_jurors(monkeypatch: pytest.MonkeyPatch) -> ScriptedHub:
    """Every catalog id answers as a scripted juror recorded in the page's store."""
    hub = ScriptedHub(jury_answer, delay_s=0.05)
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    return hub


def _page(query: dict[str, str] | None = None) -> AppTest:
    return app_test(_experiments_page, query)


def _run_id(at: AppTest) -> str:
    value = at.query_params["run"]
    return str(value[0] if isinstance(value, list) else value)


def _finish(at: AppTest) -> str:
    run_id = _run_id(at)
    store = state.get_store()
    rerun_until(at, lambda: run_ended(run_id), 90)
    at.run()
    assert store.get_run(run_id).status == "finished", store.get_run(run_id).error  # type: ignore[union-attr]
    return run_id


FRAMES = {  # AppTest keeps no widget key on a dataframe: each table is known by a column of its own
    "experiments.table": "best",
    "experiments.cmp.config": "parameter",
    "experiments.cmp.compared": "p (Holm)",
    "experiments.jury.pairs": "measure",
    "experiments.jury.cases": "phase1_outcome",
}


def _frame(at: AppTest, key: str) -> Any:
    return next(d.value for d in at.dataframe if FRAMES[key] in d.value.columns)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_shipped_yaml_runs_and_the_results_show_best_cell_charts_compare_and_exports() -> None:
    from pages.experiments import export_bytes

    at = _page().run()
    assert not at.exception
    from pages.experiments import shipped_files

    (director,) = [p for p in shipped_files() if p.name == "director-cutoffs.yaml"]
    at.selectbox(key=wkey(at, "experiments.file")).set_value(director).run()
    assert any("format_warn_lines" in c.value for c in at.code)  # the YAML as text
    assert "27 cells" in shown(at.success[0].value)
    at.button(key="experiments.launch").click().run()
    assert not at.exception and not at.error
    run_id = _finish(at)
    eid = state.get_store().get_run(run_id).config["experiment_id"]  # type: ignore[union-attr]

    # one readable line: the experiment's one id, what it varies — not the mechanism's parameter identifiers,
    # and not a second id (the run's is behind Details, with the identifiers)
    captions = [shown(c.value) for c in at.caption]
    summary = next(c for c in captions if c.startswith(f"Experiment {eid}"))
    assert "27 of 27 cells finished" in summary and "no new model call" in summary
    assert "varies format warn lines (3 values), scatter warn sentences (3 values), tone pass (3 values)" in summary
    assert not [c for c in captions if run_id in c or "Decision parameters" in c], captions
    at.toggle(key="details.experiments.toggle").set_value(True).run()
    detail = [shown(c.value) for c in at.caption if "Decision parameters" in shown(c.value)]
    assert len(detail) == 1 and run_id in detail[0] and "format_warn_lines" in detail[0]

    rows = _frame(at, "experiments.table")
    assert len(rows) == 27 and list(rows["best"]).count("★") == 1
    best = rows[rows["best"] == "★"].iloc[0]
    assert best["pass_rate"] == rows["pass_rate"].max()
    assert all(link.startswith("/runs?run=") for link in rows["run"])
    assert any(f"Best cell {best['cell']}" in shown(s.value) for s in at.success)
    # three metric-vs-parameter charts and the heatmap; no Pareto front: every cell costs the same (no call), and
    # the page says so in one line; the jury tab says why not
    assert len(at.get("plotly_chart")) == 4
    assert any("Every cell costs the same (0 calls" in i.value and "no Pareto chart" in i.value for i in at.info)
    assert "calls" not in rows.columns  # a cost every cell shares is said once, above the table
    assert any("The same for every cell, so not repeated on each row: 0 calls" in c.value for c in at.caption)
    assert any("jury experiments" in i.value for i in at.info)

    # compare two cells: the settings that differ are flagged, the metrics side by side with B − A
    at.selectbox(key="experiments.ca").set_value(0)
    at.selectbox(key="experiments.cb").set_value(26).run()
    config = _frame(at, "experiments.cmp.config")
    assert list(config["parameter"]) == ["repeat", "format_warn_lines", "scatter_warn_sentences", "tone_pass"]
    assert list(config["differs"]) == [False, True, True, True]
    assert list(config["cell A"])[1:] == ["2", "2", "1"] and list(config["cell B"])[1:] == ["6", "4", "3"]
    # #38: the director's cells store each line's status: every rate compared on the lines, paired, with its
    # interval and p (Holm-adjusted), to the digits the interval supports
    compared = _frame(at, "experiments.cmp.compared").set_index("metric")
    assert {"pass_rate", "retry_rate"} <= set(compared.index)
    pass_row = compared.loc["pass_rate"]
    a_rate, b_rate = float(pass_row["A"]), float(pass_row["B"])
    assert float(pass_row["B − A"]) == pytest.approx(b_rate - a_rate, abs=0.011)
    assert "test" not in compared.columns and " to " in pass_row["95 % interval"]  # one test for all: said once
    assert any("every metric by exact McNemar (paired) on 40 items" in shown(c.value) for c in at.caption)
    assert pass_row["p (Holm)"] != "—" and not any("No per-item outcomes" in c.value for c in at.caption)
    assert any("Paired on the 40 items both cells decided" in c.value for c in at.caption)

    # exports: built from the store, the same table
    table = list(csv.DictReader(io.StringIO(export_bytes(eid, "csv").decode())))
    assert len(table) == 27 and {"cell", "pass_rate", "format_warn_lines", "run_id"} <= set(table[0])
    data = json.loads(export_bytes(eid, "json"))
    assert data["experiment_id"] == eid and data["best"]["cell"] == best["cell"] and len(data["rows"]) == 27
    html = export_bytes(eid, "html").decode()
    assert html.startswith("<!DOCTYPE html>") and "director cut-offs" in html and "<script" in html

    # a reload (the URL holds the run) shows the same results
    again = _page({"run": run_id}).run()
    assert not again.exception and len(_frame(again, "experiments.table")) == 27
    assert (
        again.selectbox(key=wkey(again, "experiments.file")).value == director
    )  # the form shows the file it ran, not the first


def test_the_form_is_validated_with_line_and_field(slow_jurors: ScriptedHub) -> None:
    at = _page().run()
    at.radio(key=wkey(at, "experiments.source")).set_value("Form").run()
    at.selectbox(key=wkey(at, "experiments.f.mechanism")).set_value("jury").run()
    at.text_area(key=wkey(at, "experiments.f.space.jury")).input(
        f"consensus_threshold: [0.5, 7]\n'{HOSTILE}': [1]\n"
    ).run()
    assert at.button(key="experiments.launch").disabled
    problems = next(c.value for c in at.code if "<form>:" in c.value)
    assert "space.consensus_threshold[1]" in problems and "7" in problems
    assert f"space.{HOSTILE}: unknown parameter of jury" in problems  # shown as text, in a code block
    assert not any("<b>bold" in m.value for m in at.markdown)
    at.text_area(key=wkey(at, "experiments.f.space.jury")).input("consensus_threshold: [0.5, 1.0]\n").run()
    assert not at.button(key="experiments.launch").disabled


def test_each_combination_of_the_form_is_validated(slow_jurors: ScriptedHub) -> None:
    """Issue 35, point 7: a combination the settings refuse is named on the page; a valid one that differs from
    the base is accepted."""
    at = _page().run()
    at.radio(key=wkey(at, "experiments.source")).set_value("Form").run()
    at.selectbox(key=wkey(at, "experiments.f.mechanism")).set_value("director").run()
    at.text_area(key=wkey(at, "experiments.f.space.director")).input("tone_pass: [1, 3]\ntone_warn: [2]\n").run()
    assert at.button(key="experiments.launch").disabled
    problems = next(c.value for c in at.code if "<form>:" in c.value)
    assert "space: combination 0 (tone_pass=1, tone_warn=2): tone_warn must not exceed tone_pass" in problems
    assert not at.exception
    at.text_area(key=wkey(at, "experiments.f.space.director")).input("tone_pass: [3]\ntone_warn: [3]\n").run()
    assert not at.button(key="experiments.launch").disabled, [c.value for c in at.code]


def _jury_form(at: AppTest, space: str, limit: int = 3) -> None:
    at.radio(key=wkey(at, "experiments.source")).set_value("Form").run()
    at.selectbox(key=wkey(at, "experiments.f.mechanism")).set_value("jury").run()
    at.number_input(key=wkey(at, "experiments.f.limit")).set_value(limit)
    at.text_area(key=wkey(at, "experiments.f.base.jury")).input("{panel: local-gemma, max_tokens: 64}")
    at.text_area(key=wkey(at, "experiments.f.space.jury")).input(space).run()
    assert not at.button(key="experiments.launch").disabled, [e.value for e in at.error]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_jury_sweep_is_watched_live_then_shows_the_discussions_effect(slow_jurors: ScriptedHub) -> None:
    at = _page().run()
    at.radio(key=wkey(at, "experiments.source")).set_value("Form").run()
    at.text_input(key=wkey(at, "experiments.f.name")).input(HOSTILE)
    _jury_form(at, "consensus_threshold: [0.5, 0.67, 1.0, 2.0]\nstagnation_rounds: [1, 2]\n")
    at.button(key="experiments.launch").click().run()
    run_id = _run_id(at)
    store = state.get_store()
    assert store.get_run(run_id).status == "running"  # type: ignore[union-attr]
    assert at.button(key="experiments.launch").disabled  # no second launch while it runs
    assert at.get("progress") and at.button(key="experiments.watch.cancel").disabled is False
    _finish(at)
    assert not at.get("progress")
    title = at.subheader[0].value
    assert shown(title) == HOSTILE and "<b>" not in title.replace("\\<b\\>", "")  # markdown-escaped
    rows = _frame(at, "experiments.table")
    assert len(rows) == 8 and list(rows["new_calls"]).count(0) == 7  # one recording, seven free cells
    assert {"accuracy", "kappa_phase1", "kappa_final", "alpha_final", "rounds_mean"} <= set(rows.columns)
    pairs = _frame(at, "experiments.jury.pairs")
    assert list(pairs["measure"]) == ["accuracy", "Fleiss κ", "Krippendorff α"]
    # κ and α are explained where they are shown: the glossary as the help of the line above the table, of the
    # table's "measure" column, and of the results table's kappa_/alpha_ columns
    from dashboard.components import GLOSSARY

    (agreement,) = [c for c in at.caption if "Fleiss κ and Krippendorff α." in c.value]
    assert GLOSSARY["κ"] in agreement.proto.help and GLOSSARY["α"] in agreement.proto.help
    pair_columns = json.loads(next(d.proto.columns for d in at.dataframe if "measure" in d.value.columns))
    assert pair_columns["measure"]["help"] == agreement.proto.help
    table_columns = json.loads(next(d.proto.columns for d in at.dataframe if "best" in d.value.columns))
    assert table_columns["kappa_phase1"]["help"] == GLOSSARY["κ"]
    assert table_columns["alpha_final"]["help"] == GLOSSARY["α"]
    best = rows[rows["best"] == "★"].iloc[0]
    assert pairs.iloc[0]["after discussion"] == pytest.approx(best["accuracy"])
    assert pairs.iloc[1]["before discussion"] == pytest.approx(best["kappa_phase1"])
    cases = _frame(at, "experiments.jury.cases")
    assert len(cases) == 3 and set(cases.columns) >= {"phase1_outcome", "final_verdict", "outcome_changed", "rounds"}
    assert sum(int(r) for r in cases["rounds"]) / 3 == pytest.approx(best["rounds_mean"], abs=1e-4)
    changed = [v == "True" or v is True for v in cases["outcome_changed"]]
    assert sum(changed) / 3 == pytest.approx(best["outcome_changed_rate"], abs=1e-4)
    labels = [m.label for m in at.metric]
    assert "Outcome changed by the discussion" in labels and "Rounds (mean)" in labels
    # the Pareto front can be drawn against tokens too
    at.selectbox(key="experiments.cost").set_value("tokens").run()
    assert not at.exception


def test_cancel_stops_the_experiment_and_keeps_its_finished_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = ScriptedHub(jury_answer, delay_s=0.3)
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    at = _page().run()
    _jury_form(at, "consensus_threshold: [0.5, 1.0]\nmodel: [gemma3-270m, smollm2-135m]\n", limit=4)
    at.button(key="experiments.launch").click().run()
    run_id = _run_id(at)
    store = state.get_store()
    rerun_until(at, lambda: store.call_count() > 0, 90)
    at.button(key="experiments.watch.cancel").click().run()
    rerun_until(at, lambda: run_ended(run_id), 90)
    at.run()
    assert store.get_run(run_id).status == "cancelled"  # type: ignore[union-attr]
    assert any("Cancelled" in w.value for w in at.warning)
    assert not at.button(key="experiments.launch").disabled
