"""The one checked reader under every file the project reads (experiments, catalogs, characters, scripts,
cases, recordings, the secrets file) and every upload; and the atomic writer of the files a command is told to
write (`write_atomic`: exports, reports, scorecards).

It opens without blocking (`O_NONBLOCK`, so a FIFO with no writer or a device returns at once), checks
with `fstat` on the open descriptor — not on the name, which could be swapped — that it is a regular
file, refuses one above the size limit before reading a byte of it, and reads at most the limit (a file
that grows while it is read is refused too). The text must be UTF-8 (a BOM is accepted).

A file is written whole or not at all: into a temporary file in the target's folder, flushed to disk (fsync),
then renamed over the target, so a full disk, a kill or a crash leaves the old file (or none) and never half of
one. Only a regular file is replaced: a folder, a device (`/dev/full`), a FIFO or a socket is refused.

It lives in `models` because the model layer reads files too (the catalog, the secrets file) and must
not import `engine`; `engine.inputs` builds on it with the limit from the settings.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from models.terminal import one_line

DEFAULT_MAX_INPUT_MB = 10.0
_CHUNK = 1 << 20


class InputError(ValueError):
    """A user file cannot be used; the message names the file and why."""


class MissingFile(InputError):
    """The file does not exist (some readers fall back to a default then)."""


def env_limit_bytes() -> int:
    """The size limit from `JUDGELAB_MAX_INPUT_MB` (default 10 MB) for readers that have no settings
    (the model layer); an unusable value means the default, the settings report it elsewhere."""
    try:
        mb = float(os.environ.get("JUDGELAB_MAX_INPUT_MB") or DEFAULT_MAX_INPUT_MB)
    except ValueError:
        mb = DEFAULT_MAX_INPUT_MB
    if not 0 < mb <= 4096:
        mb = DEFAULT_MAX_INPUT_MB
    return int(mb * 1024 * 1024)


TMP_NAME_KEEP = 200  # bytes of the target's name kept in its temporary file's: plus 20 more, within NAME_MAX (255)


def shown_path(path: str | Path) -> str:
    """A path as a message names it: on one line, whatever its name holds (a newline, a CR, an ESC are shown
    as `\\u000a`…, as the CLI shows every control character), so an error about `$'a\\nb'` stays one line."""
    return one_line(str(path))


def check_size(source: str, size: int, limit: int) -> None:
    """Refuse a file or upload above the limit, naming the limit and how to raise it."""
    if size > limit:
        raise InputError(
            f"{source}: {size / 1024 / 1024:.1f} MB is above the input limit of {limit / 1024 / 1024:g} MB — "
            "split the file, or raise JUDGELAB_MAX_INPUT_MB"
        )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (default: `env_limit_bytes()`); anything else —
    missing, a directory, a FIFO, a device, too large, unreadable — is an InputError naming the file."""
    source = shown_path(path)
    limit = env_limit_bytes() if limit is None else limit
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MissingFile(f"{source}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{source}: is a directory, not a file") from None
    except OSError as exc:  # ENXIO: a socket; EACCES; ELOOP; …
        raise InputError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{source}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{source}: {_kind(info.st_mode)}, not a regular file")
        check_size(source, info.st_size, limit)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew after the check
                check_size(source, total, limit)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is accepted); a binary or otherwise undecodable file is an InputError."""
    if b"\x00" in data[:65536]:
        raise InputError(f"{source}: a binary file, not UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def read_text(path: str | Path, limit: int | None = None) -> str:
    """The UTF-8 text of a regular file within the limit (see `read_bytes`)."""
    return decode(read_bytes(path, limit), str(path))


class OutputError(OSError):
    """A file cannot be written where it was asked for; the message names the place and why, in one line."""


def check_target(path: str | Path) -> None:
    """OutputError unless `path` can be a file `write_atomic` replaces (a regular file, or none, in a folder)."""
    _check_target(shown_path(path), Path(os.path.realpath(path)))


def _check_target(source: str, target: Path) -> None:
    try:
        info = target.stat()
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise OutputError(f"{source}: no such folder") from None
        return
    except OSError as exc:
        raise OutputError(f"{source}: cannot write ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{source}: is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(f"{source}: {_kind(info.st_mode)}, not a regular file")


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write `data` (text as UTF-8, exactly: no newline translation) to `path` whole or not at all; a link is
    followed (the file it names is replaced). OutputError, one line naming `path`, when it cannot be."""
    source = shown_path(path)
    target = Path(os.path.realpath(path))
    _check_target(source, target)
    try:
        replace_whole(target, data)
    except OSError as exc:
        raise OutputError(f"{source}: cannot write ({exc.strerror or exc})") from None


TMP_SUFFIX = ".tmp"
STALE_S = 3600.0  # a temporary file this old is a crashed writer's (`replace_whole(..., clean_stale=True)`)


def replace_whole(path: Path, data: bytes | str, *, exclusive: bool = False, clean_stale: bool = False) -> None:
    """The atomic write itself, for a caller that has checked `path` (the maps' versions and pointer, an
    export's target): a hidden `.<name>.<random>.tmp` beside it, fsynced, then renamed over `path`, or with
    `exclusive` linked to a name that must not exist yet (FileExistsError: two writers never both succeed).
    Any OSError (a full disk…) leaves `path` as it was and removes the temporary file. An existing file keeps
    its mode; a new one gets what `open` gives (0666 less the umask). `clean_stale`: first remove this
    folder's hidden temporary files older than `STALE_S` (a crashed writer's; only in a folder of our own)."""
    folder = path.parent
    if clean_stale:
        _remove_stale(folder)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _temporary(folder, path.name)
    try:
        _write_all(fd, raw)
        if exclusive:
            _link_new(tmp, path)
        else:
            with contextlib.suppress(OSError):  # an existing file keeps its mode
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_folder(folder)


def replace_all(files: Sequence[tuple[Path, bytes | str]]) -> None:
    """Several files that go together (a panel's seat maps and its stack), written all or none as far as a
    filesystem allows: every one staged first as a hidden temporary file beside its target, fsynced; only when
    all are staged are they renamed over their targets, in turn. Any OSError while staging (a full disk, a folder
    that cannot be written, a target that is not a plain file) removes the temporary files and leaves every target
    as it was."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
                # a folder, link or FIFO where the file goes: its rename would fail after others were made
                raise OSError(errno.EISDIR, f"{path.name} is not a plain file")
            raw = data.encode("utf-8") if isinstance(data, str) else data
            fd, tmp = _temporary(path.parent, path.name)
            staged.append((tmp, path))
            _write_all(fd, raw)
        for tmp, path in staged:
            with contextlib.suppress(OSError):  # an existing file keeps its mode
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    for folder in dict.fromkeys(path.parent for path, _ in files):
        _fsync_folder(folder)


def _write_all(fd: int, raw: bytes) -> None:
    """Every byte to the open file, fsynced, then closed (closed on an error too)."""
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(folder: Path, name: str) -> tuple[int, str]:
    """A new hidden `.<name>.<random>.tmp` in `folder`, open for writing; O_EXCL: never an existing file or a
    link planted under that name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        kept = name.encode()[:TMP_NAME_KEEP].decode(errors="ignore")  # a name near the limit stays writable
        tmp = str(folder / f".{kept}.{secrets.token_hex(6)}{TMP_SUFFIX}")
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


def _remove_stale(folder: Path) -> None:
    now = time.time()
    for tmp in folder.glob(f".*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if now - tmp.lstat().st_mtime > STALE_S:
                tmp.unlink()


def _fsync_folder(folder: Path) -> None:
    """The rename made durable (the folder's entry); skipped where a folder cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
