"""Files written whole or not at all: the text goes to a temporary file in the same folder, is flushed to disk
(fsync), then renamed over the target (`os.replace`), or linked to a name that must not exist yet (`exclusive`:
a file already there is never overwritten). A full disk or a kill -9 leaves the old file intact and at most a
hidden `.<name>.*.tmp` beside it, which no listing reads and the next write of that folder removes once stale."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from pathlib import Path

TMP_SUFFIX = ".tmp"
STALE_S = 3600.0  # a temporary file this old is a crashed writer's: removed by the next write in its folder


def write_atomic(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write `text` (UTF-8) to `path` atomically. `exclusive`: FileExistsError when `path` exists (checked by
    the link that creates it, so two writers never both succeed). OSError (a full disk…) leaves `path` as it was."""
    folder = path.parent
    _remove_stale(folder)
    fd, tmp = _temporary(folder, path.name)
    try:
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            _link_new(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_folder(folder)


def _temporary(folder: Path, name: str) -> tuple[int, str]:
    """A new hidden `.<name>.<random>.tmp` in `folder`, open for writing. Created as `open` creates a file (0666
    less the umask, not mkstemp's 0600), so a version written by the CLI is readable by a dashboard run under
    another account as before; O_EXCL: never an existing file or a link planted under that name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(folder / f".{name}.{secrets.token_hex(6)}{TMP_SUFFIX}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def _link_new(tmp: str, path: Path) -> None:
    """`path` as a second name of the written file, failing when it exists; where the file system has no hard
    links, the name is reserved by an exclusive create first, then the file renamed over it."""
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.replace(tmp, path)


def _fsync_folder(folder: Path) -> None:
    """The rename itself made durable (the folder's entry); skipped where a folder cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_stale(folder: Path) -> None:
    now = time.time()
    for tmp in folder.glob(f".*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if now - tmp.lstat().st_mtime > STALE_S:
                tmp.unlink()
