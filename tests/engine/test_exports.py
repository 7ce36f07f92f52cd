"""Exports of stored runs made by the engine's own code: the tables of every kind, CSV cells that cannot run
as spreadsheet formulas, JSON of the whole run with every key redacted (even one that reached the store
before it was known), and a stored conversation rebuilt from its events exactly as it was live."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.exports import (
    CALL_COLUMNS,
    EVENT_COLUMNS,
    ExportError,
    csv_cell,
    csv_zip,
    load_run,
    run_document,
    run_json,
    table_csv,
    tables,
)
from engine.handraise.conversation import restore_conversation
from engine.handraise.decisions import changed_hands, redecide
from engine.jury.view import JuryView
from engine.store import LlmCall, Store
from tests.fakes.runs import (
    FORMULAS,
    stored_calibration,
    stored_conversation,
    stored_director_batch,
    stored_jury,
    stored_kinds,
    stored_skip,
)

KEY = "sk-export-Qq1Ww2Ee3Rr4Tt5"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'exports.db'}")
    yield s
    s.dispose()


def _csv(data: bytes) -> list[dict[str, str]]:
    assert data.startswith(b"\xef\xbb\xbf")  # UTF-8 with a BOM: a spreadsheet reads Japanese right
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def _unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_csv_cell_neutralises_formula_starts() -> None:
    for text in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", " =1", "＝1"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("plain text") == "plain text" and csv_cell("a=b") == "a=b"
    assert csv_cell(-3) == -3 and csv_cell(0.5) == 0.5  # numbers stay numbers, negative ones too
    assert (csv_cell(None), csv_cell(True), csv_cell(False)) == ("", "true", "false")
    assert csv_cell({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert csv_cell(["=x"]) == '["=x"]'


def test_jury_tables_positions_per_round(store: Store) -> None:
    run_id, result = stored_jury(store)
    record = load_run(store, run_id)
    found = tables(record)
    assert list(found) == ["headline", "calls", "events", "jury_positions"]
    positions = _csv(table_csv(record, "jury_positions"))
    assert len(positions) == 6  # 3 jurors × (phase 1 + round 1)
    assert list(positions[0])[:8] == ["round", "stage", "juror", "role", "model_id", "verdict", "score", "confidence"]
    moved = next(r for r in positions if r["juror"] == "a" and r["round"] == "1")
    assert (moved["previous_verdict"], moved["verdict"], moved["position_changed"]) == (
        "safe_pass",
        "unsafe_fail",
        "true",
    )
    assert moved["consensus_after"] == "unanimous" and moved["text"] == "Gamma is right"
    assert list(moved).index("detail") == list(moved).index("text") + 1
    assert all(r["detail"] == "" for r in positions)  # generating jurors: no machine detail
    first = next(r for r in positions if r["juror"] == "a" and r["round"] == "0")
    assert first["text"] == "'" + FORMULAS[0] and first["role"] == "Alpha"  # neutralised, else as written
    view = JuryView.fold(record.pairs())
    assert [(r["juror"], float(r["score"])) for r in positions] == [(t["juror"], t["score"]) for t in view.trajectory()]
    calls = _csv(table_csv(record, "calls"))
    assert list(calls[0]) == list(CALL_COLUMNS) and len(calls) == 6
    assert {c["model_id"] for c in calls} == {"a", "b", "c"}
    assert sum(int(c["prompt_tokens"]) for c in calls) == result.prompt_tokens
    events = _csv(table_csv(record, "events"))
    assert list(events[0]) == list(EVENT_COLUMNS) and events[0]["type"] == "run_started"
    assert [int(e["seq"]) for e in events] == list(range(len(record.events)))
    headline = _csv(table_csv(record, "headline"))[0]
    assert (headline["run_id"], headline["verdict"], headline["calls"]) == (run_id, "unsafe_fail", "6")
    with pytest.raises(ExportError, match="no table 'nope' — it has: headline, calls, events, jury_positions"):
        table_csv(record, "nope")


def test_every_csv_cell_of_every_kind_is_safe(store: Store) -> None:
    runs = stored_kinds(store)
    seen: set[str] = set()
    for run_id in runs:
        files = _unzip(csv_zip(load_run(store, run_id)))
        assert {"headline.csv", "calls.csv", "events.csv"} <= set(files)
        for data in files.values():
            for row in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")):
                for value in row:
                    if value.startswith(("=", "+", "-", "@", "\t", "\r")):
                        float(value)  # only a number may start so; text got its apostrophe
                    seen.update(f for f in FORMULAS if value.startswith("'" + f))
    assert seen == set(FORMULAS[:4])  # the hostile texts were in the exports, each neutralised


def test_tables_of_the_other_kinds(store: Store) -> None:
    conv_id, live = stored_conversation(store)
    found = tables(load_run(store, conv_id))
    hands = _csv(table_csv(load_run(store, conv_id), "conversation_hands"))
    assert [(h["turn"], h["participant"], h["decided_by"]) for h in hands] == [
        (str(t["turn"]), t["participant"], t["decided_by"]) for t in live.telemetry
    ]
    messages = found["conversation_messages"].rows
    assert [(m["turn"], m["speaker"], m["kind"]) for m in messages] == [
        ("t1", "user", "message"),
        ("t1", "coder", "answer"),
        ("t1", "designer", "skip"),
        ("t1", "researcher", "skip"),
        ("t2", "user", "message"),
        ("t2", "coder", "answer"),
        ("t2", "designer", "answer"),
        ("t2", "researcher", "skip"),
        ("t3", "user", "message"),
    ]
    batch = tables(load_run(store, stored_director_batch(store)))
    rows = batch["director_batch"].rows
    assert [(r["id"], r["average"], r["failed"]) for r in rows] == [("l1", 4.0, False), ("l2", 1.8, False)]
    calibration = tables(load_run(store, stored_calibration(store)))["calibration_items"]
    assert len(calibration.rows) == 10 and calibration.columns == ["id", "query", "score", "level", "correct"]
    simulation = tables(load_run(store, stored_skip(store)))["simulation"]
    without, with_ = simulation.rows
    assert (without["setting"], with_["setting"]) == ("without cache", "with cache")
    assert with_["judge_calls"] < without["judge_calls"] and without["with_cache"] is False


def test_json_is_the_whole_run_without_secrets(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, _ = stored_jury(store)
    # A call that echoed a key while it was unknown (the variable was set afterwards): stored as it came.
    monkeypatch.delenv("MY_EXPORT_API_KEY", raising=False)
    from engine.store import Run
    from models.recording import CallRecord

    store.record_call(
        CallRecord(
            run_id=run_id,
            purpose="echo",
            model_id="echo-model",
            backend="openai",
            request_hash="echo",
            request={"messages": [{"role": "user", "content": f"use {KEY}"}]},
            raw_text=f"your key is {KEY}",
            parsed={"key": KEY},
            error=f"401 for {KEY}",
        )
    )
    with store.engine.begin() as conn:  # and a config that names it
        conn.execute(
            Run.__table__.update()  # type: ignore[attr-defined]
            .where(Run.__table__.c.id == run_id)  # type: ignore[attr-defined]
            .values(config_json=json.dumps({"api_key": KEY, "case": {"id": "c1"}}))
        )
    echoed = [c for c in store.calls(run_id) if c.purpose == "echo"]
    assert isinstance(echoed[0], LlmCall) and KEY in (echoed[0].raw_text or "")  # the store has it raw
    monkeypatch.setenv("MY_EXPORT_API_KEY", KEY)
    record = load_run(store, run_id)
    text = run_json(record)
    assert KEY not in text and text.count("<MY_EXPORT_API_KEY>") >= 5
    document = json.loads(text)
    assert document["format"] == "judgelab.run/1" and document["run"]["id"] == run_id
    assert document["config"]["api_key"] == "<MY_EXPORT_API_KEY>"
    assert [e["seq"] for e in document["events"]] == list(range(len(record.events)))
    assert len(document["calls"]) == 7 and document["calls"][-1]["parsed"] == {"key": "<MY_EXPORT_API_KEY>"}
    assert document["run"]["headline"]["calls"] == 7 and document["summary"]["verdict"] == "unsafe_fail"
    assert run_document(record)["calls"][0]["request"]["messages"]
    for data in _unzip(csv_zip(record)).values():
        assert KEY.encode() not in data
    assert KEY not in table_csv(record, "calls").decode("utf-8-sig")


def test_unknown_run() -> None:
    store = Store("sqlite://")
    with pytest.raises(ExportError, match="no run nope"):
        load_run(store, "nope")


def test_a_stored_conversation_is_rebuilt_as_it_was(store: Store) -> None:
    run_id, live = stored_conversation(store)
    run = store.get_run(run_id)
    assert run is not None
    conv = restore_conversation(run.config, [(e.type, e.payload) for e in store.events(run_id)])
    assert conv.telemetry == live.telemetry
    assert conv.records == live.records
    assert [t.text for t in conv.turns] == [t.text for t in live.turns]
    assert [(s.turn_id, s.answers, s.answer_tokens, s.answered) for s in conv.states] == [
        (s.turn_id, s.answers, s.answer_tokens, s.answered) for s in live.states
    ]
    assert [h.model for h in conv.states[-1].waiting] == [h.model for h in live.states[-1].waiting] != []
    assert conv.history.speakers == live.history.speakers and conv.history.raw_wills == live.history.raw_wills
    # The What-if works on the rebuilt conversation as on the live one.
    lower = conv.config.model_copy(update={"threshold": 0.05})
    assert (
        changed_hands(redecide(conv.records, conv.config), redecide(conv.records, lower))
        == changed_hands(redecide(live.records, live.config), redecide(live.records, lower))
        != []
    )


def test_a_broken_conversation_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a stored conversation's config"):
        restore_conversation({"participants": [{"id": "1 bad id"}]}, [])
    with pytest.raises(ValueError, match="no participants"):
        restore_conversation({}, [])
    cast = [{"id": "coder", "model_id": "m", "name": "Coder"}]
    with pytest.raises(ValueError, match="cannot be read back"):
        restore_conversation(
            {"participants": cast},
            [("user_message", {"turn": "t1", "text": "hi"}), ("hands", {"turn": "t1", "hands": [{"model": "coder"}]})],
        )


def test_a_director_batch_run_as_run_script_stores_it(store: Store) -> None:
    """`director_line` events hold rules as a mapping, tone as its score and the rubric as its average (the
    shape `run_script` stores); the table has the same columns as a review's (issue 26: this once raised
    'int' object has no attribute 'items' on every export and on the Runs page)."""
    import asyncio

    from engine.director.batch import ScriptConfig, run_script
    from engine.director.scripts import ScriptLine

    lines = [
        ScriptLine(id="l1", text="=えー、ほんと？楽しそうだわ！"),
        ScriptLine(id="l2", text="知らなくはないよね。"),
    ]
    result = asyncio.run(run_script(ScriptConfig(lines=lines, character="yana", source="s.jsonl"), None, store))
    record = load_run(store, result.run_id)
    rows = _csv(table_csv(record, "director_lines"))
    assert [r["id"] for r in rows] == ["l1", "l2"] and {r["event"] for r in rows} == {"director_line"}
    assert rows[0]["text"] == "'=えー、ほんと？楽しそうだわ！"  # neutralised
    assert rows[1]["rule.logic"] == result.rows[1].rules["logic"]
    assert [int(r["tone.score"]) for r in rows] == [r.tone for r in result.rows]
    assert "rubric.average" not in rows[0]  # rules only: no rubric
    assert "director_batch" in tables(record) and json.loads(run_json(record))["run"]["kind"] == "director.batch"
