"""The store's labels: rows written once each (a unique key per label), in bulk for imports, read back in order.

A label's `dedup_key` is a hash of its mechanism, run, item, user, value, source and time (UTC, to the
microsecond), unique in the table: a label given again later is a new label (another time), the same label
written twice is stored once. A row imported from a file that gives no time is stamped with the time of the
import, so it also gets a `content_key` — a hash of those fields without the time, with its note and context —
unique too: importing that file again (or twice at once) recognises it. Inserts skip a row whose key is already
there (`INSERT … ON CONFLICT DO NOTHING`, SQLite and PostgreSQL alike) inside one transaction, so concurrent
imports of one file store each label once and each says how many of its rows were new.

Migration 6 (`add_label_keys`) adds both columns to a database from before, gives every stored row its
`dedup_key`, and keeps existing duplicates (two rows of the same label and time, from concurrent imports before
the key existed): the first keeps the key, each later one gets the key suffixed with its own id — nothing is
deleted, and the unique index can be made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, delete, inspect, text
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import Session, col, select

from engine.store.connection import WriteGate
from engine.store.tables import LABEL_COLUMNS, LabelRow, StoreError, stored_json, table_of
from models.secrets import bulk_redactor, redact

CHUNK = 2000  # rows a statement: SQLite's 32,766 variables allow ~2,900 of 11 columns
KEYING_TRIES = 5  # migration 6 run by several processes at once: each looks again after a busy moment
UNIQUE_INDEXES = (("uq_labels_dedup_key", "dedup_key"), ("uq_labels_content_key", "content_key"))


class NewLabel(NamedTuple):
    """A checked label not yet stored (engine/labels checks it): what an import holds of each row."""

    mechanism: str
    run_id: str | None
    item_key: str
    label: str
    note: str
    user_name: str
    source: str
    created_at: datetime
    context_json: str
    timed: bool = True  # False: its file gave no time (stamped now): its content is its key (`content_key`)


def _utc_text(moment: datetime) -> str:
    naive = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
    return naive.isoformat(timespec="microseconds")


def _digest(parts: Iterable[str]) -> str:
    # NUL separates the parts: no label text may hold one (engine.labelstore refuses it)
    return hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def dedup_key(
    mechanism: str, run_id: str | None, item_key: str, user: str, label: str, source: str, created_at: datetime
) -> str:
    """The label's unique key: what, by whom, from where and when (UTC, microseconds)."""
    return _digest((mechanism, run_id or "", item_key, user, label, source, _utc_text(created_at)))


def content_key(row: NewLabel) -> str:
    """The key of a label whose file gave no time: its fields, note and context, without the time."""
    return _digest(
        ("c", row.mechanism, row.run_id or "", row.item_key, row.user_name, row.label, row.source, row.note)
        + (row.context_json,)
    )


def _params(rows: Iterable[NewLabel], scrub: Callable[[str], str] | None) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if scrub is not None:
            row = row._replace(note=scrub(row.note), context_json=scrub(row.context_json))
        out.append(
            {
                "mechanism": row.mechanism,
                "run_id": row.run_id,
                "item_key": row.item_key,
                "label": row.label,
                "note": row.note,
                "user_name": row.user_name,
                "source": row.source,
                "created_at": row.created_at,
                "context_json": row.context_json,
                "dedup_key": dedup_key(
                    row.mechanism, row.run_id, row.item_key, row.user_name, row.label, row.source, row.created_at
                ),
                "content_key": None if row.timed else content_key(row),
            }
        )
    return out


def _insert_new(dialect: str) -> Any:
    """INSERT that skips a row whose key is already stored (the dialect's own ON CONFLICT DO NOTHING)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = table_of(LabelRow)
    return insert(table).on_conflict_do_nothing().returning(table.c.id)  # the rows that went in: one id each


class LabelMethods:
    """The label half of `Store` (a mixin: the store gives the engine, the write lock and the write errors)."""

    engine: Engine
    display_url: str
    _write_lock: WriteGate

    def _write_errors(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError  # the store's own

    def insert_labels(
        self, rows: Sequence[NewLabel], *, check: Callable[[], None] | None = None, redacted: bool = False
    ) -> int:
        """Store every label not stored yet, in one transaction, a few thousand a statement; returns how many
        went in (the rest were there already). Notes and contexts are redacted (a pasted key never reaches the
        database) unless `redacted`. `check` runs between statements, inside the transaction: what it raises
        (a cancel) rolls everything back; it must not write to the store."""
        scrub = None if redacted else bulk_redactor()
        inserted = 0
        with self._write_lock, self._write_errors(), self.engine.begin() as conn:
            statement = _insert_new(conn.dialect.name)
            for start in range(0, len(rows), CHUNK):
                if check is not None:
                    check()
                # counted by what RETURNING gives back: a driver's rowcount of a batched insert may be -1
                inserted += len(conn.execute(statement, _params(rows[start : start + CHUNK], scrub)).all())
            if check is not None:
                check()  # the last moment a cancel rolls it all back
        return inserted

    def add_labels(self, rows: Sequence[LabelRow]) -> list[LabelRow]:
        """Insert labels (given on a page) in one transaction; a label already stored (same key: the same
        label at the same microsecond) is not written twice. Notes and contexts are redacted; returns the rows
        with their ids."""
        news = []
        for row in rows:
            row.note = redact(row.note)
            row.context_json = stored_json(json.loads(row.context_json or "{}"))
            news.append(
                NewLabel(
                    row.mechanism,
                    row.run_id,
                    row.item_key,
                    row.label,
                    row.note,
                    row.user_name,
                    row.source,
                    row.created_at,
                    row.context_json,
                )
            )
            row.dedup_key = dedup_key(
                row.mechanism, row.run_id, row.item_key, row.user_name, row.label, row.source, row.created_at
            )
        self.insert_labels(news, redacted=True)
        table = table_of(LabelRow)
        ids: dict[str, int] = {}
        with self.engine.connect() as conn:
            keys = [row.dedup_key for row in rows]
            for start in range(0, len(keys), CHUNK):
                query = core_select(table.c.dedup_key, table.c.id).where(
                    table.c.dedup_key.in_(keys[start : start + CHUNK])
                )
                ids.update((key, int(id_)) for key, id_ in conn.execute(query))
        for row in rows:
            row.id = ids.get(row.dedup_key or "")
        return list(rows)

    def labels(
        self,
        *,
        mechanism: str | None = None,
        run_id: str | None = None,
        user: str | None = None,
        run_ids: Sequence[str] | None = None,
    ) -> list[LabelRow]:
        """Labels in the order they were given (oldest first)."""
        with Session(self.engine) as session:
            return list(session.exec(_label_query(select(LabelRow), mechanism, run_id, user, run_ids)).all())

    def label_tuples(
        self,
        *,
        mechanism: str | None = None,
        run_id: str | None = None,
        user: str | None = None,
        run_ids: Sequence[str] | None = None,
    ) -> list[tuple[Any, ...]]:
        """The same rows as plain tuples in `LABEL_COLUMNS` order (no ORM objects: 10,000 labels read in a
        fraction of the time)."""
        table = table_of(LabelRow)
        query = core_select(*(table.c[name] for name in LABEL_COLUMNS))
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(_label_query(query, mechanism, run_id, user, run_ids))]

    def delete_label(self, label_id: int) -> None:
        with self._write_lock, self._write_errors(), self.engine.begin() as conn:
            if conn.execute(delete(LabelRow).where(col(LabelRow.id) == label_id)).rowcount == 0:
                raise StoreError(f"no label {label_id}")


def _label_query(query: Any, mechanism: str | None, run_id: str | None, user: str | None, run_ids: Any) -> Any:
    if mechanism is not None:
        query = query.where(col(LabelRow.mechanism) == mechanism)
    if run_id is not None:
        query = query.where(col(LabelRow.run_id) == run_id)
    if run_ids is not None:
        query = query.where(col(LabelRow.run_id).in_(list(run_ids)))
    if user is not None:
        query = query.where(col(LabelRow.user_name) == user)
    return query.order_by(col(LabelRow.id))


# -- migration 6 ------------------------------------------------------------------------------------------------
def add_label_keys(engine: Engine) -> None:
    """Migration 6: the key columns, a key for every stored row, existing duplicates kept apart, the unique
    indexes. Safe to run again, and by two processes at once (the keys are deterministic)."""
    found = inspect(engine)
    if not found.has_table("labels"):
        return  # a missing table is created whole, with the keys, after the migrations
    for name in ("dedup_key", "content_key"):
        if name in {c["name"] for c in inspect(engine).get_columns("labels")}:
            continue
        try:
            with engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE labels ADD COLUMN {name} VARCHAR"))
        except DBAPIError:  # another process added it meanwhile; anything else shows on this check
            if name not in {c["name"] for c in inspect(engine).get_columns("labels")}:
                raise
    if _keyed(engine):
        return  # a new database: the table was made with its keys (no write, so no lock for the others)
    for attempt in range(KEYING_TRIES):
        try:
            with engine.begin() as conn:
                _fill_keys(conn)
                _separate_duplicates(conn)
                for index, column in UNIQUE_INDEXES:
                    conn.execute(text(f"CREATE UNIQUE INDEX IF NOT EXISTS {index} ON labels ({column})"))
            return
        except OperationalError:
            # Another process keyed the rows meanwhile (SQLite: this snapshot is stale, or the file is busy):
            # look again — the rows it keyed are skipped, the keys are the same.
            if attempt == KEYING_TRIES - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def _keyed(engine: Engine) -> bool:
    """Every row has its key and both unique indexes exist: nothing to do."""
    if not {name for name, _ in UNIQUE_INDEXES} <= {i["name"] for i in inspect(engine).get_indexes("labels")}:
        return False
    c = table_of(LabelRow).c
    with engine.connect() as conn:
        return conn.execute(core_select(c.id).where(c.dedup_key.is_(None)).limit(1)).first() is None


def _fill_keys(conn: Connection, batch: int = 5000) -> None:
    table = table_of(LabelRow)
    c = table.c
    fields = (c.id, c.mechanism, c.run_id, c.item_key, c.user_name, c.label, c.source, c.created_at)
    last = -1
    while True:
        rows = conn.execute(
            core_select(*fields).where(c.dedup_key.is_(None), c.id > last).order_by(c.id).limit(batch)
        ).all()
        if not rows:
            return
        conn.execute(
            text("UPDATE labels SET dedup_key = :key WHERE id = :id"),
            [{"id": r[0], "key": dedup_key(r[1], r[2], r[3], r[4], r[5], r[6], r[7])} for r in rows],
        )
        last = rows[-1][0]


def _separate_duplicates(conn: Connection) -> None:
    """Rows stored twice before the key existed: the first keeps its key, each later one gets `key-<its id>`."""
    table = table_of(LabelRow)
    c = table.c
    twice = core_select(c.dedup_key).where(c.dedup_key.is_not(None)).group_by(c.dedup_key).having(text("count(*) > 1"))
    rows = conn.execute(core_select(c.id, c.dedup_key).where(c.dedup_key.in_(twice)).order_by(c.dedup_key, c.id)).all()
    seen: set[str] = set()
    later = []
    for id_, key in rows:
        if key in seen:
            later.append({"id": id_, "key": f"{key}-{id_}"})
        seen.add(key)
    if later:
        conn.execute(text("UPDATE labels SET dedup_key = :key WHERE id = :id"), later)
