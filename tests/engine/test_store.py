"""The store against real databases — SQLite files and a real PostgreSQL server (tests/postgres.py): WAL,
busy timeout, runs, events, calls, broken and damaged files, migrations of old databases, run owners,
heartbeats, interrupted and cancelled runs."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import col

from engine.events import QueueSink, incomplete_note, run_context
from engine.store import MIGRATIONS, Run, Store, StoreError
from models.recording import CallRecord, call_context, current_context


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """Every test that takes `store` runs on SQLite and on PostgreSQL."""
    s = Store(db_url)
    yield s
    s.dispose()


def _record(run_id: str | None = None, **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "run_id": run_id,
        "model_id": "m",
        "backend": "llamacpp",
        "request_hash": "h1",
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "raw_text": '{"a": 1}',
        "parsed": {"a": 1},
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "latency_s": 0.25,
        "cost": 0.001,
    }
    fields.update(kw)
    return CallRecord(**fields)


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
    assert totals == {
        "calls": 1,
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "cost": 0.001,
        "latency_s": 0.25,
        "errors": 0,
        "would_cost": None,
    }
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


def test_a_run_failed_by_bad_input_keeps_its_one_line_and_no_traceback(store: Store) -> None:
    """A bad file, label or setting is said in one line; a fault (any other exception) keeps its traceback for
    whoever debugs it. Neither loses the events recorded before."""
    from engine.inputs import Problems
    from engine.labels.io import LabelImportError

    with pytest.raises(LabelImportError), run_context(store, "test.bad_input") as bad:
        raise LabelImportError("upload.jsonl", Problems(["upload.jsonl:3: label: 'x' is not a label"]))
    with pytest.raises(KeyError), run_context(store, "test.fault") as fault:
        raise KeyError("bug")
    (said,) = [e for e in store.events(bad.run_id) if e.type == "run_failed"]
    (crashed,) = [e for e in store.events(fault.run_id) if e.type == "run_failed"]
    assert "traceback" not in said.payload and "upload.jsonl:3" in said.payload["error"]
    assert "Traceback" in crashed.payload["traceback"] and "KeyError" in crashed.payload["error"]


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
    # Written a moment ago: looked at again for ~2 s (another process may still be making a new database there),
    # then refused all the same
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


def test_concurrent_writers_from_threads_and_processes(db_url: str) -> None:
    a, b = Store(db_url), Store(db_url)  # two engines on one database, as two processes would have
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
    a.dispose()
    b.dispose()


def test_call_context_nests_and_restores() -> None:
    with call_context(run_id="r1", purpose="outer"):
        with call_context(purpose="inner"):
            assert (current_context().run_id, current_context().purpose) == ("r1", "inner")
        assert current_context().purpose == "outer"
    assert current_context().run_id is None


# -- old databases --------------------------------------------------------------------------------

OLD_SCHEMA = [  # the tables as schema version 1 created them, before run owners and heartbeats
    "CREATE TABLE runs (id VARCHAR NOT NULL PRIMARY KEY, kind VARCHAR NOT NULL, name VARCHAR NOT NULL, "
    "status VARCHAR NOT NULL, config_json VARCHAR NOT NULL, config_hash VARCHAR NOT NULL, "
    "summary_json VARCHAR NOT NULL, error VARCHAR, started_at TIMESTAMP NOT NULL, finished_at TIMESTAMP)",
    "CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name VARCHAR NOT NULL, "
    "applied_at TIMESTAMP NOT NULL)",
]


def test_a_version_1_database_opens_migrates_and_keeps_its_rows(db_url: str) -> None:
    from sqlalchemy import create_engine, text

    from engine.store import driver_url

    engine = create_engine(driver_url(db_url))
    long_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=3)
    with engine.begin() as conn:
        for statement in OLD_SCHEMA:
            conn.execute(text(statement))
        conn.execute(text("INSERT INTO schema_migrations VALUES (1, 'create tables', :t)"), {"t": long_ago})
        for rid, status in (("old-done", "finished"), ("old-stuck", "running")):
            conn.execute(
                text("INSERT INTO runs VALUES (:id, 'jury.run', '', :status, '{}', '', '{}', NULL, :t, NULL)"),
                {"id": rid, "status": status, "t": long_ago},
            )
    engine.dispose()

    store = Store(db_url)
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    done, stuck = store.get_run("old-done"), store.get_run("old-stuck")
    assert done is not None and done.status == "finished" and done.owner_host is None
    # A run left `running` by a version that recorded no owner: no sign of life for hours → interrupted.
    assert stuck is not None and stuck.status == "interrupted"
    assert "unknown process" in (stuck.error or "") and "before its first event" in (stuck.error or "")
    with store.engine.connect() as conn:
        migrations = conn.execute(text("SELECT count(*) FROM schema_migrations")).scalar()
    assert migrations == len(MIGRATIONS)
    new = store.create_run("jury.run")
    assert stored_run(store, new.id).owner_pid == os.getpid()
    store.dispose()
    Store(db_url).dispose()  # a second open applies nothing again


# -- owners, heartbeats, interrupted and cancelled runs ------------------------------------------------


def stored_run(store: Store, run_id: str) -> Run:
    """The stored run, which the test knows exists."""
    run = store.get_run(run_id)
    assert run is not None, f"no run {run_id}"
    return run


def _set(store: Store, run_id: str, **values: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == run_id).values(**values))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_whose_process_died_is_interrupted_at_the_next_start(store: Store, db_url: str) -> None:
    import psutil

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead, reused, alive = (store.create_run("jury.run") for _ in range(3))
        for rid, seq, type_ in ((dead.id, 0, "run_started"), (dead.id, 1, "juror_evaluation")):
            store.append_event(rid, seq, type_, {}, datetime.now(UTC))
        _set(store, dead.id, owner_pid=_dead_pid())
        _set(store, reused.id, owner_started=psutil.Process().create_time() - 1000)  # our pid, an older process
        _set(store, alive.id, owner_pid=sleeper.pid, owner_started=psutil.Process(sleeper.pid).create_time())

        second = Store(db_url)  # the next start
        statuses = {r.id: r.status for r in second.list_runs()}
        assert statuses == {dead.id: "interrupted", reused.id: "interrupted", alive.id: "running"}
        died = second.get_run(dead.id)
        assert died is not None and died.finished_at is not None
        assert f"interrupted after event 1: its process {socket.gethostname()}:" in (died.error or "")
        assert "another process" in (stored_run(second, reused.id).error or "")
        note = incomplete_note(died.status, second.events(dead.id), died.error)
        assert note is not None and note.startswith("incomplete: interrupted after event 1 (juror_evaluation)")
        second.dispose()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_run_of_another_host_is_interrupted_only_when_its_heartbeat_is_stale(store: Store, db_url: str) -> None:
    fresh, stale = store.create_run("skip.simulate"), store.create_run("skip.simulate")
    now = datetime.now(UTC)
    _set(store, fresh.id, owner_host="elsewhere", owner_pid=1, heartbeat_at=now)
    _set(store, stale.id, owner_host="elsewhere", owner_pid=1, heartbeat_at=now - timedelta(minutes=10))
    second = Store(db_url)
    assert stored_run(second, fresh.id).status == "running"
    interrupted = second.get_run(stale.id)
    assert interrupted is not None and interrupted.status == "interrupted"
    assert "no heartbeat from elsewhere:1 since" in (interrupted.error or "")
    second.dispose()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_running_runs_get_a_heartbeat(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_RUN_STALE_AFTER_S", "10")  # → a beat every 2.5 s
    store = Store(db_url)
    assert store.heartbeat_interval() == 2.5
    run = store.create_run("jury.run")
    first = stored_run(store, run.id).heartbeat_at
    deadline = time.monotonic() + 10
    while stored_run(store, run.id).heartbeat_at == first and time.monotonic() < deadline:
        time.sleep(0.5)
    beat = stored_run(store, run.id).heartbeat_at
    assert beat is not None and first is not None and beat > first
    store.finish_run(run.id)
    store.dispose()


def test_keyboard_interrupt_closes_the_run_as_cancelled_with_its_events(store: Store) -> None:
    with pytest.raises(KeyboardInterrupt), run_context(store, "test.cancel") as run:
        run.emit("step", done=1)
        store.record_call(_record(run.run_id))
        raise KeyboardInterrupt
    saved = store.get_run(run.run_id)
    assert saved is not None and saved.status == "cancelled"
    assert saved.error == "cancelled: interrupted by SIGINT (Ctrl-C)"
    events = store.events(run.run_id)
    assert [e.type for e in events] == ["run_started", "step", "run_cancelled"]
    assert events[-1].payload == {"reason": "interrupted by SIGINT (Ctrl-C)"}
    assert len(store.calls(run.run_id)) == 1
    assert incomplete_note(saved.status, events, saved.error) == (
        "incomplete: cancelled after event 2 (run_cancelled) — interrupted by SIGINT (Ctrl-C)"
    )


def test_a_cancelled_task_closes_its_run_as_cancelled(store: Store) -> None:
    from engine.events import async_run_context

    started = asyncio.Event()
    ids: list[str] = []

    async def work() -> None:
        async with async_run_context(store, "test.task") as run:
            ids.append(run.run_id)
            run.emit("step")
            started.set()
            await asyncio.sleep(30)

    async def main() -> None:
        task = asyncio.create_task(work())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    saved = store.get_run(ids[0])
    assert saved is not None and saved.status == "cancelled" and saved.error
    assert "cancelled" in saved.error and saved.error != "cancelled: "
    assert [e.type for e in store.events(ids[0])] == ["run_started", "step", "run_cancelled"]


# -- bad URLs and damaged files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("notaurl", "is not a database URL"),
        ("nosuchdb://host/x", "unknown kind of database 'nosuchdb'"),
        ("mysql://u@127.0.0.1/x", "the database driver is not installed"),
        (
            "postgresql://postgres@127.0.0.1:1/none",
            "cannot open the database at postgresql://postgres@127.0.0.1:1/none",
        ),
        ("postgresql://u:secret-pw@127.0.0.1:1/none", "postgresql://u:***@127.0.0.1:1/none"),
    ],
)
def test_bad_database_urls_are_clear_errors(url: str, expected: str) -> None:
    with pytest.raises(StoreError) as info:
        Store(url)
    assert expected in str(info.value)
    assert "secret-pw" not in str(info.value)


def test_a_sqlite_url_naming_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        Store(f"sqlite:///{tmp_path}")


def damage(path: Path) -> None:
    """Overwrite pages in the middle of a SQLite file with garbage (the header stays valid)."""
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(size // 2 - (size // 2) % 4096)
        fh.write(bytes(range(256)) * 32)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_damaged_sqlite_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "damaged.db"
    store = Store(f"sqlite:///{path}")
    for i in range(300):
        store.record_call(_record(request_hash=f"h{i}", raw_text="x" * 400))
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.dispose()
    damage(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{path}")
    assert "the file is damaged" in str(info.value) and "nothing was written" in str(info.value)
    assert "move it away" in str(info.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.server  # six real processes
def test_processes_opening_a_new_database_at_once_all_succeed(db_url: str) -> None:
    # Each process imports first, then all open the database at the same instant.
    script = (
        "import sys, time; from engine.store import Store; "
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); Store(sys.argv[1]).dispose()"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    at = str(time.time() + 4)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, db_url, at],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _, err in results]
    store = Store(db_url)
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    with store.engine.connect() as conn:
        from sqlalchemy import text

        assert conn.execute(text("SELECT count(*) FROM schema_migrations")).scalar() == len(MIGRATIONS)
    store.dispose()
