"""Labels to and from files: JSONL (one label a line, lossless) and CSV (one label a row; the context as JSON
text). An import checks every row first and writes all of them in one transaction, or none: a bad row is
reported by its line and field. Labels are untrusted text: a cell that a spreadsheet could read as a formula
is written with a leading apostrophe (as is one that starts with an apostrophe, so reading it back is exact)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from engine.exports import is_formula
from engine.inputs import Problems, iter_lines, problem_lines, read_text
from engine.labelstore import Label, LabelError, check_label
from engine.store import LabelRow, Store, aware

Format = Literal["jsonl", "csv"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv")
COLUMNS = ("mechanism", "run_id", "item_key", "label", "note", "user", "source", "created_at", "context")


class LabelImportError(ValueError):
    """A file whose rows cannot all be imported; the message lists the bad lines. Nothing was written."""


@dataclass
class ImportReport:
    imported: int = 0
    already_present: int = 0
    lines: int = 0
    problems: list[str] = field(default_factory=list)


def format_of(path: Path, given: str | None = None) -> Format:
    fmt = (given or path.suffix.lstrip(".") or "jsonl").lower()
    if fmt not in FORMATS:
        raise LabelError(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def export_jsonl(labels: Sequence[Label]) -> str:
    return "".join(json.dumps(lab.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for lab in labels)


def _cell(value: object) -> str:
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "'" + text if is_formula(text) or text.startswith("'") else text


def _uncell(text: str) -> str:
    return text[1:] if text.startswith("'") else text


def export_csv(labels: Sequence[Label]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for lab in labels:
        row = lab.to_json()
        writer.writerow([_cell(row[c]) for c in COLUMNS])
    return out.getvalue()


def export_labels(labels: Sequence[Label], fmt: Format) -> str:
    return export_jsonl(labels) if fmt == "jsonl" else export_csv(labels)


def _when(value: object) -> datetime:
    if value in (None, ""):
        return datetime.now(UTC)
    if not isinstance(value, str):
        raise LabelError(f"created_at: must be an ISO date-time text, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise LabelError(f"created_at: {value[:40]!r} is not an ISO date-time") from None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _row(record: dict[str, Any]) -> LabelRow:
    unknown = sorted(set(record) - set(COLUMNS))
    if unknown:
        raise LabelError(f"{unknown[0]}: not a label field ({', '.join(COLUMNS)})")
    row = check_label(
        mechanism=record.get("mechanism"),
        item_key=record.get("item_key"),
        label=record.get("label"),
        run_id=record.get("run_id"),
        note=record.get("note", ""),
        source=record.get("source") or "import",
        user=record.get("user"),
        context=record.get("context") or {},
    )
    row.created_at = _when(record.get("created_at"))
    return row


def _jsonl_rows(text: str, source: str, problems: Problems) -> list[LabelRow]:
    rows = []
    for number, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: not JSON: {exc.msg}")
            continue
        if not isinstance(record, dict):
            problems.append(f"{source}:{number}: expected an object")
            continue
        try:
            rows.append(_row(record))
        except LabelError as exc:
            problems.append(f"{source}:{number}: {exc}")
    return rows


def _csv_rows(text: str, source: str, problems: Problems) -> list[LabelRow]:
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        problems.append(f"{source}:1: no header line ({', '.join(COLUMNS)})")
        return []
    missing = [c for c in ("mechanism", "item_key", "label") if c not in header]
    if missing:
        problems.append(f"{source}:1: the header has no {', '.join(missing)} column")
        return []
    rows = []
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(f"{source}:{reader.line_num}: not CSV: {exc}")
            break
        number = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problems.append(f"{source}:{number}: {len(cells)} cells for {len(header)} columns")
            continue
        record: dict[str, Any] = {h: _uncell(c) for h, c in zip(header, cells, strict=True)}
        context = record.get("context")
        if context:
            try:
                record["context"] = json.loads(context)
            except json.JSONDecodeError as exc:
                problems.append(f"{source}:{number}: context: not JSON: {exc.msg}")
                continue
        record["run_id"] = record.get("run_id") or None
        try:
            rows.append(_row(record))
        except LabelError as exc:
            problems.append(f"{source}:{number}: {exc}")
    return rows


def parse_labels(text: str, fmt: Format, source: str = "labels") -> list[LabelRow]:
    """Every row of a labels file, checked; LabelImportError listing the bad lines (first 20, then a count)."""
    problems = Problems()
    rows = _jsonl_rows(text, source, problems) if fmt == "jsonl" else _csv_rows(text, source, problems)
    if problems:
        raise LabelImportError(problem_lines(problems, f"{source}: {problems.total} bad row(s); nothing was imported"))
    return rows


def _identity(row: LabelRow) -> tuple[object, ...]:
    return (row.mechanism, row.run_id, row.item_key, row.user_name, row.label, aware(row.created_at).isoformat())


def import_labels(store: Store, path: Path, fmt: Format | None = None) -> ImportReport:
    """Import a JSONL or CSV labels file: every row checked first, then all written in one transaction (a label
    already stored — same item, user, value and time — is not written twice)."""
    fmt = format_of(path, fmt)
    rows = parse_labels(read_text(path), fmt, str(path))
    return _store_rows(store, rows)


def import_text(store: Store, text: str, fmt: Format, source: str = "upload") -> ImportReport:
    return _store_rows(store, parse_labels(text, fmt, source))


def _store_rows(store: Store, rows: list[LabelRow]) -> ImportReport:
    present = {_identity(r) for r in store.labels()}
    fresh, seen = [], set(present)
    for row in rows:
        key = _identity(row)
        if key in seen:
            continue
        seen.add(key)
        fresh.append(row)
    if fresh:
        store.add_labels(fresh)
    return ImportReport(imported=len(fresh), already_present=len(rows) - len(fresh), lines=len(rows))
