"""User files (workloads, labels, scripts, cases, recordings, uploads): read under one size limit, as UTF-8
text, with an error naming the file for anything else — missing, a directory, binary, too large.

The limit is `JUDGELAB_MAX_INPUT_MB` (default 10 MB). Every loader parses the whole file into memory
(about 40× its size for a script of short lines), so the limit keeps one command under ~0.5 GB and a
simulation's start within seconds; a larger file is refused before a byte of it is read.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """A user file cannot be used; the message names the file and why."""


MAX_PROBLEMS_SHOWN = 20


def problem_lines(problems: list[str], header: str | None = None) -> str:
    """The first problems of a bad file, one a line, and how many more there are; `header` goes first."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    return "\n".join(([header] if header else []) + shown + ([f"… and {more} more"] if more else []))


def max_input_bytes() -> int:
    from engine.config import get_settings

    return int(get_settings().max_input_mb * 1024 * 1024)


def check_size(source: str, size: int) -> None:
    """Refuse a file or upload above the limit, naming the limit and how to raise it."""
    limit = max_input_bytes()
    if size > limit:
        raise InputError(
            f"{source}: {size / 1024 / 1024:.1f} MB is above the input limit of {limit / 1024 / 1024:g} MB — "
            "split the file, or raise JUDGELAB_MAX_INPUT_MB"
        )


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is accepted); a binary or otherwise undecodable file is an InputError."""
    if b"\x00" in data[:65536]:
        raise InputError(f"{source}: a binary file, not UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def read_text(path: str | Path) -> str:
    """The text of a user file, checked: it exists, is a regular file, is within the limit, is UTF-8."""
    path = Path(path)
    source = str(path)
    try:
        if path.is_dir():
            raise InputError(f"{source}: is a directory, not a file")
        if not path.exists():
            raise InputError(f"{source}: file not found")
        if not path.is_file():
            raise InputError(f"{source}: not a regular file")
        check_size(source, path.stat().st_size)
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    return decode(data, source)


def read_upload(name: str, data: bytes) -> str:
    """The text of a file uploaded on a page, under the same rules as a file given to the CLI."""
    check_size(name, len(data))
    return decode(data, name)
