"""User files (workloads, labels, scripts, cases, recordings, experiments, uploads): read under one size
limit, as UTF-8 text, with an error naming the file for anything else — missing, a directory, a FIFO or a
device, binary, too large. The reading itself is `models.files` (regular files only, checked on the open
descriptor, the size checked before a byte is read, never blocking); this module adds the limit from the
settings.

The limit is `JUDGELAB_MAX_INPUT_MB` (default 10 MB). Line-based files (scripts, workloads, recordings,
labels, cases) are parsed a line at a time into compact rows; README ("Input files") gives the measured peak
memory per MB of each kind, all well under 1 GB for a 10 MB file.
"""

from __future__ import annotations

from pathlib import Path

from models import files
from models.files import InputError as InputError
from models.files import decode as decode

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
    files.check_size(source, size, max_input_bytes())


def read_text(path: str | Path) -> str:
    """The text of a user file, checked: a regular file (never a FIFO or device), within the limit, UTF-8."""
    return files.read_text(path, max_input_bytes())


def read_upload(name: str, data: bytes) -> str:
    """The text of a file uploaded on a page, under the same rules as a file given to the CLI."""
    check_size(name, len(data))
    return decode(data, name)
