"""The Runs page as history, headless with AppTest on the real store: search and filters, paging through more
runs than a page holds, no "None" and readable costs in the table, tags and renames, a delete that asks
first and takes events and calls with it, two runs of one kind compared; and a stored conversation reopened
on the Hand raise page with its What-if."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import col
from streamlit.testing.v1 import AppTest

from dashboard import state
from engine.events import run_context
from engine.store import Run, Store
from models.recording import CallRecord
from tests.dashboard.rendered import shown
from tests.fakes.runs import stored_conversation, stored_jury


def _runs_page() -> None:
    from pages import runs

    runs.render()


def _conversation_page() -> None:
    from pages import handraise as conversation

    conversation.render()


def _any_page(name: str) -> None:
    import importlib

    importlib.import_module(f"pages.{name}").render()


def _store() -> Store:
    return state.get_store()


def _page(**query: str) -> AppTest:
    state.clear_reads()
    at = AppTest.from_function(_runs_page, default_timeout=60)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def _table(at: AppTest) -> list[str]:
    return at.dataframe[0].value["run"].tolist()


def _caption(at: AppTest, start: str) -> str:
    return next(shown(c.value) for c in at.caption if shown(c.value).startswith(start))


def _demo_runs(store: Store, n: int) -> list[str]:
    ids = []
    for i in range(n):
        with run_context(store, "demo.page", {"i": i}) as run:
            pass
        ids.append(run.run_id)
    return ids


def test_search_filters_and_pages() -> None:
    store = _store()
    demo = _demo_runs(store, 60)
    jury_a, _ = stored_jury(store, name="Night batch alpha")
    jury_b, _ = stored_jury(store, name="night batch beta")
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == jury_b).values(started_at=datetime(2024, 5, 1, 9, tzinfo=UTC)))
    at = _page()
    assert not at.exception
    rows = _table(at)
    assert len(rows) == 50 and rows[0] == jury_a  # newest first, 50 a page
    assert _caption(at, "Runs 1–50 of 62") == "Runs 1–50 of 62 · page 1 of 2"
    at.button(key="runs.next").click().run()
    assert _table(at) == demo[10::-1] + [jury_b] and _caption(at, "Runs").startswith("Runs 51–62 of 62")
    at.selectbox(key="runs.page_size").set_value(100).run()
    assert len(_table(at)) == 62 and _caption(at, "Runs").endswith("page 1 of 1")
    # Text search (every word, any case) goes back to the first page.
    at.text_input(key="runs.search").set_value("NIGHT batch").run()
    assert set(_table(at)) == {jury_a, jury_b}
    at.text_input(key="runs.search").set_value("").run()
    at.multiselect(key="runs.kinds").set_value(["jury.run"]).run()
    assert set(_table(at)) == {jury_a, jury_b}
    at.date_input(key="runs.dates").set_value((date(2024, 5, 1), date(2024, 5, 1))).run()
    assert _table(at) == [jury_b]
    at.date_input(key="runs.dates").set_value(()).run()
    at.selectbox(key="runs.model").set_value("a").run()  # juror a's model answered both jury runs
    assert set(_table(at)) == {jury_a, jury_b}
    at.multiselect(key="runs.kinds").set_value([]).run()
    at.selectbox(key="runs.model").set_value(None).run()
    at.multiselect(key="runs.statuses").set_value(["failed"]).run()
    assert not at.dataframe and any("No run matches these filters." in i.value for i in at.info)
    at.multiselect(key="runs.statuses").set_value([]).run()
    at.text_input(key="runs.hash").set_value(store.get_run(demo[7]).config_hash[:8]).run()  # type: ignore[union-attr]
    assert _table(at) == [demo[7]]


def test_table_shows_blanks_not_none_and_readable_costs() -> None:
    store = _store()
    with run_context(store, "demo.costs", {}) as paid:
        store.record_call(
            CallRecord(
                run_id=paid.run_id,
                model_id="api",
                backend="openai",
                request_hash="h",
                request={"messages": []},
                cost=0.0123456,
            )
        )
    with run_context(store, "demo.free", {}) as free:
        pass
    try:
        with run_context(store, "demo.broken", {}):
            raise RuntimeError("it broke")
    except RuntimeError:
        pass
    table = _page().dataframe[0].value.set_index("run")
    assert table.loc[paid.run_id, "cost"] == "$0.01235" and table.loc[free.run_id, "cost"] == "$0"
    assert table.loc[free.run_id, "error"] == "" and table.loc[free.run_id, "would have cost"] == ""
    broken = next(r for r in table.index if r.startswith("demo-") and table.loc[r, "status"] == "failed")
    assert table.loc[broken, "error"] == "RuntimeError: it broke"
    assert not (table.astype(str) == "None").any().any() and not table.isna().any().any()


def test_rename_and_tag_a_run() -> None:
    store = _store()
    run_id, _ = stored_jury(store, name="old name")
    store.set_tags(run_id, ["baseline"])
    at = _page(run=run_id)
    at.text_input(key=f"runs.name.{run_id}").set_value("Paper figure 3")
    at.button(key=f"runs.rename.{run_id}").click().run()
    assert not at.exception
    assert store.get_run(run_id).name == "Paper figure 3"  # type: ignore[union-attr]
    assert any("Renamed run" in shown(s.value) for s in at.success)
    at.multiselect(key=f"runs.tag_list.{run_id}").set_value(["baseline", "figure-3"])  # a new tag, typed
    at.button(key=f"runs.save_tags.{run_id}").click().run()
    assert not at.exception and store.tags([run_id]) == {run_id: ["baseline", "figure-3"]}
    at.multiselect(key="runs.tags").set_value(["figure-3"]).run()
    assert _table(at) == [run_id] and at.dataframe[0].value.loc[0, "tags"] == "baseline, figure-3"
    at.multiselect(key=f"runs.tag_list.{run_id}").set_value([])
    at.button(key=f"runs.save_tags.{run_id}").click().run()
    assert store.tags([run_id]) == {}
    at.run()  # the tag filtered by no longer exists: the page still renders
    assert not at.exception


def test_delete_asks_first_and_takes_events_and_calls() -> None:
    store = _store()
    run_id, _ = stored_jury(store)
    keep, _ = stored_jury(store)
    at = _page()
    at.selectbox(key="runs.pick").set_value(run_id).run()
    at.button(key=f"runs.delete.{run_id}").click().run()
    warning = next(shown(w.value) for w in at.warning if "Delete run" in shown(w.value))
    assert f"Delete run {run_id} with its 16 events and 6 LLM calls?" in warning
    assert store.get_run(run_id) is not None  # nothing happens before the confirmation
    at.button(key="runs.delete_no").click().run()
    assert not any("Delete run" in shown(w.value) for w in at.warning) and store.get_run(run_id) is not None
    at.button(key=f"runs.delete.{run_id}").click().run()
    at.button(key="runs.delete_yes").click().run()
    assert not at.exception
    assert store.get_run(run_id) is None and store.events(run_id) == [] and store.calls(run_id) == []
    assert any(f"Deleted run {run_id} with 16 events and 6 LLM calls." in shown(s.value) for s in at.success)
    assert _table(at) == [keep] and len(store.events(keep)) == 16
    assert "run" not in at.query_params


def test_compare_two_runs_of_one_kind() -> None:
    store = _store()
    with run_context(store, "demo.cmp", {"threshold": 0.6, "model": "m1"}) as a:
        store.record_call(
            CallRecord(
                run_id=a.run_id,
                model_id="m1",
                backend="openai",
                request_hash="h",
                request={"messages": []},
                prompt_tokens=10,
                cost=0.5,
            )
        )
        a.summary = {"accuracy": 0.8}
    with run_context(store, "demo.cmp", {"threshold": 0.7, "model": "m1", "extra": True}) as b:
        b.summary = {"accuracy": 0.9}
    with run_context(store, "demo.other", {}):
        pass
    at = _page(run=a.run_id)
    (only,) = at.selectbox(key=f"runs.compare.{a.run_id}").options  # runs of the same kind only, by name and id
    assert only.endswith(b.run_id)
    frames = [df.value for df in at.dataframe if "setting" in df.value.columns or "figure" in df.value.columns]
    diff, figures = frames
    assert diff.to_dict("records") == [
        {"setting": "threshold", "change": "changed", "A": "0.6", "B": "0.7"},
        {"setting": "extra", "change": "added", "A": "", "B": "true"},
    ]
    rows = figures.set_index("figure")
    assert rows.loc["accuracy", "A"] == "0.8" and rows.loc["accuracy", "B"] == "0.9"
    assert rows.loc["accuracy", "B − A"] == "+0.1"  # one value per run: a difference, no interval claimed
    assert rows.loc["cost", "A"] == "$0.5" and rows.loc["cost", "B"] == "$0"
    assert rows.loc["calls", "A"] == "1" and rows.loc["calls", "B"] == "0" and rows.loc["calls", "B − A"] == "-1"
    other = next(r.id for r in store.list_runs(kind="demo.other"))
    at.text_input(key=f"runs.compare_id.{a.run_id}").set_value(other).run()
    assert any("compare two runs of one kind" in shown(w.value) for w in at.warning)


def test_a_stored_conversation_reopens_with_its_what_if() -> None:
    run_id, live = stored_conversation(_store())
    at = AppTest.from_function(_conversation_page, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception
    assert any(f"Reopened from run {run_id}" in shown(i.value) for i in at.info)
    texts = [t.value for t in at.text]
    assert live.states[0].text in texts and live.states[0].answers["coder"] in texts
    assert any("Researcher — hand down" in shown(c.value) for c in at.caption)  # the researcher's skip line
    assert at.chat_input(key="conv.input").disabled  # read only: no card buttons, no new message
    assert at.chat_input(key="conv.input").placeholder.startswith("Read only")  # it says so where one would type
    # its own settings are not "changed settings" (the form shows what a new conversation runs with)
    assert not any("Settings changed" in shown(i.value) for i in at.info)
    assert not [b for b in at.button if b.key and b.key.startswith(("conv.approve.", "conv.skip."))]
    telemetry = next(df.value for df in at.dataframe if "will" in df.value.columns)
    assert len(telemetry) == len(live.telemetry) == 6
    # What-if: a lower threshold raises the researcher's hands, from the rebuilt records alone.
    at.slider(key="conv.wi_threshold").set_value(0.05).run()
    assert not at.exception
    changed = next(m for m in at.metric if m.label == "Hands that change")
    assert int(changed.value) > 0
    assert {f"conv.export.{fmt}.{run_id}" for fmt in ("csv", "json", "html")} <= set(_downloads(at))
    at.button(key="conv.new").click().run()
    assert not at.exception and at.session_state["conv.conv"] is None
    assert _store().get_run(run_id).status == "running"  # type: ignore[union-attr]  # not closed by a reader


def _downloads(at: AppTest) -> dict[str, str]:
    return {str(getattr(e, "key", "")): str(getattr(e, "label", "")) for e in at.get("download_button")}


def test_export_buttons_on_the_runs_page_and_the_mechanism_pages() -> None:
    import csv
    import io
    import json
    import zipfile

    from dashboard.components import export_file

    store = _store()
    run_id, _ = stored_jury(store)
    at = _page(run=run_id)
    buttons = _downloads(at)
    assert {f"runs.export.{fmt}.{run_id}" for fmt in ("csv", "json", "html")} <= set(buttons)
    assert buttons[f"runs.table_csv.{run_id}.headline"] == "⬇ CSV"
    at.selectbox(key=f"runs.table_pick.{run_id}").set_value("jury_positions").run()
    assert f"runs.table_csv.{run_id}.jury_positions" in _downloads(at)
    # What the buttons hand over when clicked (built then, from the stored run).
    with zipfile.ZipFile(io.BytesIO(export_file(store, run_id, "csv"))) as archive:
        assert "jury_positions.csv" in archive.namelist()
    assert json.loads(export_file(store, run_id, "json"))["run"]["id"] == run_id
    assert export_file(store, run_id, "html").startswith(b"<!DOCTYPE html>")
    rows = list(csv.DictReader(io.StringIO(export_file(store, run_id, "csv:jury_positions").decode("utf-8-sig"))))
    assert len(rows) == 6
    for page, setup in (("jury", {"jury.run_id": run_id}), ("replay", {})):
        mechanism = AppTest.from_function(_any_page, args=(page,), default_timeout=60)
        for key, value in setup.items():
            mechanism.session_state[key] = value
        mechanism.run()
        assert not mechanism.exception
        assert {f"{page}.export.{fmt}.{run_id}" for fmt in ("csv", "json", "html")} <= set(_downloads(mechanism))


@pytest.mark.slow  # one of the longest tests on the CPU alone (make test-fast leaves it to make test)
def test_an_experiment_is_one_row_its_cells_open_under_it_and_every_run_has_a_name(tmp_path: Any) -> None:
    """A 264-cell experiment used to fill 278 rows and push the jury and chat runs to page 6: it is one row
    (its cells and best figure), the others stay on page 1 with names, and picking it lists its cells."""
    from tests.fakes.runs import stored_experiment

    store = _store()
    jury_id, _ = stored_jury(store)
    experiment = stored_experiment(store, tmp_path)
    conversation_id, _ = stored_conversation(store)
    at = _page()
    assert not at.exception
    table = at.dataframe[0].value.set_index("run")
    assert list(table.index) == [conversation_id, experiment.run_id, jury_id]
    assert table.loc[jury_id, "name"] == "leak (c1)"
    assert table.loc[conversation_id, "name"].endswith("KeyError in my config loader”")
    assert table.loc[experiment.run_id, "name"] == "hand raise test"
    assert table.loc[experiment.run_id, "experiment"].startswith("264 cells · best f1")
    assert _caption(at, "Runs 1–3 of 3")

    at.selectbox(key="runs.pick").set_value(experiment.run_id).run()  # one pick: its cells, under it
    members = at.dataframe[1].value
    assert len(members) == 265 and members["name"].iloc[0] == "recording of the cases"
    assert members["name"].iloc[1].startswith("cell 0: threshold=0.3")
    assert list(at.dataframe[1].proto.column_order) == ["name", "status", "calls"]  # fits 900 px; ids on request
    assert any("264 cells · best f1" in shown(m.value) for m in at.markdown)

    at.toggle(key="runs.members").set_value(True).run()  # the cells as rows of the history, on request
    assert _caption(at, "Runs 1–50 of 268")
    table = at.dataframe[0].value
    assert (table["experiment"] == f"in {experiment.experiment_id}").sum() == 49  # the conversation, then cells


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_cell_says_which_experiment_it_belongs_to_and_opens_it(tmp_path: Any) -> None:
    from tests.fakes.runs import stored_experiment

    experiment = stored_experiment(_store(), tmp_path, "threshold: [0.4, 0.6]\n")
    at = _page(run=experiment.rows[1]["run_id"])
    assert not at.exception
    assert any(f"Part of experiment {experiment.experiment_id}" in shown(c.value) for c in at.caption)
    at.button(key=f"runs.parent.{experiment.run_id}").click().run()
    assert at.query_params["run"] == [experiment.run_id] or at.query_params["run"] == experiment.run_id


def test_compare_lists_the_items_that_flipped_with_the_paired_test() -> None:
    """Two stored jury evaluations: the page lists the one case that went right→wrong and the six that went
    wrong→right, with both outputs and links, and B − A with its exact McNemar p (the CLI's figures)."""
    store = _store()

    def evaluation(rights: list[bool]) -> str:
        with run_context(store, "jury.eval", {"cases": "c.jsonl"}) as run:
            for n, right in enumerate(rights):
                verdict = "safe_pass" if right else "unsafe_fail"
                run.emit(
                    "jury_eval_item",
                    id=f"case-{n:02d}",
                    run_id=f"case-run-{n}",
                    gold="safe_pass",
                    final_verdict=verdict,
                    correct=right,
                    final_positions={"a": verdict},
                )
        return run.run_id

    a = evaluation([True] * 7 + [False] * 7)
    b = evaluation([True] * 6 + [False] + [True] * 6 + [False])
    at = _page(run=a)
    at.selectbox(key=f"runs.compare.{a}").set_value(b).run()
    assert not at.exception
    items = next(df.value for df in at.dataframe if "change" in df.value.columns and "item" in df.value.columns)
    assert items["change"].tolist().count("wrong→right") == 6 and items["change"].tolist().count("right→wrong") == 1
    flipped = items.set_index("item").loc["case-06"]
    assert flipped["A"] == "safe_pass" and flipped["B"] == "unsafe_fail" and flipped["open A"] == "/runs?run=case-run-6"
    compared = next(df.value for df in at.dataframe if "metric" in df.value.columns).set_index("metric")
    accuracy = compared.loc["accuracy"]
    assert (accuracy["A"], accuracy["B"], accuracy["p"]) == ("0.50", "0.86", "0.12")  # digits its interval supports
    assert accuracy["p (Holm)"] != "—" and "test" not in compared.columns  # one test for all: said once
    assert "gold" in items.columns
    captions = " ".join(shown(c.value) for c in at.caption)
    assert "paired on the 14 items both judged" in captions
    assert "every metric by exact McNemar (paired) on 14 items" in captions


def test_a_conversation_left_open_reads_as_left_open_with_its_turns_not_as_an_error() -> None:
    """A conversation closed because its page went away (the registry's reaper, or the dashboard's process
    gone: `Store.reap_orphans`) is listed as "left open" with its turns, with no error; its page says why in
    words. Other interrupted runs keep their status and error."""
    from tests.dashboard.rendered import shown as text_of

    store = _store()
    talk, _ = stored_conversation(store)  # three user turns, the last one left waiting
    store.finish_run(
        talk,
        status="interrupted",
        error="interrupted after event 9: the conversation was left (its browser session ended)",
    )
    orphan = store.create_run("handraise.conversation", {"a": 1}, name="conversation")
    store.finish_run(
        orphan.id, status="interrupted", error="interrupted before its first event: its process h:1 is gone"
    )
    with run_context(store, "demo.cut", {}) as cut:
        pass
    store.finish_run(cut.run_id, status="interrupted", error="interrupted after event 1: its process h:2 is gone")
    table = _page().dataframe[0].value.set_index("run")
    assert table.loc[talk, "status"] == "left open after 3 turns" and table.loc[talk, "error"] == ""
    assert table.loc[orphan.id, "status"] == "left open, no turn" and table.loc[orphan.id, "error"] == ""
    assert table.loc[cut.run_id, "status"] == "interrupted" and "is gone" in table.loc[cut.run_id, "error"]
    at = _page(run=talk)
    assert [m.value for m in at.metric if m.label == "Status"] == ["left open after 3 turns"]
    assert not at.error
    info = " ".join(text_of(i.value) for i in at.info)
    assert "left open and closed when its browser session ended: 3 turns" in info
    at = _page(run=orphan.id)
    assert "closed when the dashboard that held it stopped: 0 turns" in " ".join(text_of(i.value) for i in at.info)


def test_the_history_table_fits_a_narrow_window_and_shows_every_column_on_request() -> None:
    """Four columns a reader needs first (a 900 px window shows them without scrolling sideways); "All columns"
    shows the rest. The Models catalog does the same with its four."""
    from pages import models, runs

    _demo_runs(_store(), 1)
    at = _page()
    assert list(at.dataframe[0].proto.column_order) == list(runs.TABLE_COLUMNS) == ["name", "status", "started", "cost"]
    at.toggle(key="details.runs.toggle").set_value(True).run()
    assert list(at.dataframe[0].proto.column_order) == list(at.dataframe[0].value.columns)
    assert len(models.CATALOG_COLUMNS) == 4 and "role" in models.CATALOG_DETAILS
    shown_models = AppTest.from_function(_any_page, args=("models",), default_timeout=60).run()
    assert list(shown_models.dataframe[0].proto.column_order) == list(models.CATALOG_COLUMNS)


def test_a_labelled_run_shows_the_judges_rate_corrected_by_the_labels() -> None:
    """#38 (3): a recorded conversation (120 hands judged by the real likelihood judge), 40 of its hands labelled
    by the scripted labeller: the run's page, the CLI and the engine show the judge's share of raised hands, the
    labels' share and the corrected one (PPI++) with its interval, and the labels that would halve it; the
    corrected interval holds the share the labeller gives all 120 hands."""
    import json

    from typer.testing import CliRunner

    from dashboard.cli import app
    from engine.handraise.scripted_labeller import USER, label_items, load_recording, preference
    from engine.labels import label_queue, labelable_items
    from engine.labels.corrected import corrected_rates

    store = _store()
    run_id = load_recording(store)
    run = store.get_run(run_id)
    assert run is not None
    items = labelable_items(store, run)
    truth = sum(
        preference(str(i.context.get("text") or ""), str(i.context.get("participant"))) == "speak" for i in items
    ) / len(items)
    label_items(
        store, label_queue(store, mechanism="handraise", rule="random", n=40, seed=1, user=USER, run_ids=[run_id])
    )
    (rate,) = corrected_rates(store, run)
    assert rate.value == "speak" and rate.n_items == 120 and rate.n_labelled == 40
    assert rate.corrected is not None and rate.corrected.interval.contains(truth)
    assert rate.judge_ci is not None and rate.labels_ci is not None
    result = CliRunner().invoke(app, ["labels", "corrected", run_id, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["rates"][0]
    assert shown["labelled"] == 40 and shown["corrected_ci"] == rate.corrected.interval.as_list()
    assert "would halve the interval" in shown["note"] or "cannot halve" in shown["note"]
    at = _page(run=run_id)
    assert not at.exception
    table = next(df.value for df in at.dataframe if "corrected (95 %)" in df.value.columns)
    row = table.iloc[0]
    assert (
        row["share of"] == "speak" and row["judge says"].endswith("of 120") and row["your labels say"].endswith("of 40")
    )
    assert "(" in row["corrected (95 %)"]
    # #38 (4): the exports hold what the page shows
    from dashboard.report import run_report
    from engine.exports import load_run, tables

    exported = tables(load_run(store, run_id))["corrected_rates"].rows
    assert exported[0]["corrected_ci"] == rate.corrected.interval.as_list() and exported[0]["labelled"] == 40
    assert "corrected_rates" in run_report(store, run_id)
