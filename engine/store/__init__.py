"""The run store: runs, their events and every LLM call, in SQLite (WAL) or PostgreSQL (psycopg 3).

One class, `Store`, owns every read and write. It implements `models.recording.CallLog`, so model
calls are recorded here and replay reads them back. Schema changes are an ordered list of small
migration functions, applied once each and tracked in `schema_migrations`.

A run is `running`, then `finished`, `failed`, `cancelled` (SIGINT/SIGTERM: closed by its own process
with every event so far) or `interrupted` (its process died without closing it: found and marked by
the next process that opens the store). Each run records its owner — host, pid and the process's start
time, so a reused pid is not mistaken for it — and a heartbeat, which is what tells a dead owner on
another host (no heartbeat for `JUDGELAB_RUN_STALE_AFTER_S`).

Opening a SQLite file first runs `PRAGMA quick_check` on a read-only connection: a damaged file is
refused with a clear error before anything is written to it, and never deleted. "Damaged" is said only
when the check (or SQLite's own corruption codes) says so; a file that cannot be opened gets the reason.
A file in a folder that is not writable (SQLite makes its -wal, -shm and journal files next to it) is
opened read-only: runs can be listed, shown and exported, and every write is refused naming the folder.
A SQLite file deleted or replaced while it is open is noticed before every write (`connection.FileWatch`: its
device and inode, one `os.stat` under the write lock, and again by the engine before any statement that writes,
whoever runs it) and the write refused with one line; SQLite would
otherwise go on writing into the deleted file.

The package: `tables` (the SQLModel tables and their values), `filters` (what the history searches by),
`migrations` (the ordered schema changes), `connection` (URLs and the SQLite file's checks), `owners` (who owns
a run, and whether it is gone), `labels` (labels stored once each: their unique keys, bulk inserts) and
`database` (`Store`).
"""

from __future__ import annotations

from engine.store.connection import driver_url, folder_writable, safe_url, sqlite_check
from engine.store.database import Store
from engine.store.filters import RunFilter
from engine.store.labels import NewLabel
from engine.store.migrations import MIGRATIONS
from engine.store.tables import (
    CANCELLED,
    FAILED,
    FINISHED,
    HEARTBEAT_S,
    INTERRUPTED,
    MAX_TAG_LENGTH,
    RUN_STATUSES,
    RUNNING,
    EventRow,
    LabelRow,
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

__all__ = [
    "NewLabel",
    "CANCELLED",
    "FAILED",
    "FINISHED",
    "HEARTBEAT_S",
    "INTERRUPTED",
    "MAX_TAG_LENGTH",
    "MIGRATIONS",
    "RUNNING",
    "RUN_STATUSES",
    "EventRow",
    "LabelRow",
    "LlmCall",
    "Run",
    "RunFilter",
    "RunProgress",
    "RunTag",
    "SchemaMigration",
    "Store",
    "StoreError",
    "aware",
    "config_hash",
    "driver_url",
    "folder_writable",
    "safe_url",
    "sqlite_check",
    "stored_json",
    "table_of",
    "utcnow",
]
