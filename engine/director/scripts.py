"""Scripts, the batch's input: utterances from JSONL ({"text", "id"?, "character"?} a line) or CSV (a `text`
column), parsed a row at a time into compact `ScriptLine`s; a bad row is a `ScriptError` naming its line, and
nothing is imported."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as compact_row

from engine import runctx
from engine.inputs import CHECK_EVERY, InputError, Problems, iter_lines, problem_lines, read_text


@compact_row(frozen=True, slots=True, config=ConfigDict(extra="ignore"))
class ScriptLine:
    """One utterance of a script: a slotted row of three fields (about 64 bytes beside its text, where a
    model instance takes about 490), so a 10 MB script of short lines stays in tens of megabytes."""

    id: str
    text: str = Field(min_length=1)
    character: str | None = None


class ScriptError(ValueError):
    """A script with bad rows; `problems` names each by line. Nothing is imported."""

    def __init__(self, problems: list[str], header: str | None = "bad rows, nothing imported:") -> None:

        self.problems = problems
        super().__init__(problem_lines(problems, header))  # header None: the whole file is unusable


def parse_script(content: str, kind: Literal["jsonl", "csv"], source: str = "script") -> list[ScriptLine]:
    """Utterances from JSONL ({"text", "id"?, "character"?} a line) or CSV (a `text` column), parsed a row at
    a time into compact `ScriptLine`s (no list of every parsed row; after the first bad row only the problems
    are collected, and only the first of them kept)."""

    problems = Problems()
    lines: list[ScriptLine] = []
    for number, row in _script_rows(content, kind, source, problems):
        if not isinstance(row, dict):
            problems.append(f"{source}:{number}: expected an object with 'text'")
            continue
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{source}:{number}: 'text' is missing or empty")
            continue
        character = row.get("character") or None
        if character is not None and not isinstance(character, str):
            problems.append(f"{source}:{number}: 'character' must be text")
            continue
        if not problems:
            lines.append(ScriptLine(id=str(row.get("id") or f"line-{number}"), text=text, character=character))
    if problems:
        raise ScriptError(problems)
    if not lines:
        raise ScriptError([f"{source}: no utterances"])
    return lines


def _script_rows(
    content: str, kind: Literal["jsonl", "csv"], source: str, problems: list[str]
) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) one at a time; a line that is not JSON goes to `problems`."""

    if kind == "jsonl":
        for number, line in iter_lines(content):  # checks for cancellation as it goes
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{source}:{number}: not JSON ({exc.msg})")
        return
    reader = csv.DictReader(io.StringIO(content))
    if not reader.fieldnames or "text" not in reader.fieldnames:
        raise ScriptError([f"{source}:1: a CSV script needs a 'text' column"])
    for number, row in enumerate(reader, 2):
        if number % CHECK_EVERY == 0:
            runctx.checkpoint()
        yield number, {k: v for k, v in row.items() if k is not None}


def load_script(path: Path) -> list[ScriptLine]:

    suffix = path.suffix.lower()
    if path.is_file() and suffix not in (".jsonl", ".csv"):
        raise ScriptError([f"{path}: expected a .jsonl or .csv file"])
    try:
        content = read_text(path)
    except InputError as exc:
        raise ScriptError([str(exc)], header=None) from None
    return parse_script(content, "jsonl" if suffix == ".jsonl" else "csv", str(path))
