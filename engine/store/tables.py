"""The store's tables (SQLModel) and the values they hold: run statuses, JSON columns (redacted on the way in),
times in UTC."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Index,
    Table,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from models.recording import CallFacts, CallRecord
from models.secrets import nothing_to_redact, redact, redact_obj

log = logging.getLogger(__name__)

# Run statuses. Every status but `running` is final; all but `finished` mean the run is incomplete.
RUNNING, FINISHED, FAILED, CANCELLED, INTERRUPTED = "running", "finished", "failed", "cancelled", "interrupted"
RUN_STATUSES = (RUNNING, FINISHED, FAILED, CANCELLED, INTERRUPTED)
HEARTBEAT_S = 15.0  # how often a process touches its running runs (at most a quarter of the staleness)
PG_MIGRATION_LOCK = 7_242_011  # pg_advisory_lock key: one process migrates at a time


class StoreError(RuntimeError):
    """The database cannot be opened or written; the message says which and what to do."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def _loads_object(text: str) -> dict[str, Any]:
    """A stored JSON object (an empty text reads as {})."""
    value: dict[str, Any] = json.loads(text or "{}")
    return value


def table_of(model: type[SQLModel]) -> Table:
    """A table model's Table: SQLModel sets `__table__` when the class is created; its stubs do not declare it."""
    table = model.__dict__.get("__table__")
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table


def aware(value: datetime) -> datetime:
    """A stored time as UTC-aware (SQLite gives naive datetimes back)."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class Run(SQLModel, table=True):
    __tablename__ = "runs"

    id: str = Field(primary_key=True)
    kind: str = Field(index=True)
    name: str = ""
    status: str = Field(default=RUNNING, index=True)  # one of RUN_STATUSES
    config_json: str = "{}"
    config_hash: str = ""
    summary_json: str = "{}"
    error: str | None = None
    started_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None
    # Who runs it (migration 2): a dead owner's run is marked interrupted by the next process.
    owner_host: str | None = None
    owner_pid: int | None = None
    owner_started: float | None = None  # the owner process's start time (epoch s): a reused pid differs
    heartbeat_at: datetime | None = None

    @property
    def config(self) -> dict[str, Any]:
        return _loads_object(self.config_json)

    @property
    def summary(self) -> dict[str, Any]:
        return _loads_object(self.summary_json)

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (aware(self.finished_at) - aware(self.started_at)).total_seconds()


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
        return _loads_object(self.payload_json)


class LlmCall(SQLModel, CallFacts, table=True):
    """A row of `llm_calls`: the call's facts as they are (`models.recording.CallFacts`, the columns written
    once), its id, and the request, parsed answer and flags as redacted JSON."""

    __tablename__ = "llm_calls"
    __table_args__ = (
        Index("ix_llm_calls_hash_created", "request_hash", "created_at"),
        Index("ix_llm_calls_run_id", "run_id"),
        Index("ix_llm_calls_model_id", "model_id"),
        Index("ix_llm_calls_created_at", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    request_json: str
    parsed_json: str | None = None
    flags_json: str = "[]"

    @classmethod
    def from_record(cls, record: CallRecord) -> LlmCall:
        """The row of a call: every key value in the texts and the JSON redacted."""
        facts = {name: getattr(record, name) for name in CallFacts.model_fields}
        return cls(
            **facts
            | {
                "raw_text": redact(record.raw_text) if record.raw_text else record.raw_text,
                "error": redact(record.error) if record.error else record.error,
            },
            request_json=stored_json(record.request),
            parsed_json=stored_json(record.parsed) if record.parsed is not None else None,
            flags_json=stored_json(record.flags),
        )

    def to_record(self) -> CallRecord:
        return CallRecord(
            **{name: getattr(self, name) for name in CallFacts.model_fields},
            request=json.loads(self.request_json),
            parsed=json.loads(self.parsed_json) if self.parsed_json else None,
            flags=json.loads(self.flags_json or "[]"),
        )


class RunTag(SQLModel, table=True):
    """A label a researcher put on a run (migration 4); a run has any number, each once."""

    __tablename__ = "run_tags"
    __table_args__ = (UniqueConstraint("run_id", "tag", name="uq_run_tag"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="runs.id")
    tag: str = Field(index=True)


class RunProgress(SQLModel, table=True):
    """A live run's last progress (done / total / step / ETA), written throttled by the process running it,
    so any tab or process can show it by run id. One row per run; kept after the run ends."""

    __tablename__ = "run_progress"

    run_id: str = Field(primary_key=True)
    progress_json: str = "{}"
    updated_at: datetime = Field(default_factory=utcnow)

    @property
    def progress(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.progress_json or "{}")
        return value


class LabelRow(SQLModel, table=True):
    """A researcher's label for one item of a mechanism (migration 5; engine/labels reads and writes it). Labels
    outlive their runs: `run_id` is not a foreign key, so deleting a run keeps what the user taught.

    Each label is stored once (migration 6, `engine.store.labels`): `dedup_key` is unique — a hash of the
    mechanism, run, item, user, value, source and time — and a label imported without a time also has a unique
    `content_key` (its fields, note and context), so importing the same file again, or twice at once, adds
    nothing. Both are NULL-able only because SQLite cannot add a NOT NULL column to a table that has rows."""

    __tablename__ = "labels"
    __table_args__ = (
        Index("ix_labels_mechanism_user", "mechanism", "user_name"),
        Index("uq_labels_dedup_key", "dedup_key", unique=True),
        Index("uq_labels_content_key", "content_key", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    mechanism: str
    run_id: str | None = Field(default=None, index=True)
    item_key: str
    label: str
    note: str = ""
    user_name: str  # `user` is a reserved word in PostgreSQL
    source: str
    created_at: datetime = Field(default_factory=utcnow, index=True)
    context_json: str = "{}"
    dedup_key: str | None = None
    content_key: str | None = None

    @property
    def context(self) -> dict[str, Any]:
        return _loads_object(self.context_json)


LABEL_COLUMNS = (
    "id",
    "mechanism",
    "run_id",
    "item_key",
    "label",
    "note",
    "user_name",
    "source",
    "created_at",
    "context_json",
)


class SchemaMigration(SQLModel, table=True):
    __tablename__ = "schema_migrations"

    version: int = Field(primary_key=True)
    name: str
    applied_at: datetime = Field(default_factory=utcnow)


MAX_TAG_LENGTH = 64


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def stored_json(value: object) -> str:
    """JSON of a stored value, with every key value redacted (replies, errors and configs can hold one). With no
    secret known, the walk through the value is skipped (a recording's import stores ~500 of them a run)."""
    if nothing_to_redact():
        return json.dumps(value, ensure_ascii=False, default=str)
    return redact(json.dumps(redact_obj(value), ensure_ascii=False, default=str))
