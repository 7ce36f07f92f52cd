"""Which database a URL names (psycopg 3 for PostgreSQL, the password hidden in messages), and the SQLite file's
own checks: a folder that cannot be written, `PRAGMA quick_check` through a read-only connection, and the file
being deleted or replaced while it is open (`FileWatch`, looked at by `WriteGate` before every write)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from engine.store.tables import StoreError


def driver_url(url: str) -> str:
    """The SQLAlchemy URL to connect with: plain postgresql:// (and postgres://) use psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def folder_writable(folder: Path) -> bool:
    """Whether files can be made in the folder. access() answers for an immutable folder (chattr +i) and a
    read-only mount as well, for root too."""
    return os.access(folder, os.W_OK | os.X_OK)


def uri_file(uri: str) -> Path | None:
    """The file a SQLite URI filename names (`file:/data/judgelab.db?mode=rwc` → /data/judgelab.db), or None for
    a database in memory (`file::memory:`, `mode=memory`)."""
    parts = urlsplit(uri)
    if not parts.path or parts.path == ":memory:" or parse_qs(parts.query).get("mode") == ["memory"]:
        return None
    return Path(unquote(parts.path))


# SQLite's own words for a file that is not a sound database (the other errors say it could not be read)
DAMAGE_ERRORS = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def sqlite_check(path: Path, timeout_s: float = 10.0, *, read_only_folder: bool = False) -> tuple[str | None, str]:
    """(what `PRAGMA quick_check` finds wrong, or None when sound; the read-only URI that opened the file).
    Read through a read-only connection, so checking never writes. In a folder that is not writable a WAL
    file may not open read-only (SQLite would make its -shm file): it is then read as `immutable`. Raises
    sqlite3.Error when the file cannot be read at all (permissions, I/O) — that is not damage."""
    base = f"file:{quote(str(path.resolve()))}?mode=ro"
    uris = [base, base + "&immutable=1"] if read_only_folder else [base]
    for uri in uris:
        try:
            return _quick_check(uri, timeout_s), uri
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "") in DAMAGE_ERRORS:
                return str(exc), uri
            if uri == uris[-1]:
                raise
    raise AssertionError("unreachable")


def _quick_check(uri: str, timeout_s: float) -> str | None:
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s)
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
    finally:
        conn.close()
    if rows == ["ok"]:
        return None
    return "; ".join(str(r) for r in rows[:3]) + (f" (+{len(rows) - 3} more)" if len(rows) > 3 else "")


FRESH_FILE_S = 5.0  # a file modified this recently may still be being created by another process
FRESH_RECHECKS, FRESH_RECHECK_S = 10, 0.2


def settled_check(path: Path, timeout_s: float = 10.0, *, read_only_folder: bool = False) -> tuple[str | None, str]:
    """`sqlite_check`, looked at again for a moment when the file was written in the last few seconds: it may be
    a new database another process is making right now (its header not yet complete), not a damaged one."""
    problem, uri = sqlite_check(path, timeout_s, read_only_folder=read_only_folder)
    for _ in range(FRESH_RECHECKS):
        if not problem or time.time() - path.stat().st_mtime > FRESH_FILE_S:
            break
        time.sleep(FRESH_RECHECK_S)
        problem, uri = sqlite_check(path, timeout_s, read_only_folder=read_only_folder)
    return problem, uri


class FileWatch:
    """The SQLite file a store opened, known by its identity (device, inode). SQLite keeps its open file
    descriptors: a file deleted (or replaced by another, even a sound database) while a process runs goes on
    being written — into the deleted inode, lost at exit, while the path shows nothing or the other file.
    `problem()` tells that with one `os.stat` (a few microseconds), so every write can look first."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path.absolute()  # a later change of the working folder does not move it
        self.shown = shown  # the file as the URL names it, for messages
        info = os.stat(path)
        self.identity = (info.st_dev, info.st_ino)

    def problem(self) -> str | None:
        """What happened to the file ("the database X was deleted while judgelab was running"), or None while
        it is still the one opened."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            happened = "was deleted"
        except OSError as exc:
            happened = f"can no longer be found ({exc.strerror or exc})"
        else:
            if (info.st_dev, info.st_ino) == self.identity:
                return None
            happened = "was replaced by another file"
        return f"the database {self.shown} {happened} while judgelab was running"


RESTART = "restart the dashboard (or the command) to open it again"


class WriteGate:
    """The store's write lock, which also looks at the file before letting a write transaction in: every write
    (and anything else that takes the lock, such as loading the demo runs) is refused with one line once the
    file was deleted or replaced. Looked at after the lock is taken, so a writer that waited sees the file of
    now, not of when it started waiting."""

    def __init__(self, watch: FileWatch | None = None) -> None:
        self.watch = watch  # None: nothing to watch (in-memory SQLite, PostgreSQL) or not yet opened
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()
        problem = self.watch.problem() if self.watch is not None else None
        if problem is not None:
            self._lock.release()
            raise StoreError(f"{problem}; nothing was written — {RESTART}")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._lock.release()


def use_wal(cursor: sqlite3.Cursor, busy_s: float) -> None:
    """`PRAGMA journal_mode=WAL` on a new connection, tried again while the file is locked: a file that several
    processes open at the moment it is made answers "database is locked" at once, without waiting its busy
    timeout, while another process turns it into WAL or makes its first tables."""
    deadline = time.monotonic() + busy_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# The first word of a statement that changes the file: looked at by the engine itself, whoever runs it
WRITE_VERBS = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"})


def watch_engine(
    engine: Engine, problem: Callable[[], str | None], opened: Callable[[], Path | None] = lambda: None
) -> None:
    """The engine's own looks at the file (`problem`: what happened to it, or None): no new connection to a deleted
    or replaced file, and no statement that writes through the connections already open — whoever runs it (the
    skip cache keeps its table on the store's engine with its own sessions, outside the store's write lock).
    `opened`: the file once the store has made it (None before): new connections then open it without SQLite's
    "create", so a file deleted between the look and the open is not made again, empty, at its path."""

    def gone() -> StoreError | None:
        found = problem()
        return None if found is None else StoreError(f"{found}: cannot open a new connection to it — {RESTART}")

    @event.listens_for(engine, "do_connect")
    def _same_file(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> Any:
        # A new connection to a deleted path would make an empty database there (and to a replaced one, read
        # another database): refused with the reason, while the open connections read on.
        if (refused := gone()) is not None:
            raise refused
        path = opened()
        if path is None:
            return None  # SQLAlchemy opens it as its URL says
        params = {key: value for key, value in cparams.items() if key != "uri"}
        try:
            return sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, **params)
        except sqlite3.OperationalError:
            if (refused := gone()) is not None:  # deleted in the moment between the look and the open
                raise refused from None
            raise

    @event.listens_for(engine, "before_cursor_execute")
    def _write_looks(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        first = statement[:32].split(None, 1)
        if first and first[0].upper() in WRITE_VERBS:
            found = problem()
            if found is not None:
                raise StoreError(f"{found}; nothing was written — {RESTART}")
