"""The judgment cache: one entry per conversation scope, valid (the scope is skipped) until its window ends or a
newer message arrives, and the repositories that keep it — its own `judgment_caches` table on any SQLAlchemy
engine (outside the run store), or a dict for simulations."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Index, UniqueConstraint, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field as SQLField
from sqlmodel import Session, SQLModel, col, delete, select

from engine.skip.messages import scope_key
from engine.store import aware, table_of
from models.secrets import redact

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Engine


@dataclass(frozen=True)
class JudgmentCache:
    channel_id: str
    thread_ts: str | None
    should_respond: bool
    confidence: float
    reason: str
    latest_message_ts: str
    next_check_at: datetime
    created_at: datetime
    updated_at: datetime

    @property
    def scope_key(self) -> str:
        return scope_key(self.channel_id, self.thread_ts)

    def is_valid(self, current_time: datetime, current_latest_message_ts: str) -> bool:
        """True (skip) while before `next_check_at` and no newer message arrived in the scope."""
        if current_time >= self.next_check_at:
            return False
        return current_latest_message_ts == self.latest_message_ts


class JudgmentCacheModel(SQLModel, table=True):
    __tablename__ = "judgment_caches"
    __table_args__ = (
        UniqueConstraint("channel_id", "thread_ts", name="uq_channel_thread"),
        # SQL treats NULLs as distinct, so the constraint above lets top-level rows (thread NULL)
        # duplicate; this partial index closes that gap.
        Index(
            "uq_channel_top",
            "channel_id",
            unique=True,
            sqlite_where=text("thread_ts IS NULL"),
            postgresql_where=text("thread_ts IS NULL"),
        ),
    )

    id: int | None = SQLField(default=None, primary_key=True)
    channel_id: str = SQLField(index=True)
    thread_ts: str | None = SQLField(default=None, index=True)
    should_respond: bool
    confidence: float
    reason: str
    latest_message_ts: str
    next_check_at: datetime = SQLField(index=True)
    created_at: datetime = SQLField(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = SQLField(default_factory=lambda: datetime.now(UTC))


_CACHE_FIELDS = tuple(f.name for f in fields(JudgmentCache))  # each is a column of JudgmentCacheModel too
_SCOPE_AND_BIRTH = frozenset({"channel_id", "thread_ts", "created_at"})  # what an update of a row keeps


def _to_entity(row: JudgmentCacheModel) -> JudgmentCache:
    values = {name: getattr(row, name) for name in _CACHE_FIELDS}
    return JudgmentCache(**values | {k: aware(values[k]) for k in ("next_check_at", "created_at", "updated_at")})


class JudgmentCacheRepository(Protocol):
    async def save(self, cache: JudgmentCache) -> None: ...

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None: ...

    async def delete_expired(self, before: datetime) -> int: ...

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None: ...


class SQLJudgmentCacheRepository:
    """The repository on any SQLAlchemy engine (SQLite by default): upsert per (channel, thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        JudgmentCacheModel.metadata.create_all(engine, tables=[table_of(JudgmentCacheModel)])

    @staticmethod
    def _scope(channel_id: str, thread_ts: str | None) -> ColumnElement[bool]:
        thread = col(JudgmentCacheModel.thread_ts)
        return (col(JudgmentCacheModel.channel_id) == channel_id) & (
            thread.is_(None) if thread_ts is None else thread == thread_ts
        )

    async def save(self, cache: JudgmentCache) -> None:

        cache = replace(cache, reason=redact(cache.reason))  # a model's reason can echo a key
        for _ in range(2):  # a concurrent insert of the same scope turns the second try into an update
            with Session(self.engine) as session:
                row = session.exec(
                    select(JudgmentCacheModel).where(self._scope(cache.channel_id, cache.thread_ts))
                ).first()
                if row is None:
                    row = JudgmentCacheModel(**{name: getattr(cache, name) for name in _CACHE_FIELDS})
                else:
                    for name in set(_CACHE_FIELDS) - _SCOPE_AND_BIRTH:
                        setattr(row, name, getattr(cache, name))
                session.add(row)
                try:
                    session.commit()
                    return
                except IntegrityError:
                    session.rollback()
        raise RuntimeError(f"could not save the judgment cache of {cache.scope_key}")

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None:
        with Session(self.engine) as session:
            row = session.exec(select(JudgmentCacheModel).where(self._scope(channel_id, thread_ts))).first()
            return _to_entity(row) if row else None

    async def delete_expired(self, before: datetime) -> int:
        with Session(self.engine) as session:
            result = session.exec(delete(JudgmentCacheModel).where(col(JudgmentCacheModel.next_check_at) < before))
            session.commit()
            return int(result.rowcount or 0)

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None:
        with Session(self.engine) as session:
            session.exec(delete(JudgmentCacheModel).where(self._scope(channel_id, thread_ts)))
            session.commit()

    async def count(self) -> int:
        with Session(self.engine) as session:
            return len(session.exec(select(JudgmentCacheModel.id)).all())


class MemoryJudgmentCacheRepository:
    """The same contract in a dict: for simulations of many simulated hours in seconds."""

    def __init__(self) -> None:
        self.rows: dict[str, JudgmentCache] = {}

    async def save(self, cache: JudgmentCache) -> None:
        existing = self.rows.get(cache.scope_key)
        self.rows[cache.scope_key] = replace(cache, created_at=existing.created_at) if existing else cache

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None:
        return self.rows.get(scope_key(channel_id, thread_ts))

    async def delete_expired(self, before: datetime) -> int:
        expired = [k for k, v in self.rows.items() if v.next_check_at < before]
        for key in expired:
            del self.rows[key]
        return len(expired)

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None:
        self.rows.pop(scope_key(channel_id, thread_ts), None)

    async def count(self) -> int:
        return len(self.rows)
