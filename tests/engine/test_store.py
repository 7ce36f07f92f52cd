"""The store against real SQLite files: WAL, busy timeout, runs, events, calls, broken files, migrations."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from engine.events import QueueSink, run_context
from engine.store import MIGRATIONS, Store, StoreError
from models.recording import CallRecord, call_context, current_context


def _record(run_id: str | None = None, **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "run_id": run_id, "model_id": "m", "backend": "llamacpp", "request_hash": "h1",
        "request": {"messages": [{"role": "user", "content": "hi"}]}, "raw_text": '{"a": 1}',
        "parsed": {"a": 1}, "prompt_tokens": 5, "completion_tokens": 3, "latency_s": 0.25, "cost": 0.001,
    }
    fields.update(kw)
    return CallRecord(**fields)  # type: ignore[arg-type]


def test_sqlite_defaults_wal_and_busy_timeout(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    store.dispose()


def test_default_url_is_data_dir_and_env_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.config import DATA_DIR, Settings

    monkeypatch.delenv("JUDGELAB_DATABASE_URL", raising=False)
    assert Settings().resolved_database_url == f"sqlite:///{DATA_DIR / 'judgelab.db'}"
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    assert Store().url == f"sqlite:///{tmp_path / 'x.db'}"


def test_runs_events_and_calls_round_trip(store: Store) -> None:
    sink = QueueSink()
    with run_context(store, "test.kind", {"b": 2, "a": 1}, name="demo", sinks=[sink]) as run:
        assert current_context().run_id == run.run_id
        run.emit("step", value=1)
        store.record_call(_record(run.run_id))
        run.summary = {"answer": 42}
    saved = store.get_run(run.run_id)
    assert saved is not None
    assert (saved.kind, saved.name, saved.status, saved.summary) == ("test.kind", "demo", "finished", {"answer": 42})
    assert saved.config == {"a": 1, "b": 2} and len(saved.config_hash) == 16
    assert saved.duration_s is not None and saved.duration_s >= 0
    events = store.events(run.run_id)
    assert [(e.seq, e.type) for e in events] == [(0, "run_started"), (1, "step"), (2, "run_finished")]
    assert events[1].payload == {"value": 1}
    live, ended = sink.drain()
    assert [e.type for e in live] == ["run_started", "step", "run_finished"] and ended
    totals = store.run_totals([run.run_id])[run.run_id]
    assert totals == {"calls": 1, "prompt_tokens": 5, "completion_tokens": 3, "cost": 0.001,
                      "latency_s": 0.25, "errors": 0, "would_cost": None}
    assert current_context().run_id is None


def test_failed_run_keeps_what_was_recorded(store: Store) -> None:
    with pytest.raises(RuntimeError), run_context(store, "test.fail") as run:
        run.emit("partial", done=1)
        store.record_call(_record(run.run_id))
        raise RuntimeError("backend exploded")
    saved = store.get_run(run.run_id)
    assert saved is not None and saved.status == "failed" and "backend exploded" in (saved.error or "")
    assert [e.type for e in store.events(run.run_id)] == ["run_started", "partial", "run_failed"]
    assert len(store.calls(run.run_id)) == 1


def test_call_records_round_trip_and_find_by_hash(store: Store) -> None:
    first = store.record_call(_record(flags=["clamped:x=2->1"]))
    store.record_call(_record(request_hash="other"))
    store.record_call(_record(error="boom", error_type="ServerError", raw_text=None, parsed=None))
    found = store.find_calls("h1")
    assert len(found) == 2
    assert found[0].parsed == {"a": 1} and found[0].flags == ["clamped:x=2->1"]
    assert found[1].error_type == "ServerError"
    call = store.get_call(first)
    assert call is not None and call.to_record().request == {"messages": [{"role": "user", "content": "hi"}]}


def test_list_runs_filters_by_kind_newest_first(store: Store) -> None:
    for kind in ("jury.run", "models.check", "jury.eval"):
        with run_context(store, kind):
            pass
    assert [r.kind for r in store.list_runs(kind="jury")] == ["jury.eval", "jury.run"]
    assert len(store.list_runs()) == 3


def test_broken_database_file_gives_clear_error_and_is_not_deleted(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="move it away"):
        Store(f"sqlite:///{path}")
    assert path.read_bytes().startswith(b"this is not a database")


def test_migrations_are_applied_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    Store(url).dispose()
    store = Store(url)
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    with sqlite3.connect(tmp_path / "m.db") as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "events", "llm_calls", "schema_migrations"} <= tables
    store.dispose()


def test_would_cost_migration_upgrades_an_old_database_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = Store(f"sqlite:///{path}")
    store.record_call(_record(cost=0.004))
    store.dispose()
    with sqlite3.connect(path) as conn:  # the database as it was before the migration
        conn.execute("ALTER TABLE llm_calls DROP COLUMN would_cost")
        conn.execute("DELETE FROM schema_migrations WHERE name = 'llm_calls.would_cost'")
    store = Store(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(llm_calls)")}
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations")]
    assert "would_cost" in columns and names.count("llm_calls.would_cost") == 1
    (old,) = store.calls()
    assert (old.cost, old.would_cost) == (0.004, None)
    store.record_call(_record(cost=0.0, would_cost=0.004))
    assert store.find_calls("h1")[-1].would_cost == 0.004
    store.dispose()


def test_concurrent_writers_from_threads_and_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    a, b = Store(url), Store(url)  # two engines on one file, as two processes would have
    errors: list[Exception] = []

    def write(store: Store, n: int) -> None:
        try:
            for i in range(n):
                store.record_call(_record(request_hash=f"h{i}"))
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, 40)) for s in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(a.calls(limit=1000)) == 160


def test_call_context_nests_and_restores() -> None:
    with call_context(run_id="r1", purpose="outer"):
        with call_context(purpose="inner"):
            assert (current_context().run_id, current_context().purpose) == ("r1", "inner")
        assert current_context().purpose == "outer"
    assert current_context().run_id is None
