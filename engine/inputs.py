"""User files (workloads, labels, scripts, cases, recordings, experiments, uploads): read under one size
limit, as UTF-8 text, with an error naming the file for anything else — missing, a directory, a FIFO or a
device, binary, too large. The reading itself is `models.files` (regular files only, checked on the open
descriptor, the size checked before a byte is read, never blocking); this module adds the limit from the
settings.

The limit is `JUDGELAB_MAX_INPUT_MB` (default 10 MB). Line-based files (scripts, workloads, recordings,
labels, cases) are parsed a line at a time into compact rows; docs/bad-input.md ("Input files") gives the measured peak
memory per MB of each kind, all well under 1 GB for a 10 MB file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from engine.config import max_input_bytes as max_input_bytes
from engine.runctx import checkpoint
from models import files
from models.files import InputError as InputError
from models.files import MissingFile as MissingFile
from models.files import decode as decode

MAX_PROBLEMS_SHOWN = 20
_Record = TypeVar("_Record", bound=BaseModel)
CHECK_EVERY = 4096  # lines between two cancellation checks while a file is parsed


class Problems(list[str]):
    """The problems of a file, one a bad row: the first `KEEP` are kept, the rest only counted (`total`), so
    a file of a million bad rows costs a few kilobytes of messages, not a million of them."""

    KEEP = 200

    def __init__(self, problems: list[str] | None = None) -> None:
        super().__init__()
        self.total = 0
        for problem in problems or ():
            self.append(problem)

    def append(self, problem: str) -> None:
        self.total += 1
        if len(self) < self.KEEP:
            super().append(problem)


def shown_problems(problems: list[str]) -> list[str]:
    """The first `MAX_PROBLEMS_SHOWN` problems, then "… and N more" when there are more: what a page or the
    CLI shows of a bad file (never the whole list)."""
    total = getattr(problems, "total", len(problems))
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = total - len(shown)
    return shown + ([f"… and {more:,} more"] if more else [])


def problem_lines(problems: list[str], header: str | None = None) -> str:
    """The first problems of a bad file, one a line, and how many more there are; `header` goes first."""
    return "\n".join(([header] if header else []) + shown_problems(problems))


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text, one at a time (no list of every line), and a cancellation check every
    `CHECK_EVERY` lines: a page's Cancel or a stopped run ends a long parse at once. A line ends at \\n
    (a \\r before it is dropped)."""
    start, number, end_of_text = 0, 0, len(text)
    while start < end_of_text:
        end = text.find("\n", start)
        if end < 0:
            end = end_of_text
        number += 1
        if number % CHECK_EVERY == 0:
            checkpoint()
        line = text[start:end]
        yield number, line[:-1] if line.endswith("\r") else line
        start = end + 1


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


class LineError(ValueError):
    """A line of a labelled file that is not one JSON object; the message says why, without the line's text."""


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise LineError(f"the key {json.dumps(key, ensure_ascii=False)[:60]} is given twice")
        out[key] = value
    return out


def json_object(line: str) -> dict[str, object]:
    """One line of a JSONL file as a JSON object: LineError for text that is not JSON, an object nested too deeply
    to read, a number too long to read, a key given twice (which value would be the label?), or not an object."""
    try:
        value = json.loads(line, object_pairs_hook=_no_repeats)
    except LineError:
        raise
    except json.JSONDecodeError as exc:
        raise LineError(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise LineError("not JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise LineError(f"not JSON ({str(exc).split(';')[0][:80]})") from None
    if not isinstance(value, dict):
        raise LineError("not a JSON object")
    return value


def labelled_records(text: str, model: type[_Record]) -> tuple[list[_Record], Problems]:
    """Every non-blank line of a labelled JSONL file as `model` (a pydantic model with an `id`): the records read
    and the problems of the others, one a line, each naming its line (not JSON, a bad field, an id repeated)."""
    out: list[_Record] = []
    problems = Problems()
    seen: set[str] = set()
    for number, raw in iter_lines(text):
        if not raw.strip():
            continue
        try:
            record = model.model_validate(json_object(raw))
        except LineError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        except ValidationError as exc:
            why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors()[:3])
            problems.append(f"line {number}: {why}")
            continue
        key = str(getattr(record, "id", ""))
        if key in seen:
            problems.append(f"line {number}: id {json.dumps(key, ensure_ascii=False)} repeats an earlier line")
        seen.add(key)
        out.append(record)
    return out, problems


def first_problems(source: str, problems: Problems, shown: int = 10) -> str:
    """`source: the first problems; …` and how many more there are."""
    more = f" (and {problems.total - shown} more)" if problems.total > shown else ""
    return f"{source}: " + "; ".join(problems[:shown]) + more
