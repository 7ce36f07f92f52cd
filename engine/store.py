"""The run store: runs, their events and every LLM call, in SQLite (WAL) or any SQLAlchemy database.

One class, `Store`, owns every read and write. It implements `models.recording.CallLog`, so model
calls are recorded here and replay reads them back. Schema changes are an ordered list of small
migration functions, applied once each and tracked in `schema_migrations`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from sqlalchemy import Engine, Index, UniqueConstraint, event, func, text
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from engine.config import get_settings
from models.recording import CallRecord
from models.secrets import redact, redact_obj


class StoreError(RuntimeError):
    """The database cannot be opened or written; the message says which and what to do."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Run(SQLModel, table=True):
    __tablename__ = "runs"

    id: str = Field(primary_key=True)
    kind: str = Field(index=True)
    name: str = ""
    status: str = Field(default="running", index=True)  # running | finished | failed
    config_json: str = "{}"
    config_hash: str = ""
    summary_json: str = "{}"
    error: str | None = None
    started_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json or "{}")

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads(self.summary_json or "{}")

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (_aware(self.finished_at) - _aware(self.started_at)).total_seconds()


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("run_id", "seq", name="uq_event_run_seq"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="runs.id")
    seq: int
    type: str = Field(index=True)
    payload_json: str = "{}"
    ts: datetime = Field(default_factory=utcnow)

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.payload_json or "{}")


class LlmCall(SQLModel, table=True):
    __tablename__ = "llm_calls"
    __table_args__ = (Index("ix_llm_calls_hash_created", "request_hash", "created_at"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    purpose: str = "adhoc"
    model_id: str = Field(index=True)
    backend: str
    model_name: str = ""
    request_hash: str
    request_json: str
    raw_text: str | None = None
    parsed_json: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    error_type: str | None = None
    flags_json: str = "[]"
    attempts: int = 1
    created_at: datetime = Field(default_factory=utcnow, index=True)

    def to_record(self) -> CallRecord:
        return CallRecord(
            run_id=self.run_id,
            purpose=self.purpose,
            model_id=self.model_id,
            backend=self.backend,
            model_name=self.model_name,
            request_hash=self.request_hash,
            request=json.loads(self.request_json),
            raw_text=self.raw_text,
            parsed=json.loads(self.parsed_json) if self.parsed_json else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=self.latency_s,
            cost=self.cost,
            finish_reason=self.finish_reason,
            error=self.error,
            error_type=self.error_type,
            flags=json.loads(self.flags_json or "[]"),
            attempts=self.attempts,
            created_at=self.created_at,
        )


class SchemaMigration(SQLModel, table=True):
    __tablename__ = "schema_migrations"

    version: int = Field(primary_key=True)
    name: str
    applied_at: datetime = Field(default_factory=utcnow)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _dumps(value: Any) -> str:
    """JSON of a stored value, with every key value redacted (replies, errors and configs can hold one)."""
    return redact(json.dumps(redact_obj(value), ensure_ascii=False, default=str))


# Ordered migrations: (version, name, function). Append only; never edit an applied one.
# Mechanism modules register their tables on SQLModel.metadata before the store is opened,
# so migration 1 creates every table known at that time; later ones add what appears later.
def _create_all(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine)


MIGRATIONS: list[tuple[int, str, Callable[[Engine], None]]] = [
    (1, "create tables", _create_all),
]


class Store:
    """All database access. Thread-safe: each method opens its own short session."""

    def __init__(self, url: str | None = None) -> None:
        settings = get_settings()
        self.url = url or settings.resolved_database_url
        self.is_sqlite = self.url.startswith("sqlite")
        connect_args: dict[str, Any] = {}
        if self.is_sqlite:
            connect_args = {"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_ms / 1000}
            path = self.url.split("sqlite:///", 1)[-1]
            if path and path != ":memory:" and not path.startswith("file:"):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.engine = create_engine(self.url, connect_args=connect_args)
        if self.is_sqlite:
            busy = settings.sqlite_busy_timeout_ms
            memory = ":memory:" in self.url

            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cursor = dbapi_conn.cursor()
                if not memory:
                    cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute(f"PRAGMA busy_timeout={int(busy)}")
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.close()

        self._write_lock = threading.Lock()
        self.migrate()

    # -- schema ---------------------------------------------------------------------------------
    def migrate(self) -> None:
        # Import mechanism tables so create_all sees them (they live beside their mechanism).
        try:
            SchemaMigration.metadata.create_all(self.engine, tables=[SchemaMigration.__table__])  # type: ignore[attr-defined]
            with Session(self.engine) as session:
                done = set(session.exec(select(SchemaMigration.version)).all())
            for version, name, apply in MIGRATIONS:
                if version in done:
                    continue
                apply(self.engine)
                with Session(self.engine) as session:
                    session.add(SchemaMigration(version=version, name=name))
                    session.commit()
            # Tables registered after the last migration (a new mechanism) are created too.
            SQLModel.metadata.create_all(self.engine)
        except DatabaseError as exc:
            raise StoreError(
                f"cannot open the database at {self.url}: {exc.orig} — if the file is damaged, move it "
                "away (nothing is deleted for you) or set JUDGELAB_DATABASE_URL to another database"
            ) from None

    def schema_version(self) -> int:
        with Session(self.engine) as session:
            return session.exec(select(func.max(SchemaMigration.version))).one() or 0

    # -- runs -----------------------------------------------------------------------------------
    def create_run(self, kind: str, config: dict[str, Any] | None = None, name: str = "") -> Run:
        config = redact_obj(config or {})
        run = Run(
            id=f"{kind.split('.')[0]}-{utcnow():%Y%m%d-%H%M%S}-{uuid4().hex[:6]}",
            kind=kind,
            name=redact(name),
            config_json=_dumps(config),
            config_hash=config_hash(config),
        )
        self._add(run)
        return run

    def finish_run(
        self, run_id: str, *, status: str = "finished", error: str | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        with self._write_lock, Session(self.engine) as session:
            run = session.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id}")
            run.status = status
            run.error = redact(error) if error else error
            run.finished_at = utcnow()
            if summary is not None:
                run.summary_json = _dumps(summary)
            session.add(run)
            session.commit()

    def get_run(self, run_id: str) -> Run | None:
        with Session(self.engine) as session:
            return session.get(Run, run_id)

    def list_runs(self, kind: str | None = None, limit: int = 200) -> list[Run]:
        with Session(self.engine) as session:
            query = select(Run).order_by(col(Run.started_at).desc()).limit(limit)
            if kind:
                query = query.where(col(Run.kind).startswith(kind))
            return list(session.exec(query).all())

    def run_totals(self, run_ids: list[str] | None = None) -> dict[str, dict[str, float]]:
        """Per run: number of calls, errors, tokens, cost and summed latency."""
        with Session(self.engine) as session:
            query = select(
                LlmCall.run_id,
                func.count(),
                func.sum(LlmCall.prompt_tokens),
                func.sum(LlmCall.completion_tokens),
                func.sum(LlmCall.cost),
                func.sum(LlmCall.latency_s),
                func.count(LlmCall.error),
            ).group_by(LlmCall.run_id)
            if run_ids is not None:
                query = query.where(col(LlmCall.run_id).in_(run_ids))
            rows = session.exec(query).all()
        return {
            rid: {
                "calls": n, "prompt_tokens": pt or 0, "completion_tokens": ct or 0,
                "cost": cost or 0.0, "latency_s": lat or 0.0, "errors": errs,
            }
            for rid, n, pt, ct, cost, lat, errs in rows
            if rid is not None
        }

    # -- events ---------------------------------------------------------------------------------
    def append_event(self, run_id: str, seq: int, type_: str, payload: dict[str, Any], ts: datetime) -> None:
        self._add(EventRow(run_id=run_id, seq=seq, type=type_, payload_json=_dumps(payload), ts=ts))

    def events(self, run_id: str, after_seq: int = -1) -> list[EventRow]:
        with Session(self.engine) as session:
            query = (
                select(EventRow)
                .where(EventRow.run_id == run_id, EventRow.seq > after_seq)
                .order_by(col(EventRow.seq))
            )
            return list(session.exec(query).all())

    # -- LLM calls (models.recording.CallLog) ---------------------------------------------------
    def record_call(self, record: CallRecord) -> int:
        row = LlmCall(
            run_id=record.run_id,
            purpose=record.purpose,
            model_id=record.model_id,
            backend=record.backend,
            model_name=record.model_name,
            request_hash=record.request_hash,
            request_json=_dumps(record.request),
            raw_text=redact(record.raw_text) if record.raw_text else record.raw_text,
            parsed_json=_dumps(record.parsed) if record.parsed is not None else None,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            latency_s=record.latency_s,
            cost=record.cost,
            finish_reason=record.finish_reason,
            error=redact(record.error) if record.error else record.error,
            error_type=record.error_type,
            flags_json=_dumps(record.flags),
            attempts=record.attempts,
            created_at=record.created_at,
        )
        self._add(row)
        assert row.id is not None
        return row.id

    def find_calls(self, request_hash: str) -> list[CallRecord]:
        with Session(self.engine) as session:
            query = (
                select(LlmCall)
                .where(LlmCall.request_hash == request_hash)
                .order_by(col(LlmCall.created_at), col(LlmCall.id))
            )
            return [row.to_record() for row in session.exec(query).all()]

    def calls(self, run_id: str | None = None, limit: int = 1000) -> list[LlmCall]:
        with Session(self.engine) as session:
            query = select(LlmCall).order_by(col(LlmCall.id)).limit(limit)
            if run_id is not None:
                query = query.where(LlmCall.run_id == run_id)
            return list(session.exec(query).all())

    def get_call(self, call_id: int) -> LlmCall | None:
        with Session(self.engine) as session:
            return session.get(LlmCall, call_id)

    # -- helpers --------------------------------------------------------------------------------
    def _add(self, row: SQLModel) -> None:
        try:
            with self._write_lock, Session(self.engine, expire_on_commit=False) as session:
                session.add(row)
                session.commit()
                session.refresh(row)
        except OperationalError as exc:
            raise StoreError(f"cannot write to {self.url}: {exc.orig}") from None

    def ping(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(text("SELECT 1")).scalar() == 1

    def dispose(self) -> None:
        self.engine.dispose()


_DEFAULT: dict[str, Store] = {}
_DEFAULT_LOCK = threading.Lock()


def default_store() -> Store:
    """One Store per database URL per process."""
    url = get_settings().resolved_database_url
    with _DEFAULT_LOCK:
        if url not in _DEFAULT:
            _DEFAULT[url] = Store(url)
        return _DEFAULT[url]
