"""Labels on the pages (issue 29), in AppTest on a real SQLite store: the right verdict set on Replay (an override
with its note), the Labels page's queue (one click per item, "N of M done"), its agreement view (the figures the
engine computes, the confusion matrix both ways) and a label's text shown as text wherever it comes back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from dashboard.components import md
from tests.dashboard.rendered import shown
from tests.dashboard.test_jury_pages import _stored_run
from tests.dashboard.test_skip_cli_page import recorded  # noqa: F401  (a fixture)
from tests.fakes.forms import wkey

HOSTILE = "**b** [x](https://e.vil) <img src=x onerror=alert(1)> # h"  # a label is ≤ 64 characters


def _replay_page() -> None:
    from pages import replay

    replay.render()


def _labels_page() -> None:
    from pages import labels

    labels.render()


def _labels(mechanism: str) -> list[Any]:
    from engine.labels import list_labels

    return list_labels(state.get_store(), mechanism=mechanism)


def test_replay_sets_the_right_verdict_with_a_note_shown_as_text() -> None:
    run_id = _stored_run("leak", "majority_vote")
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    assert not at.exception
    key = f"replay.label.{run_id}"
    at.text_input(key=f"{key}.note").set_value(HOSTILE)
    at.button(key=f"{key}.needs_review").click().run()
    assert not at.exception
    (label,) = _labels("jury")
    assert (label.run_id, label.item_key, label.label, label.source) == (run_id, "leak", "needs_review", "override")
    assert label.note == HOSTILE
    assert label.context.get("predicted") == "unsafe_fail"  # what the jury said, kept with the label
    # The line above the buttons says what you said; the note reads as written (no link, image or heading forms).
    (said,) = [m.value for m in at.markdown if m.value.startswith("🏷️ You said")]
    assert "needs review" in said and HOSTILE in shown(said)
    assert md(HOSTILE) in said  # every markdown character of it escaped
    # A second click supersedes the first (both kept, the latest shown).
    at.button(key=f"{key}.unsafe_fail").click().run()
    assert [lab.label for lab in _labels("jury")] == ["unsafe_fail"]
    assert any("unsafe (fail)" in shown(m.value) for m in at.markdown if m.value.startswith("🏷️ You said"))


def test_the_queue_labels_one_item_per_click_and_counts_them() -> None:
    runs = [_stored_run(case, "majority_vote") for case in ("leak", "other-case", "third-case")]
    at = AppTest.from_function(_labels_page, default_timeout=60).run()
    assert not at.exception
    at.selectbox(key="labels.q.mechanism").set_value("jury")
    at.selectbox(key="labels.q.rule").set_value("random")
    at.button(key="labels.q.draw").click().run()
    assert not at.exception
    queue = at.session_state["labels.queue"]
    assert {item.run_id for item in queue} == set(runs)
    assert at.get("progress")[0].proto.text == f"0 of {len(queue)} done"
    # Key 1 is the first value (safe pass): the buttons carry their shortcuts.
    first = at.button(key="labels.q.value.0")
    assert first.proto.shortcut == "1" and at.button(key="labels.q.skip").proto.shortcut.upper() == "S"
    first.click().run()
    at.button(key="labels.q.skip").click().run()
    at.button(key="labels.q.value.2").click().run()
    assert at.get("progress")[0].proto.text == f"2 of {len(queue)} done"
    stored = {(lab.run_id, lab.label, lab.source) for lab in _labels("jury")}
    assert stored == {(queue[0].run_id, "safe_pass", "manual"), (queue[2].run_id, "unsafe_fail", "manual")}
    assert any("Queue finished: 2 of 3 labelled" in s.value for s in at.success)
    # A new draw leaves out what you labelled.
    at.button(key="labels.q.draw").click().run()
    assert [item.run_id for item in at.session_state["labels.queue"]] == [queue[1].run_id]


def test_the_agreement_view_shows_the_engine_figures() -> None:
    from engine.labels import add_label, agreement, labelable_items

    runs = [_stored_run(case, "majority_vote") for case in ("leak", "other-case", "third-case")]
    store = state.get_store()
    cases, values = ("leak", "other-case", "third-case"), ("unsafe_fail", "safe_pass", HOSTILE)
    for run_id, case, value in zip(runs, cases, values, strict=True):
        run = store.get_run(run_id)
        assert run is not None
        (item,) = labelable_items(store, run)  # what the jury said, kept with the label
        assert item.key == case
        add_label(store, mechanism="jury", item_key=item.key, label=value, run_id=run_id, context=item.context)
    (expected,) = agreement(store, mechanism="jury")
    at = AppTest.from_function(_labels_page, default_timeout=60).run()
    at.selectbox(key="labels.a.mechanism").set_value("jury").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Your labels"] == str(expected.n) == "3"
    # Three labels are too few to tell: the figures are shown in grey with why, not as bold metrics.
    assert "Agreement" not in metrics
    tiny = next(c.value for c in at.caption if "too few to tell" in c.value)
    assert f"Agreement {expected.accuracy:.0%}" in tiny and "(3 labels)" in tiny and tiny.startswith(":gray[")
    confusion = next(df.value for df in at.dataframe if any(str(c).startswith("Judge: ") for c in df.value.columns))
    for truth, row in expected.confusion.items():
        for predicted, count in row.items():
            if count:
                cell = confusion.loc[[i for i in confusion.index if i.endswith(_words(truth))][0]]
                assert cell[[c for c in confusion.columns if c.endswith(_words(predicted))][0]] == count
    assert not any("surest" in m.value for m in at.markdown)  # a jury has no probability: no "surest" claim
    wrong = next(df.value for df in at.dataframe if "judge said" in df.value.columns)
    assert len(wrong) == len(expected.confidently_wrong) >= 2
    # #38 (3): each labelled run's rate beside yours; one label a run is too few to correct, and the table says so
    corrected = next(df.value for df in at.dataframe if "corrected (95 %)" in df.value.columns)
    assert len(corrected) == 3 and set(corrected["corrected (95 %)"]) == {"—"}
    assert all("at least 2" in str(note) for note in corrected["labels to halve it"])
    assert all(str(link).startswith("/runs?run=") for link in wrong["run"])
    # A label's value is untrusted text: it reaches the page only inside table cells, never as markdown.
    assert not any(HOSTILE in m.value for m in at.markdown)


def _words(value: str) -> str:
    from dashboard.labelling import answer_words

    return answer_words("jury", value)


def _director_page() -> None:
    from pages import director

    director.render()


def test_director_check_and_batch_rows_take_ok_and_retry_marks() -> None:
    at = AppTest.from_function(_director_page, default_timeout=60).run()
    at.text_area(key=wkey(at, "director.line")).set_value("すごい、あなたの考えは正しいです。")
    at.selectbox(key=wkey(at, "director.character")).set_value("ayu")
    at.button(key="director.check").click().run()
    assert not at.exception
    check_run = at.session_state["director.check_run"]
    at.button(key="director.check_label.ok").click().run()  # the director said RETRY; you say the line is fine
    (mark,) = _labels("director")
    assert (mark.run_id, mark.item_key, mark.label, mark.context["status"]) == (check_run, "line1", "ok", "RETRY")
    assert any(shown(m.value).startswith("🏷️ You said: **OK**") for m in at.markdown)
    # A batch row: picked by its id and status, marked; with no recorded batch run it is kept with no run.
    at.selectbox(key="director.mark_row").set_value(2).run()
    at.button(key="director.row_label.retry").click().run()
    assert not at.exception
    rows = [lab for lab in _labels("director") if lab.item_key.startswith("row")]
    assert [(lab.item_key, lab.label, lab.run_id) for lab in rows] == [("rowb03", "retry", None)]  # line b03
    assert rows[0].context["predicted"] in ("ok", "retry")  # what the rules said, so the agreement view counts it


def _conversation_page() -> None:
    from pages import handraise as conversation

    conversation.render()


def test_speak_and_skip_on_the_cards_are_counted_as_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.dashboard.test_handraise_page import settle
    from tests.fakes.mock_catalog import mock_hub

    mock_hub(monkeypatch, tmp_path)  # every model is the mock backend: the judge answers from its schema at once
    at = AppTest.from_function(_conversation_page, default_timeout=120).run()
    at.selectbox(key="conv.method").set_value("judge")
    at.slider(key="conv.threshold").set_value(0.0).run()  # every hand is a card
    at.chat_input(key="conv.input").set_value("The checkout page is slow on mobile: where do we start?").run()
    settle(at, timeout=120)
    assert not at.exception
    speak = sorted(b.key for b in at.button if b.key and b.key.startswith("conv.approve."))
    assert len(speak) == 3
    at.button(key=speak[0]).click().run()
    for key in sorted(b.key for b in at.button if b.key and b.key.startswith("conv.skip.")):
        at.button(key=key).click().run()
    settle(at, timeout=120)
    assert not at.exception
    stored = _labels("handraise")
    assert sorted((lab.label, lab.source) for lab in stored) == [
        ("skip", "approval"),
        ("skip", "approval"),
        ("speak", "approval"),
    ]
    counted = "3 hand labels (Speak/Skip and the Labels queue) in this conversation, 3 in all"
    assert any(counted in c.value for c in at.caption)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_refit_from_the_agreement_view_then_adopt_and_the_conversation_names_the_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripted labeller's recorded conversation (real judge features, no model call): its Speak / Skip labels
    given as this user's, the agreement view shows the map against them, a refit beats it, "Use this map" adopts
    it, and the Hand raise page's caption names the map learnt from the approvals."""
    from engine.handraise.scripted_labeller import label_items, load_recording
    from engine.labels import labelable_items

    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    monkeypatch.setenv("JUDGELAB_USER", "page-tester")
    store = state.get_store()
    run_id = load_recording(store)
    run = store.get_run(run_id)
    assert run is not None
    items = labelable_items(store, run)
    labels = label_items(store, items[:48], user="page-tester")
    map_id = str(labels[0].context["map_id"])
    at = AppTest.from_function(_labels_page, default_timeout=120).run()
    at.selectbox(key="labels.a.mechanism").set_value("handraise").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Your labels"] == "48"
    at.button(key="labels.r.go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    refit = at.session_state["labels.refit"]
    assert refit["model_id"] == map_id and refit["n_labels"] == 48
    assert any(shown(m.value).startswith("**New map: learnt from 48 of your approvals") for m in at.markdown)
    caption = next(shown(c.value) for c in at.caption if "cross-validation" in c.value)
    assert "On the same held-out labels" in caption
    assert _in_use(map_id) == "shipped"  # saved, not in use until adopted
    at.button(key="labels.r.adopt").click().run()
    assert not at.exception
    assert _in_use(map_id) == refit["version"]
    assert any("Now in use for" in s.value for s in at.success)
    # The versions list marks it in use; the shipped map can be restored.
    at.selectbox(key="labels.v.pick").set_value("shipped")
    conversation = AppTest.from_function(_conversation_page, default_timeout=120)
    judge, *partners = map_id.split("+")
    conversation.session_state["conv.judge_model"] = judge
    conversation.run()
    if partners:
        conversation.multiselect(key="conv.ensemble").set_value(partners).run()
    assert not conversation.exception
    assert any("Map in use: learnt from 48 of your approvals" in shown(c.value) for c in conversation.caption)
    at.button(key="labels.v.restore").click().run()
    assert _in_use(map_id) == "shipped"


def test_the_skip_timeline_takes_should_have_replied_or_not(
    recorded: tuple[Path, Path],  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.dashboard.test_skip_cli_page import _page as skip_page
    from tests.dashboard.test_skip_cli_page import _simulate_small

    _, recording = recorded
    data = tmp_path / "data"
    (data / "recordings").mkdir(parents=True)
    (data / "recordings" / "skipcache-default.jsonl").write_text(recording.read_text(), encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(data))
    at = AppTest.from_function(skip_page, default_timeout=120).run()
    _simulate_small(at)
    assert not at.exception
    scope = at.selectbox(key="skip.scope").value
    box = at.selectbox(key=f"skip.label_message.{scope}")
    box.set_value(len(box.options) - 1).run()  # the conversation's last message: the one the judge looked at
    at.button(key=f"skip.label.{scope}.no_reply").click().run()
    assert not at.exception
    (label,) = _labels("skip")
    run_id = state.get_store().list_runs(kind="skip.simulate")[0].id
    assert label.run_id == run_id and label.item_key.startswith(f"{scope}#") and label.label == "no_reply"
    assert label.context["judge"] == "skip.simulate"
    assert any(shown(m.value).startswith("🏷️ You said: **Should not have replied**") for m in at.markdown)


def _import_page() -> None:
    """The Labels page's import section, with the file named by LABELS_UPLOAD imported once (AppTest has no upload:
    the button's handler is called with the file's name and bytes, as the page does)."""
    import os
    from pathlib import Path

    import streamlit as st

    from pages import labels

    path = Path(os.environ["LABELS_UPLOAD"])
    if not st.session_state.get("test.started"):
        st.session_state["test.started"] = True
        labels.handle_import("/tmp/uploads/x9/" + path.name, path.read_bytes())  # a browser's folder: never shown
    labels.render_import()


def _import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, timeout_s: float = 30
) -> tuple[AppTest, str]:
    from tests.dashboard.rendered import rerun_until, run_ended

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("LABELS_UPLOAD", str(path))
    at = AppTest.from_function(_import_page, default_timeout=60).run()
    assert not at.exception
    run_id = at.query_params["import"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    rerun_until(at, lambda: run_ended(run_id), timeout_s=timeout_s, what="the import never ended")
    at.run()
    return at, run_id


def test_an_import_with_a_bad_line_names_it_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = '{"mechanism": "director", "item_key": "line1", "label": "ok", "user": "a", "source": "manual"}'
    at, _ = _import(
        tmp_path,
        monkeypatch,
        "marks.jsonl",
        good + '\n{"mechanism": "director", "item_key": "line2", "label": "maybe"}\n',
    )
    assert not at.exception
    (error,) = at.error
    assert (
        "Nothing imported" in error.value
        and "marks.jsonl:2: label" in shown(error.value)
        and "maybe" in shown(error.value)
    )
    assert "/tmp/uploads" not in error.value and "Traceback" not in error.value
    assert _labels("director") == []
    at, _ = _import(tmp_path, monkeypatch, "marks.jsonl", good + "\n")
    assert [shown(s.value) for s in at.success] == ["marks.jsonl: 1 imported, 0 already present."]
    assert [(lab.item_key, lab.label, lab.source) for lab in _labels("director")] == [("line1", "ok", "manual")]


def test_hostile_rows_on_the_page_are_one_line_each_first_20_and_a_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label nesting 5,000 arrays, times at the calendar's edges, a duplicate key, and 30 more bad rows: each
    a line naming the file, line and field; the first 20 shown and how many more; no traceback, no path."""
    import json
    import time

    row = '{"mechanism": "director", "item_key": "l", "label": "ok"'
    lines = [
        row + ', "context": {"deep": ' + "[" * 5000 + "]" * 5000 + "}}",
        row + ', "created_at": "9999-12-31T23:59:59-23:59"}',
        row + ', "created_at": "0001-01-01T00:00:00+05:00"}',
        row + ', "label": "retry"}',
    ] + [json.dumps({"mechanism": "director", "item_key": f"l{i}", "label": "maybe"}) for i in range(30)]
    started = time.monotonic()
    at, _ = _import(tmp_path, monkeypatch, "hostile.jsonl", "\n".join(lines) + "\n")
    assert time.monotonic() - started < 30
    (error,) = at.error
    text = shown(error.value)
    assert "hostile.jsonl:1: context: nested more than 64 levels deep" in text
    assert "hostile.jsonl:2: created_at: '9999-12-31T23:59:59-23:59' is outside the years 1970 to 9998" in text
    assert "hostile.jsonl:3: created_at: '0001-01-01T00:00:00+05:00' is outside" in text
    assert "hostile.jsonl:4: duplicate key 'label'" in text
    assert text.count("hostile.jsonl:") == 20 and "… and 14 more" in text
    assert "Traceback" not in text and "Error:" not in text and "/tmp/" not in text
    assert _labels("director") == []


def _rows(n: int) -> str:
    import json

    return "".join(
        json.dumps({"mechanism": "director", "item_key": f"line{i}", "label": "ok", "user": "ann"}) + "\n"
        for i in range(n)
    )


def test_5000_labels_import_as_a_watched_run_with_progress_then_again_as_already_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    started = time.monotonic()
    at, run_id = _import(tmp_path, monkeypatch, "five.jsonl", _rows(5000))
    assert [shown(s.value) for s in at.success] == ["five.jsonl: 5,000 imported, 0 already present."]
    assert state.get_store().get_run(run_id).kind == "labels.import"  # type: ignore[union-attr]
    assert state.get_registry().progress(run_id)["done"] == 5000  # type: ignore[index]
    assert len(_labels("director")) == 5000
    at, _ = _import(tmp_path, monkeypatch, "five.jsonl", _rows(5000))  # the same file again
    assert [shown(s.value) for s in at.success] == ["five.jsonl: 0 imported, 5,000 already present."]
    assert len(_labels("director")) == 5000
    assert time.monotonic() - started < 60


def _held_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[AppTest, str, Any]:
    """An upload of 5,000 labels on the page, its import held at row 2,500 (a slow machine, frozen) until the
    returned gate is set: the page, the run's id and the gate."""
    import threading

    from engine import runctx
    from engine.labels import io as label_io
    from tests.dashboard.rendered import rerun_until

    gate, reports = threading.Event(), []
    report = runctx.progress

    def held(*args: Any, **kwargs: Any) -> None:
        report(*args, **kwargs)
        if kwargs.get("step") == "checking rows":
            reports.append(kwargs.get("advance"))
            if len(reports) == 5:  # 5 × 500 rows checked
                gate.wait(30)

    monkeypatch.setattr(runctx, "progress", held)
    monkeypatch.setattr(label_io, "PROGRESS_EVERY", 500)
    path = tmp_path / "five.jsonl"
    path.write_text(_rows(5000), encoding="utf-8")
    monkeypatch.setenv("LABELS_UPLOAD", str(path))
    at = AppTest.from_function(_import_page, default_timeout=60).run()
    run_id = at.query_params["import"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    registry = state.get_registry()
    rerun_until(at, lambda: (registry.progress(run_id) or {}).get("done") == 2500, what="no progress")
    return at, str(run_id), gate


def test_cancel_stops_an_import_of_5000_with_nothing_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import is held at row 2,500 (a slow machine, frozen): the page shows its progress in rows and Cancel;
    Cancel ends it before the commit, and not one label is stored."""

    from tests.dashboard.rendered import rerun_until, run_ended

    at, run_id, gate = _held_import(tmp_path, monkeypatch)
    at.run()
    (bar,) = at.get("progress")
    assert shown(bar.proto.text).startswith("2,500 / 5,000 · checking rows · ")
    at.button(key="labels.l.watch.cancel").click().run()
    gate.set()
    rerun_until(at, lambda: run_ended(run_id), timeout_s=30, what="the import never ended")
    at.run()
    assert state.get_store().get_run(run_id).status == "cancelled"  # type: ignore[union-attr]
    assert [shown(w.value) for w in at.warning] == [
        "Import of five.jsonl cancelled: nothing was imported (an import writes all its labels or none)."
    ]
    assert _labels("director") == []


def _in_use(map_id: str) -> str | None:
    from engine.labels import map_in_use

    used = map_in_use("handraise", map_id)
    return None if used is None else used.version


def _jury_page() -> None:
    from pages import jury

    jury.render()


def test_the_jury_page_sets_the_right_verdict_under_a_finished_run() -> None:
    run_id = _stored_run("leak", "majority_vote")
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.session_state["jury.run_id"] = run_id
    at.run()
    assert not at.exception
    assert [b.label for b in at.button if (b.key or "").startswith("jury.label.")] == [
        "safe (pass)",
        "needs review",
        "unsafe (fail)",
    ]
    at.button(key="jury.label.safe_pass").click().run()
    (label,) = _labels("jury")
    assert (label.run_id, label.label, label.source, label.context["predicted"]) == (
        run_id,
        "safe_pass",
        "override",
        "unsafe_fail",
    )


def test_the_queue_says_why_it_is_shorter_than_asked() -> None:
    runs = [_stored_run(case, "majority_vote") for case in ("leak", "other-case")]
    at = AppTest.from_function(_labels_page, default_timeout=60).run()
    at.selectbox(key="labels.q.mechanism").set_value("jury")
    at.button(key="labels.q.draw").click().run()  # asks for 20
    assert not at.exception
    assert len(at.session_state["labels.queue"]) == len(runs)
    assert any(
        "Only 2 unlabelled items of this kind in the stored runs (you asked for 20)" in c.value for c in at.caption
    )


def test_refit_is_disabled_below_ten_usable_labels_and_says_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five hand labels with the judge's features: the button is disabled and says "5 of 10" beside itself."""
    from engine.handraise.scripted_labeller import label_items, load_recording
    from engine.labels import labelable_items

    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    monkeypatch.setenv("JUDGELAB_USER", "page-tester")
    store = state.get_store()
    run = store.get_run(load_recording(store))
    assert run is not None
    label_items(store, labelable_items(store, run)[:5], user="page-tester")
    at = AppTest.from_function(_labels_page, default_timeout=120).run()
    at.selectbox(key="labels.a.mechanism").set_value("handraise").run()
    assert not at.exception
    assert at.button(key="labels.r.go").disabled
    assert any(c.value.startswith("5 of 10 usable hand labels") for c in at.caption)
    assert not at.error  # nothing above the tabs


def test_label_boxes_promise_a_refit_only_where_there_is_one() -> None:
    from dashboard.labelling import kept_words

    assert kept_words("handraise").endswith("it measures the judge and can refit it.")
    for mechanism in ("jury", "director", "confidence", "skip"):
        assert kept_words(mechanism).endswith("it measures the judge.")


def _candidate_page() -> None:
    import streamlit as st

    from dashboard.labelling import render_candidate

    render_candidate(st.session_state["refit"], key="t", notice_key="t.notice", refit_key="t.refit")


def test_a_new_map_not_clearly_better_is_offered_as_a_secondary_choice_with_its_diagnosis() -> None:
    base = {
        "mechanism": "handraise",
        "model_id": "m",
        "version": "v2",
        "provenance": "learnt from 12 of your approvals (you)",
        "n_labels": 12,
        "folds": 12,
        "candidate": 0.5,
        "candidate_ci": [],
        "current": 0.75,
        "current_ci": [],
        "has_current": True,
        "diagnosis": {"judge": "m", "mark": "no_signal", "text": "agreement 50% is below chance 58%"},
    }
    worse = {**base, "comparison": {"difference": -0.25, "p_value": 0.2, "test": "exact McNemar", "n": 12}}
    at = AppTest.from_function(_candidate_page, default_timeout=30)
    at.session_state["refit"] = worse
    at.run()
    assert not at.exception
    assert at.button(key="t.adopt").proto.type == "secondary"
    assert any(w.value.startswith("Not clearly better than the map in use: -25 points") for w in at.warning)
    assert any("agreement 50% is below chance 58%" in shown(m.value) for m in at.markdown)
    better = {**base, "comparison": {"difference": 0.3, "p_value": 0.01, "test": "exact McNemar", "n": 12}}
    at.session_state["refit"] = better
    at.run()
    assert at.button(key="t.adopt").proto.type == "primary" and not at.warning


def test_a_refused_import_is_one_line_on_the_runs_page_and_its_bad_lines_stay_on_the_labels_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run of a refused file stores one line as its error (the header: how many bad rows, nothing imported);
    its bad lines are its result, shown on the Labels page — the Runs page showed all 22 lines of them."""
    import json

    from tests.dashboard.test_runs_page import _page

    bad = "".join(
        json.dumps({"mechanism": "director", "item_key": f"l{i}", "label": "maybe"}) + "\n" for i in range(40)
    )
    at, run_id = _import(tmp_path, monkeypatch, "bad.jsonl", bad)
    assert "bad.jsonl:1: label: 'maybe'" in shown(at.error[0].value)  # the Labels page: the lines and a count
    run = state.get_store().get_run(run_id)
    assert run is not None and run.status == "failed"
    assert run.error == "LabelImportFailed: bad.jsonl: 40 bad row(s); nothing was imported"
    runs = _page(run=run_id)
    errors = [shown(e.value) for e in runs.error]
    assert errors == ["LabelImportFailed: bad.jsonl: 40 bad row(s); nothing was imported"]
    assert "Traceback" not in str(state.get_store().events(run_id))


def test_the_database_deleted_mid_import_is_said_on_the_page_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import held at row 2,500 while the database file is deleted: it fails (its end cannot be stored, so
    the stored run still says running); the page says the database was deleted — it said "Nothing imported:
    running" — and no file is made again at the database's path."""
    import os

    from tests.dashboard.rendered import rerun_until

    at, run_id, gate = _held_import(tmp_path, monkeypatch)
    registry = state.get_registry()
    database = Path(os.environ["JUDGELAB_DATABASE_URL"].removeprefix("sqlite:///"))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    gate.set()
    rerun_until(at, lambda: not registry.is_live(run_id), timeout_s=30, what="the import never ended")
    at.run()
    assert not at.exception and not at.success
    (error,) = [shown(e.value) for e in at.error]
    assert error.startswith("Nothing imported: the database ") and "was deleted while judgelab was running" in error
    assert "\n" not in error and not database.exists()


def test_a_reload_mid_import_shows_its_progress_and_cancel_then_what_it_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session (a reload, a second tab) with ?import=<run> while the import is held: its progress and
    Cancel; once it ends, its counts."""

    from tests.dashboard.rendered import rerun_until, run_ended

    at, run_id, gate = _held_import(tmp_path, monkeypatch)
    reloaded = AppTest.from_function(_watch_import_page, default_timeout=60)
    reloaded.query_params["import"] = run_id
    reloaded.run()
    (bar,) = reloaded.get("progress")
    assert shown(bar.proto.text).startswith("2,500 / 5,000 · checking rows")
    assert [b.key for b in reloaded.button] == ["labels.l.watch.cancel"]
    gate.set()
    rerun_until(reloaded, lambda: run_ended(run_id), timeout_s=30, what="the import never ended")
    reloaded.run()
    assert [shown(s.value) for s in reloaded.success] == ["five.jsonl: 5,000 imported, 0 already present."]


def _watch_import_page() -> None:
    from pages import labels

    labels.render_import()
