"""Demo recordings and model catalogs are checked field by field before anything is used: every problem reads
`file:line: field 'x': message`, an unknown status is refused, nothing is half-loaded, no SQL reaches a message,
and a missing jury panel names the panel and the catalog file."""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.demo import DemoError, load_demo, load_manifest, read_runs
from engine.store import Store, StoreError
from models.catalog import CatalogError, load_catalog

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
DEMO_RUNS = sum(len(page.run_ids) for page in load_manifest(DEMO).pages.values())
DOCUMENTS = read_runs(DEMO / "runs.jsonl")
Edit = Callable[[dict[str, Any]], None]


def counts(store: Store) -> tuple[int, int, int]:
    runs = store.list_runs(limit=10_000)
    return len(runs), sum(len(store.events(r.id)) for r in runs), len(store.calls(limit=None))


def write_recording(folder: Path, edit: Edit) -> Path:
    """The shipped runs with the third one edited: two good lines come before the bad one."""
    documents = copy.deepcopy(DOCUMENTS)
    edit(documents[2])
    folder.mkdir(exist_ok=True)
    path = folder / "runs.jsonl"
    path.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in documents) + "\n", encoding="utf-8")
    return path


def _set(*keys: str | int, value: Any) -> Edit:
    def edit(document: dict[str, Any]) -> None:
        target: Any = document
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


def _drop(*keys: str | int) -> Edit:
    def edit(document: dict[str, Any]) -> None:
        target: Any = document
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return edit


def _duplicate_seq(document: dict[str, Any]) -> None:
    document["events"][1]["seq"] = document["events"][0]["seq"]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_drop("run", "kind"), "run.kind': Field required"),
        (_drop("events"), "events': Field required"),
        (_drop("calls", 0, "request_hash"), "calls[0].request_hash': Field required"),
        (_set("run", "started_at", value="2026-13-45T99:00:00"), "run.started_at'"),
        (_set("events", 1, "ts", value="yesterday"), "events[1].ts'"),
        (_set("run", "status", value="exploded"), "run.status': Input should be 'finished'"),
        (_set("run", "status", value="running"), "run.status'"),
        (_set("events", 0, "seq", value=None), "events[0].seq': Input should be a valid integer"),
        (_set("events", 0, "seq", value="1"), "events[0].seq': Input should be a valid integer"),
        (_set("events", 0, "payload", value=[1, 2]), "events[0].payload'"),
        (_set("calls", 0, "prompt_tokens", value=-5), "calls[0].prompt_tokens'"),
        (_set("calls", 0, "request", value="GET /"), "calls[0].request'"),
        (_set("config", value=[1]), "config'"),
        (_set("run", "tags", value="demo"), "run.tags'"),
        (_set("run", "id", value=""), "run.id'"),
        (_duplicate_seq, "events[1].seq': seq "),
    ],
)
def test_a_bad_field_is_refused_with_its_line_and_nothing_is_loaded(
    store: Store, tmp_path: Path, edit: Edit, field: str
) -> None:
    path = write_recording(tmp_path / "demo", edit)
    with pytest.raises(DemoError) as info:
        load_demo(store, path.parent)
    message = str(info.value)
    assert f"{path}:3: field '{field}" in message, message
    assert "judgelab demo record" in message
    assert "SQL" not in message and "INSERT" not in message and "Traceback" not in message
    assert counts(store) == (0, 0, 0)  # the two good runs before it were not loaded either


def test_a_line_that_is_not_json_and_a_repeated_run(store: Store, tmp_path: Path) -> None:
    lines = [json.dumps(DOCUMENTS[0]), "{not json", json.dumps(DOCUMENTS[1]), json.dumps(DOCUMENTS[0])]
    (tmp_path / "runs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DemoError) as info:
        load_demo(store, tmp_path)
    message = str(info.value)
    assert f"{tmp_path / 'runs.jsonl'}:2: field '(document)': Invalid JSON" in message
    assert f":4: field 'run.id': run '{DOCUMENTS[0]['run']['id']}' is already on line 1" in message
    assert counts(store) == (0, 0, 0)


def test_many_bad_lines_show_twenty_and_a_count(store: Store, tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text('{"run": 1}\n' * 5000, encoding="utf-8")
    with pytest.raises(DemoError) as info:
        load_demo(store, tmp_path)
    message = str(info.value)
    assert message.count("runs.jsonl:") == 20 and message.rstrip().endswith("… and 14980 more"), message[-200:]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_failed_write_loads_nothing_and_shows_no_sql(store: Store, tmp_path: Path) -> None:
    """The database refuses the last call of the last run: the runs written before it in the same load are
    rolled back with it, and the message is the database's reason, not the statement."""
    load_demo(store, DEMO)  # creates the tables; then start again from an empty store of the same schema
    database = Path(store.engine.url.database or "")
    fresh = tmp_path / "fresh.db"
    with sqlite3.connect(database) as source, sqlite3.connect(fresh) as target:
        source.backup(target)
        for table in ("run_tags", "llm_calls", "events", "runs"):
            target.execute(f"DELETE FROM {table}")
        last = DOCUMENTS[-1]["run"]["id"]
        target.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON llm_calls WHEN NEW.run_id = ? "
            "BEGIN SELECT RAISE(ABORT, 'the disk said no'); END".replace("?", f"'{last}'")
        )
    other = Store(f"sqlite:///{fresh}")
    with pytest.raises(StoreError) as info:
        load_demo(other, DEMO)
    message = str(info.value)
    assert "the disk said no" in message and "INSERT" not in message and "[SQL" not in message, message
    assert counts(other) == (0, 0, 0)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_shipped_recording_still_loads(store: Store) -> None:
    report = load_demo(store, DEMO)
    assert len(report.loaded) == DEMO_RUNS and counts(store)[0] == DEMO_RUNS  # one run a page, two for Confidence
    run = store.get_run(report.loaded[0])
    assert run is not None and run.status == "finished"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"model_id": "m", "recorded_at": "x"}', ":1: field 'pages': Field required"),
        (
            '{\n "model_id": "m",\n "recorded_at": "x",\n "pages": {\n  "jury": {\n   "title": 3,\n'
            '   "inputs": []\n  }\n }\n}\n',
            ":6: field 'pages.jury.title': Input should be a valid string",
        ),
        (
            '{"model_id": "m", "recorded_at": "x", "pages": {"jury": {"title": "J"}}}',
            ":1: field 'pages.jury.inputs': Field required",
        ),
        ("[1, 2", ": field '(document)': Invalid JSON"),
    ],
)
def test_a_broken_manifest_names_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "manifest.json").write_text(text, encoding="utf-8")
    with pytest.raises(DemoError) as info:
        load_manifest(tmp_path)
    assert f"{tmp_path / 'manifest.json'}{expected}" in str(info.value), str(info.value)


SEAT = "{model: gemma3-270m, role_name: Judge}"
MODEL = "  - {id: gemma3-270m, backend: llamacpp, model: bundled, needs_key: false, profile: {name: G}}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("models:\n" + MODEL + "  - {id: b, backend: openai, model: m}\n", ":3: field 'models[b].profile'"),
        (
            "models:\n" + MODEL + "  - id: c\n    backend: openai\n    model: m\n    timeout_s: soon\n"
            "    profile: {name: C}\n",
            ":6: field 'models[c].timeout_s'",
        ),
        (
            "models:\n" + MODEL + "panels:\n  local:\n    - {model: gemma3-270m}\n",
            ":5: field 'panels.local[0].role_name'",
        ),
        (
            "models:\n" + MODEL + "panels:\n  local:\n    - {model: nope, role_name: J}\n",
            ":5: field 'panels.local[0].model': unknown model 'nope'",
        ),
        ("models:\n" + MODEL + "panels: [1]\n", ":3: field 'panels'"),
        ("models:\n" + MODEL + MODEL, ":3: field 'models[gemma3-270m].id': duplicate id"),
    ],
)
def test_a_broken_catalog_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert f"{path}{expected}" in str(info.value), str(info.value)


def test_a_missing_panel_names_the_panel_and_the_file(tmp_path: Path) -> None:
    from engine.jury.config import panel_seats

    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n" + MODEL + f"panels:\n  api: [{SEAT}]\n", encoding="utf-8")
    catalog = load_catalog(path)
    with pytest.raises(CatalogError) as info:
        panel_seats("local", catalog)
    assert str(info.value).startswith(f"{path}: field 'panels': unknown panel 'local' — known panels: api")
    assert [s.model_id for s in panel_seats("api", catalog)] == ["gemma3-270m"]
