"""`Store`: every read and write of runs, events, LLM calls, tags, progress and labels, each in its own short
session; runs owned by a process (host, pid, start time) with a heartbeat, so a dead owner's runs are found."""

from __future__ import annotations

import contextlib
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from sqlalchemy import (
    Engine,
    and_,
    delete,
    event,
    func,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError
from sqlmodel import Session, SQLModel, col, create_engine, select

from engine.config import get_settings
from engine.store.connection import (
    FileWatch,
    WriteGate,
    driver_url,
    folder_writable,
    safe_url,
    settled_check,
    uri_file,
    use_wal,
    watch_engine,
)
from engine.store.filters import RunFilter, _conditions
from engine.store.labels import LabelMethods
from engine.store.migrations import MIGRATIONS
from engine.store.owners import owner_gone, this_owner
from engine.store.tables import (
    FINISHED,
    HEARTBEAT_S,
    INTERRUPTED,
    MAX_TAG_LENGTH,
    PG_MIGRATION_LOCK,
    RUN_STATUSES,
    RUNNING,
    EventRow,
    LlmCall,
    Run,
    RunProgress,
    RunTag,
    SchemaMigration,
    StoreError,
    aware,
    config_hash,
    stored_json,
    table_of,
    utcnow,
)
from models.recording import CallRecord
from models.secrets import redact, redact_obj

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _db_errors(what: str) -> Iterator[None]:
    """Database failures become one StoreError line that says what failed; never a driver traceback."""
    try:
        yield
    except DBAPIError as exc:
        raise StoreError(f"{what}: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}") from None


class Store(LabelMethods):
    """All database access. Thread-safe: each method opens its own short session."""

    def __init__(self, url: str | None = None, *, reap: bool = True) -> None:
        settings = get_settings()
        from_env = url is None and bool(settings.database_url)
        self.url = url or settings.resolved_database_url
        self.display_url = safe_url(self.url)
        self.settings = settings
        self.read_only: str | None = None  # why this store cannot write (a SQLite file in a read-only folder)
        self._sqlite_uri: str | None = None  # the read-only URI it is opened with then
        self._sqlite_path: Path | None = None  # the SQLite file (not in memory), watched once opened
        self._uri_file: Path | None = None  # the file a URI filename (`sqlite:///file:x.db?uri=true`) names: watched
        self.is_sqlite = self.url.startswith("sqlite")
        self.is_postgres = self.url.startswith(("postgresql", "postgres:"))
        self._write_lock = WriteGate()  # watches the SQLite file once the schema is there (it may be new)
        self.engine = self._create_engine(from_env)
        self._active: set[str] = set()
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.migrate()
        watched = self._sqlite_path or self._uri_file
        if watched is not None and watched.exists():
            self._write_lock.watch = FileWatch(watched, str(watched))
        if reap:
            self.reap_orphans()

    def _create_engine(self, from_env: bool) -> Engine:
        where = f"JUDGELAB_DATABASE_URL={self.display_url!r}" if from_env else f"database URL {self.display_url!r}"
        hint = "use sqlite:///path/to/file.db or postgresql://user:password@host:port/dbname"
        try:
            url = make_url(driver_url(self.url))
        except ArgumentError:
            raise StoreError(f"{where} is not a database URL — {hint}") from None
        connect_args: dict[str, Any] = {}
        settings = self.settings
        if url.get_backend_name() == "sqlite":
            connect_args = {"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_ms / 1000}
            path = url.database or ""
            if path and path != ":memory:" and not path.startswith("file:"):
                self._sqlite_path = Path(path)
                self._prepare_sqlite_file(self._sqlite_path)
            elif path.startswith("file:"):
                self._uri_file = uri_file(path)
        elif url.get_backend_name() == "postgresql":
            # Timestamps are stored as UTC whatever the server's time zone; a dead server fails fast.
            connect_args = {"options": "-c timezone=UTC", "connect_timeout": 10}
        pool: dict[str, Any] = {}
        if self._sqlite_uri is not None:  # read-only: every connection through the URI the check opened
            uri, timeout = self._sqlite_uri, settings.sqlite_busy_timeout_ms / 1000
            pool["creator"] = lambda: sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
        try:
            engine = create_engine(url, connect_args=connect_args, pool_pre_ping=not self.is_sqlite, **pool)
        except NoSuchModuleError:
            raise StoreError(f"{where}: unknown kind of database '{url.drivername}' — {hint}") from None
        except ImportError as exc:
            extra = " — install it with `pip install 'judgelab[postgres]'`" if self.is_postgres else ""
            raise StoreError(f"{where}: the database driver is not installed ({exc.name or exc}){extra}") from None
        if engine.dialect.name == "sqlite":
            busy = settings.sqlite_busy_timeout_ms
            memory = ":memory:" in self.url or not url.database or self.read_only is not None

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cursor = dbapi_conn.cursor()
                if not memory:
                    use_wal(cursor, busy / 1000)
                cursor.execute(f"PRAGMA busy_timeout={int(busy)}")
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.close()

            watch_engine(engine, self.file_problem, self._watched_file)

        return engine

    def _prepare_sqlite_file(self, path: Path) -> None:
        """Create the folder of a new file; check an existing one before anything can write to it, and open
        it read-only when its folder is not writable."""
        if path.is_dir():
            raise StoreError(f"cannot open the database at {self.display_url}: {path} is a directory")
        if not path.exists():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the database at {path}: {exc.strerror or exc}") from None
            if not folder_writable(path.parent):
                raise StoreError(
                    f"cannot create the database at {path}: the folder {path.parent} is not writable — make it "
                    "writable or set JUDGELAB_DATABASE_URL to a database in a folder you can write to"
                )
            return
        writable = folder_writable(path.parent)
        try:
            problem, uri = settled_check(
                path, self.settings.sqlite_busy_timeout_ms / 1000, read_only_folder=not writable
            )
        except sqlite3.Error as exc:
            where = "" if writable else f" (its folder {path.parent} is not writable)"
            raise StoreError(
                f"cannot open the database at {self.display_url}{where}: {exc} — check that the file can be read, "
                "or set JUDGELAB_DATABASE_URL to another database"
            ) from None
        if problem:
            raise StoreError(
                f"cannot open the database at {self.display_url}: the file is damaged ({problem}); nothing was "
                "written to it — move it away (nothing is deleted for you; `sqlite3 FILE .recover` may save its "
                "rows) or set JUDGELAB_DATABASE_URL to another database"
            )
        if not writable:
            self.read_only = (
                f"the folder {path.parent} is not writable: SQLite needs to make its journal files next to "
                f"{path.name}, so runs can be read and exported but nothing can be recorded — make the folder "
                "writable, or set JUDGELAB_DATABASE_URL to a database in a folder you can write to"
            )
            self._sqlite_uri = uri

    def _watched_file(self) -> Path | None:
        """The SQLite file named by a plain path, once the store made it and watches it (None before, and for a
        URI filename, which keeps its own open mode)."""
        watch = self._write_lock.watch
        return watch.path if watch is not None and self._sqlite_path is not None else None

    def file_problem(self) -> str | None:
        """What happened to the SQLite file since it was opened (deleted, replaced by another), or None while
        it is the one opened (or there is no file to watch). Every write is refused with it, and the
        dashboard shows it on every page."""
        watch = self._write_lock.watch
        return watch.problem() if watch is not None else None

    def _write_errors(self) -> contextlib.AbstractContextManager[None]:
        """Around every write: a read-only store refuses it with the reason; a failed one is a StoreError."""
        if self.read_only is not None:
            raise StoreError(f"cannot write to {self.display_url}: {self.read_only}")
        return _db_errors(f"cannot write to {self.display_url}")

    # -- schema ---------------------------------------------------------------------------------
    def migrate(self) -> None:
        try:
            for attempt in range(3):
                try:
                    with contextlib.ExitStack() as stack:
                        if self.engine.dialect.name == "postgresql":  # concurrent first starts: one migrates
                            conn = stack.enter_context(self.engine.connect())
                            conn.execute(text(f"SELECT pg_advisory_lock({PG_MIGRATION_LOCK})"))
                            stack.callback(conn.execute, text(f"SELECT pg_advisory_unlock({PG_MIGRATION_LOCK})"))
                        self._migrate()
                    return
                except DBAPIError as exc:
                    # Two processes creating a new SQLite file at once: the loser sees "already exists"
                    # and simply checks again.
                    if "already exists" not in str(exc.orig) or attempt == 2:
                        raise
                    time.sleep(0.2)
        except DBAPIError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            raise StoreError(
                f"cannot open the database at {self.display_url}: {reason} — if the file is damaged, move it "
                "away (nothing is deleted for you) or set JUDGELAB_DATABASE_URL to another database"
            ) from None

    def _migrate(self) -> None:
        if self.read_only is None:
            SchemaMigration.metadata.create_all(self.engine, tables=[table_of(SchemaMigration)])
        with Session(self.engine) as session:
            done = set(session.exec(select(SchemaMigration.version)).all())
        for version, name, apply in MIGRATIONS:
            if version in done:
                continue
            if self.read_only is not None:
                raise StoreError(
                    f"cannot open the database at {self.display_url}: it needs the schema change {name!r}, and "
                    f"{self.read_only}"
                )
            apply(self.engine)
            try:
                with Session(self.engine) as session:
                    session.add(SchemaMigration(version=version, name=name))
                    session.commit()
            except IntegrityError:
                pass  # another process recorded it first
        # Tables registered after the last migration (a new mechanism) are created too, where the store can write
        # (read-only, a table a mechanism has not made yet is simply not there to read).
        if self.read_only is None:
            SQLModel.metadata.create_all(self.engine)

    def schema_version(self) -> int:
        with Session(self.engine) as session:
            return session.exec(select(func.max(SchemaMigration.version))).one() or 0

    # -- runs -----------------------------------------------------------------------------------
    def create_run(self, kind: str, config: dict[str, Any] | None = None, name: str = "") -> Run:
        config = redact_obj(config or {})
        host, pid, started = this_owner()
        for attempt in range(8):
            now = utcnow()
            run = Run(
                id=f"{kind.split('.')[0]}-{now:%Y%m%d-%H%M%S}-{uuid4().hex[:6]}",
                kind=kind,
                name=redact(name),
                config_json=stored_json(config),
                config_hash=config_hash(config),
                started_at=now,
                owner_host=host,
                owner_pid=pid,
                owner_started=started,
                heartbeat_at=now,
            )
            if self._add_run(run, last=attempt == 7):
                break
        self._start_heartbeat(run.id)
        return run

    def _add_run(self, run: Run, *, last: bool) -> bool:
        """Insert a new run; False when its id was taken meanwhile (24 random bits a second: hundreds of
        experiment cells a second meet one now and then), so the caller draws another."""
        with (
            self._write_lock,
            self._write_errors(),  # a read-only store refuses with its reason
            Session(self.engine, expire_on_commit=False) as session,
        ):
            session.add(run)
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                if last or session.get(Run, run.id) is None:
                    raise  # not the id (or not once more): reported as a StoreError
                return False
            session.refresh(run)
        return True

    def finish_run(
        self,
        run_id: str,
        *,
        status: str = FINISHED,
        error: str | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        self._active.discard(run_id)
        with self._write_lock, self._write_errors(), Session(self.engine) as session:
            run = session.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id}")
            run.status = status
            run.error = redact(error) if error else error
            run.finished_at = utcnow()
            if summary is not None:
                run.summary_json = stored_json(summary)
            session.add(run)
            session.commit()

    # -- owners and heartbeats ------------------------------------------------------------------
    def _start_heartbeat(self, run_id: str) -> None:
        self._active.add(run_id)
        if self._beat is None or not self._beat.is_alive():
            self._beat_stop.clear()
            self._beat = threading.Thread(target=self._heartbeat_loop, name="judgelab-heartbeat", daemon=True)
            self._beat.start()

    def heartbeat_interval(self) -> float:
        return min(HEARTBEAT_S, self.settings.run_stale_after_s / 4)

    def _heartbeat_loop(self) -> None:
        while not self._beat_stop.wait(self.heartbeat_interval()):
            if self._active:
                self.heartbeat()

    def heartbeat(self) -> None:
        """Touch every run this process is still running (the sign of life other hosts look for)."""
        active = list(self._active)
        if not active:
            return
        try:
            with self._write_lock, self.engine.begin() as conn:
                conn.execute(
                    update(Run).where(col(Run.id).in_(active), col(Run.status) == RUNNING).values(heartbeat_at=utcnow())
                )
        except DBAPIError as exc:  # a missed beat is retried at the next one; the run itself goes on
            log.warning("heartbeat of %d run(s) failed: %s", len(active), exc.orig)
        except StoreError as exc:  # the file was deleted or replaced: the runs' own next write says so
            log.warning("heartbeat of %d run(s) skipped: %s", len(active), exc)

    def reap_orphans(self) -> list[str]:
        """Mark `interrupted` every running run whose owner is gone: on this host, its pid is dead or
        belongs to a newer process; elsewhere (or unknown), no heartbeat for JUDGELAB_RUN_STALE_AFTER_S.
        Returns the ids marked (none in a read-only store: it marks nothing)."""
        if self.read_only is not None:
            return []
        host = socket.gethostname()
        stale = timedelta(seconds=self.settings.run_stale_after_s)
        now = utcnow()
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            running = list(session.exec(select(Run).where(col(Run.status) == RUNNING)).all())
        marked = []
        for run in running:
            if run.id in self._active:
                continue
            reason = owner_gone(run, host, stale, now)
            if reason is None:
                continue
            events = self.events(run.id)
            last = max([aware(run.heartbeat_at or run.started_at), *(aware(e.ts) for e in events[-1:])])
            after = f"after event {events[-1].seq}" if events else "before its first event"
            with self._write_lock, self._write_errors(), self.engine.begin() as conn:
                done = conn.execute(
                    update(Run)
                    .where(col(Run.id) == run.id, col(Run.status) == RUNNING)
                    .values(status=INTERRUPTED, finished_at=last, error=f"interrupted {after}: {reason}")
                ).rowcount
            if done:
                marked.append(run.id)
                log.warning("run %s marked interrupted: %s", run.id, reason)
        return marked

    def get_run(self, run_id: str) -> Run | None:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            return session.get(Run, run_id)

    def list_runs(self, kind: str | None = None, limit: int = 200) -> list[Run]:
        return self.search_runs(RunFilter(kind_prefix=kind or ""), limit=limit)

    # -- history: search, tags, rename, delete ---------------------------------------------------
    def search_runs(self, where: RunFilter | None = None, *, limit: int = 50, offset: int = 0) -> list[Run]:
        """One page of the runs that match, newest first (ties by id, so pages never overlap)."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = (
                select(Run)
                .where(*_conditions(where or RunFilter()))
                .order_by(col(Run.started_at).desc(), col(Run.id).desc())
                .limit(max(0, limit))
                .offset(max(0, offset))
            )
            return list(session.exec(query).all())

    def count_runs(self, where: RunFilter | None = None) -> int:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = select(func.count()).select_from(Run).where(*_conditions(where or RunFilter()))
            return int(session.exec(query).one())

    def run_kinds(self) -> list[str]:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            return sorted(session.exec(select(Run.kind).distinct()).all())

    def call_models(self) -> list[str]:
        """Every model id that answered a recorded call."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            return sorted(session.exec(select(LlmCall.model_id).distinct()).all())

    def all_tags(self) -> list[str]:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            return sorted(session.exec(select(RunTag.tag).distinct()).all())

    def tags(self, run_ids: Sequence[str]) -> dict[str, list[str]]:
        """Each run's tags, sorted; runs without any are left out."""
        if not run_ids:
            return {}
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            rows = session.exec(
                select(RunTag.run_id, RunTag.tag).where(col(RunTag.run_id).in_(list(run_ids))).order_by(col(RunTag.tag))
            ).all()
        found: dict[str, list[str]] = {}
        for run_id, tag in rows:
            found.setdefault(run_id, []).append(tag)
        return found

    def set_tags(self, run_id: str, tags: Sequence[str]) -> list[str]:
        """Replace the run's tags (trimmed, redacted, each once, none empty); returns them sorted."""
        clean = sorted({redact(t.strip())[:MAX_TAG_LENGTH] for t in tags if t and t.strip()})
        with self._write_lock, self._write_errors(), self.engine.begin() as conn:
            if conn.execute(select(Run.id).where(col(Run.id) == run_id)).scalar() is None:
                raise StoreError(f"no run {run_id}")
            conn.execute(delete(RunTag).where(col(RunTag.run_id) == run_id))
            if clean:
                conn.execute(table_of(RunTag).insert(), [{"run_id": run_id, "tag": t} for t in clean])
        return clean

    def rename_run(self, run_id: str, name: str) -> None:
        with self._write_lock, self._write_errors(), self.engine.begin() as conn:
            done = conn.execute(update(Run).where(col(Run.id) == run_id).values(name=redact(name.strip()))).rowcount
        if not done:
            raise StoreError(f"no run {run_id}")

    def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete a run with its events, calls and tags in one transaction; returns how many of each went.
        A run still `running` is refused: its process would go on writing to it."""
        with self._write_lock, self._write_errors(), self.engine.begin() as conn:
            status = conn.execute(select(Run.status).where(col(Run.id) == run_id)).scalar()
            if status is None:
                raise StoreError(f"no run {run_id}")
            if status == RUNNING:
                raise StoreError(
                    f"run {run_id} is still running — cancel it (or wait for it to end) before deleting it"
                )
            counts = {
                "events": conn.execute(delete(EventRow).where(col(EventRow.run_id) == run_id)).rowcount,
                "calls": conn.execute(delete(LlmCall).where(col(LlmCall.run_id) == run_id)).rowcount,
                "tags": conn.execute(delete(RunTag).where(col(RunTag.run_id) == run_id)).rowcount,
            }
            conn.execute(delete(RunProgress).where(col(RunProgress.run_id) == run_id))
            conn.execute(delete(Run).where(col(Run.id) == run_id))
        self._active.discard(run_id)
        return counts

    def run_totals(self, run_ids: list[str] | None = None) -> dict[str, dict[str, float]]:
        """Per run: number of calls, errors, tokens, cost (spent), would-have-cost (replayed calls only,
        None when there were none) and summed latency."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = select(  # type: ignore[call-overload]  # sqlmodel types select() for up to 4 columns
                col(LlmCall.run_id),
                func.count(),
                func.sum(LlmCall.prompt_tokens),
                func.sum(LlmCall.completion_tokens),
                func.sum(LlmCall.cost),
                func.sum(LlmCall.latency_s),
                func.count(col(LlmCall.error)),
                func.sum(LlmCall.would_cost),
            ).group_by(LlmCall.run_id)
            if run_ids is not None:
                query = query.where(col(LlmCall.run_id).in_(run_ids))
            rows = session.exec(query).all()
        return {
            rid: {
                "calls": n,
                "prompt_tokens": pt or 0,
                "completion_tokens": ct or 0,
                "cost": cost or 0.0,
                "latency_s": lat or 0.0,
                "errors": errs,
                "would_cost": would,
            }
            for rid, n, pt, ct, cost, lat, errs, would in rows
            if rid is not None
        }

    # -- events ---------------------------------------------------------------------------------
    def append_event(self, run_id: str, seq: int, type_: str, payload: dict[str, Any], ts: datetime) -> None:
        self._add(EventRow(run_id=run_id, seq=seq, type=type_, payload_json=stored_json(payload), ts=ts))

    def append_events(self, events: Sequence[tuple[str, int, str, dict[str, Any], datetime]]) -> None:
        """Many events (run id, seq, type, payload, time) in one transaction: a batch run's thousand lines cost
        one commit instead of a thousand."""
        if not events:
            return
        rows = [
            EventRow(run_id=run_id, seq=seq, type=type_, payload_json=stored_json(payload), ts=ts)
            for run_id, seq, type_, payload, ts in events
        ]
        with self._write_lock, self._write_errors(), Session(self.engine) as session:
            session.add_all(rows)
            session.commit()

    def events(self, run_id: str, after_seq: int = -1) -> list[EventRow]:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = (
                select(EventRow).where(EventRow.run_id == run_id, EventRow.seq > after_seq).order_by(col(EventRow.seq))
            )
            return list(session.exec(query).all())

    # -- progress -------------------------------------------------------------------------------
    def first_events(self, run_ids: Sequence[str], type_: str) -> dict[str, dict[str, Any]]:
        """Each run's first event of one type (its payload), for the runs that have one: e.g. the first
        message of each conversation on a page of the history, in one query."""
        if not run_ids:
            return {}
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            first = (
                select(EventRow.run_id, func.min(EventRow.seq).label("seq"))
                .where(col(EventRow.run_id).in_(list(run_ids)), EventRow.type == type_)
                .group_by(col(EventRow.run_id))
                .subquery()
            )
            rows = session.exec(
                select(EventRow).join(
                    first, and_(col(EventRow.run_id) == first.c.run_id, col(EventRow.seq) == first.c.seq)
                )
            ).all()
        return {row.run_id: row.payload for row in rows}

    def count_events(self, run_ids: Sequence[str], type_: str) -> dict[str, int]:
        """How many events of one type each run has (runs with none are left out): e.g. the turns of each
        conversation on a page of the history, in one query."""
        if not run_ids:
            return {}
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            rows = session.exec(
                select(EventRow.run_id, func.count())
                .where(col(EventRow.run_id).in_(list(run_ids)), EventRow.type == type_)
                .group_by(col(EventRow.run_id))
            ).all()
        return {run_id: int(n) for run_id, n in rows}

    def set_progress(self, run_id: str, progress: dict[str, Any]) -> None:
        """Replace the run's progress (the run registry calls this, throttled)."""
        with (
            self._write_lock,
            self._write_errors(),
            Session(self.engine, expire_on_commit=False) as session,
        ):
            row = session.get(RunProgress, run_id) or RunProgress(run_id=run_id)
            row.progress_json = stored_json(progress)
            row.updated_at = utcnow()
            session.add(row)
            session.commit()

    def progress(self, run_id: str) -> dict[str, Any] | None:
        """The run's last stored progress, or None when it never reported any."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            row = session.get(RunProgress, run_id)
            return None if row is None else row.progress

    # -- LLM calls (models.recording.CallLog) ---------------------------------------------------
    def record_call(self, record: CallRecord) -> int:
        row = LlmCall.from_record(record)
        self._add(row)
        assert row.id is not None
        return row.id

    def find_calls(self, request_hash: str) -> list[CallRecord]:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = (
                select(LlmCall)
                .where(LlmCall.request_hash == request_hash)
                .order_by(col(LlmCall.created_at), col(LlmCall.id))
            )
            return [row.to_record() for row in session.exec(query).all()]

    def calls(self, run_id: str | None = None, limit: int | None = 1000) -> list[LlmCall]:
        """Calls in the order they were made; `limit=None` gives every one (exports)."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = select(LlmCall).order_by(col(LlmCall.id)).limit(limit)
            if run_id is not None:
                query = query.where(LlmCall.run_id == run_id)
            return list(session.exec(query).all())

    def call_count(self, run_id: str | None = None, *, live_only: bool = False) -> int:
        """How many calls are recorded (of one run); `live_only`: those a model answered (not replays)."""
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            query = select(func.count()).select_from(LlmCall)
            if run_id is not None:
                query = query.where(LlmCall.run_id == run_id)
            if live_only:
                query = query.where(LlmCall.backend != "replay")
            return int(session.exec(query).one())

    def get_call(self, call_id: int) -> LlmCall | None:
        with _db_errors(f"cannot read {self.display_url}"), Session(self.engine) as session:
            return session.get(LlmCall, call_id)

    # -- helpers --------------------------------------------------------------------------------
    def _add(self, row: SQLModel) -> None:
        with (
            self._write_lock,
            self._write_errors(),
            Session(self.engine, expire_on_commit=False) as session,
        ):
            session.add(row)
            session.commit()
            session.refresh(row)

    def ping(self) -> bool:
        with _db_errors(f"cannot reach {self.display_url}"), self.engine.connect() as conn:
            return conn.execute(text("SELECT 1")).scalar() == 1

    def dispose(self) -> None:
        self._beat_stop.set()
        self.engine.dispose()
