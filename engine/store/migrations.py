"""Schema changes: an ordered list of small migration functions, applied once each and tracked in
`schema_migrations`. Append only; never edit an applied one."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Engine,
    inspect,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlmodel import SQLModel

from engine.store.labels import add_label_keys
from engine.store.tables import LabelRow, RunTag, table_of


# Ordered migrations: (version, name, function). Append only; never edit an applied one.
# Mechanism modules register their tables on SQLModel.metadata before the store is opened,
# so migration 1 creates every table known at that time; later ones add what appears later.
def _create_all(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine)


# Migration 1 creates tables from today's models, so on a new database the columns below already
# exist; each migration is written to be a no-op for what is already there.
OWNER_COLUMNS = (
    ("owner_host", "VARCHAR"),
    ("owner_pid", "INTEGER"),
    ("owner_started", "FLOAT"),
    ("heartbeat_at", "TIMESTAMP"),
)


def _add_columns(table: str, columns: tuple[tuple[str, str], ...]) -> Callable[[Engine], None]:
    """The one way a migration adds nullable columns: each (name, SQL type) that `table` lacks; a no-op where
    migration 1 already created them, or where the table is missing (it is created whole, with them, after the
    migrations). Another process adding one in the meantime is not an error."""

    def present(engine: Engine) -> set[str]:
        return {c["name"] for c in inspect(engine).get_columns(table)}

    def apply(engine: Engine) -> None:
        if not inspect(engine).has_table(table):
            return
        have = present(engine)
        for name, ddl_type in columns:
            if name in have:
                continue
            try:
                with engine.begin() as conn:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {ddl_type}"))
            except DBAPIError:
                if name not in present(engine):  # not another process's doing: the check shows the real error
                    raise

    return apply


def _create_run_tags(engine: Engine) -> None:
    table_of(RunTag).create(engine, checkfirst=True)


def _create_labels(engine: Engine) -> None:
    table_of(LabelRow).create(engine, checkfirst=True)


MIGRATIONS: list[tuple[int, str, Callable[[Engine], None]]] = [
    (1, "create tables", _create_all),
    (2, "run owner and heartbeat", _add_columns("runs", OWNER_COLUMNS)),
    # Replayed calls spend nothing: `cost` is 0 and the recorded original's cost is kept here.
    (3, "llm_calls.would_cost", _add_columns("llm_calls", (("would_cost", "FLOAT"),))),
    (4, "run tags", _create_run_tags),
    (5, "labels", _create_labels),
    # Each label stored once: its unique key (engine/store/labels.py says how, and what happens to duplicates).
    (6, "labels.dedup_key", add_label_keys),
]
