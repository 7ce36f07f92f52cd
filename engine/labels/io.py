"""Labels to and from files: JSONL (one label a line, lossless) and CSV (one label a row; the context as JSON
text). Labels are untrusted text: a cell that a spreadsheet could read as a formula is written with a leading
apostrophe (as is one that starts with an apostrophe, so reading it back is exact).

An import checks every row first and writes all of them in one transaction, or none: a bad row is one line
naming the file, the line and the field (the first 20 are shown, then how many more). Each line or context
cell goes through the one checked JSON reader (`models.safe_json`: at most `MAX_LINE_BYTES` a line, 64 levels
of nesting, no key twice); a time must lie between 1970 and 9998 (UTC). Each label is stored once (its unique
key, `engine.store.labels`): importing a file again, or twice at once, adds only what is not there yet, and the
report says "N imported, M already present". `run_import` is the import as a stored run (kind
`labels.import`, the Labels page and `judgelab labels import` alike): progress in rows, and a cancel before the
commit writes nothing."""

from __future__ import annotations

import asyncio
import contextvars
import csv
import io
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from engine import runctx
from engine.events import async_run_context
from engine.formulas import is_formula
from engine.inputs import Problems, iter_lines, problem_lines, read_text, shown_problems
from engine.labelstore import Label, LabelChecker, LabelError
from engine.store import NewLabel, Store
from models import safe_json

Format = Literal["jsonl", "csv"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv")
COLUMNS = ("mechanism", "run_id", "item_key", "label", "note", "user", "source", "created_at", "context")
KIND = "labels.import"
MAX_LINE_BYTES = 256_000  # a label's context is at most 64 kB stored; the rest of a row is a few kB
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)  # exclusive: a day's margin for any arithmetic on the time
PROGRESS_EVERY = 1000  # rows between two progress reports (and cancel checks) while a file is checked
_COLUMN_SET = frozenset(COLUMNS)
T = TypeVar("T")


class LabelImportError(ValueError):
    """A file whose rows cannot all be imported; the message lists the bad lines (the first 20, then how many
    more). Nothing was written."""

    def __init__(self, source: str, problems: Problems) -> None:
        self.source = source
        self.bad_rows = problems.total
        self.header = f"{source}: {problems.total} bad row(s); nothing was imported"
        self.problems = shown_problems(problems)
        super().__init__(problem_lines(problems, self.header))

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "bad_rows": self.bad_rows, "problems": self.problems}


class LabelImportFailed(ValueError):
    """What a refused file's run stores as its error: the one line that heads the bad rows ("marks.jsonl: 40 bad
    row(s); nothing was imported"), so the Runs page shows one line; the rows are in the run's result."""


@dataclass
class ImportReport:
    imported: int = 0
    already_present: int = 0
    lines: int = 0  # the file's label rows
    problems: list[str] = field(default_factory=list)
    run_id: str | None = None  # the `labels.import` run, when the import ran as one

    def to_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "already_present": self.already_present, "rows": self.lines}

    def words(self) -> str:
        """'5 imported, 2 already present' — what the CLI and the page say."""
        return f"{self.imported} imported, {self.already_present} already present"


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


def _when(value: object) -> datetime | None:
    """The row's time in UTC; None when it gives none (it is stamped with the time of the import)."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise LabelError(f"created_at: must be an ISO date-time text, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise LabelError(f"created_at: {value[:40]!r} is not an ISO date-time") from None
    try:
        moment = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00: before year 1 in UTC
        moment = None
    if moment is None or not EARLIEST <= moment < LATEST:
        raise LabelError(f"created_at: {value[:40]!r} is outside the years 1970 to 9998 (UTC)")
    return moment


def _given(value: object, default: object) -> object:
    """A field's value, or `default` when the row leaves it out (absent, null, an empty cell); any other value
    is checked as given (a context `[]` or a source `false` is refused, not taken for the default)."""
    return default if value is None or value == "" else value


def _row(checker: LabelChecker, record: dict[str, Any]) -> NewLabel:
    if not record.keys() <= _COLUMN_SET:
        unknown = sorted(set(record) - _COLUMN_SET)
        raise LabelError(f"{unknown[0][:60]}: not a label field ({', '.join(COLUMNS)})")
    return checker.check(
        mechanism=record.get("mechanism"),
        item_key=record.get("item_key"),
        label=record.get("label"),
        run_id=record.get("run_id"),
        note=record.get("note", ""),
        source=_given(record.get("source"), "import"),
        user=record.get("user"),
        context=_given(record.get("context"), {}),
        created_at=_when(record.get("created_at")),
    )


Step = Callable[[int], None]


def _jsonl_rows(text: str, source: str, problems: Problems, step: Step) -> list[NewLabel]:
    checker, rows = LabelChecker(), []
    for number, line in iter_lines(text):
        if number % PROGRESS_EVERY == 0:
            step(number)
        if not line or line.isspace():
            continue
        try:
            record = safe_json.loads(line, max_bytes=MAX_LINE_BYTES)
        except safe_json.JSONInputError as exc:
            problems.append(f"{source}:{number}: {exc}")
            continue
        if not isinstance(record, dict):
            problems.append(f"{source}:{number}: expected an object")
            continue
        try:
            rows.append(_row(checker, record))
        except LabelError as exc:
            problems.append(f"{source}:{number}: {exc}")
    return rows


def _header_problem(header: list[str]) -> str:
    """What is wrong with a CSV header ("" when nothing): a required column missing, a column that is not a label
    field, or one named twice (its cells would silently overwrite the first's)."""
    missing = [c for c in ("mechanism", "item_key", "label") if c not in header]
    if missing:
        return f"the header has no {', '.join(missing)} column"
    unknown = [h for h in header if h not in _COLUMN_SET]
    if unknown:
        return f"{unknown[0][:60]!r} is not a label field ({', '.join(COLUMNS)})"
    twice = next((h for i, h in enumerate(header) if h in header[:i]), None)
    return f"the header names {twice!r} twice" if twice else ""


def _csv_rows(text: str, source: str, problems: Problems, step: Step) -> list[NewLabel]:
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        problems.append(f"{source}:1: no header line ({', '.join(COLUMNS)})")
        return []
    problem = _header_problem(header)
    if problem:
        problems.append(f"{source}:1: {problem}")
        return []
    checker, rows, count = LabelChecker(), [], 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(f"{source}:{reader.line_num}: not CSV: {exc}")
            break
        number, count = reader.line_num, count + 1
        if count % PROGRESS_EVERY == 0:
            step(number)
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problems.append(f"{source}:{number}: {len(cells)} cells for {len(header)} columns")
            continue
        record: dict[str, Any] = {h: _uncell(c) for h, c in zip(header, cells, strict=True)}
        context = record.get("context")
        if context:
            try:
                record["context"] = safe_json.loads(context, max_bytes=MAX_LINE_BYTES)
            except safe_json.JSONInputError as exc:
                problems.append(f"{source}:{number}: context: {exc}")
                continue
        record["run_id"] = record.get("run_id") or None
        try:
            rows.append(_row(checker, record))
        except LabelError as exc:
            problems.append(f"{source}:{number}: {exc}")
    return rows


def _lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _no_step(_done: int) -> None:
    runctx.checkpoint()


def parse_labels(text: str, fmt: Format, source: str = "labels", step: Step = _no_step) -> list[NewLabel]:
    """Every row of a labels file, checked; LabelImportError listing the bad lines (first 20, then a count).
    `step(line)` is called every PROGRESS_EVERY rows (progress, and a cancel check)."""
    problems = Problems()
    rows = (_jsonl_rows if fmt == "jsonl" else _csv_rows)(text, source, problems, step)
    if problems:
        raise LabelImportError(source, problems)
    return rows


def import_labels(store: Store, path: Path, fmt: Format | None = None) -> ImportReport:
    """Import a JSONL or CSV labels file: every row checked first, then all written in one transaction (a label
    already stored — its key: same item, user, value, source and time, or the same content for a row without a
    time — is not written twice)."""
    fmt = format_of(path, fmt)
    return import_text(store, read_text(path), fmt, str(path))


def import_text(
    store: Store, text: str, fmt: Format, source: str = "upload", stop: threading.Event | None = None
) -> ImportReport:
    """Import the text of a labels file (see `import_labels`). Progress in rows goes to the current run, if any;
    its cancel (or `stop`) ends the import before the commit, with nothing written."""
    total = _lines(text)

    def check() -> None:
        if stop is not None and stop.is_set():
            raise runctx.RunCancelled("the import was stopped")
        runctx.checkpoint()

    reported = [0]

    def step(done: int) -> None:  # advance (not done=): the ETA is paced by the rows checked
        check()
        runctx.progress(advance=done - reported[0], total=total, step="checking rows")
        reported[0] = done

    rows = parse_labels(text, fmt, source, step)
    runctx.progress(advance=total - reported[0], total=total, step=f"writing {len(rows):,} labels")
    imported = store.insert_labels(rows, check=check) if rows else 0  # no progress inside: it would write
    return ImportReport(imported=imported, already_present=len(rows) - imported, lines=len(rows))


async def run_import(store: Store, text: str, fmt: Format, source: str) -> ImportReport:
    """The import as a stored run of kind `labels.import` (the page and the CLI): its result is the report, or
    the bad rows (then it fails, with nothing written). The work runs off the event loop; a cancel stops it at
    its next check, before the commit."""
    config = {"source": source, "format": fmt, "characters": len(text)}
    refused: LabelImportError | None = None
    try:
        async with async_run_context(store, KIND, config, name=source) as run:
            try:
                report = await _off_the_loop(lambda stop: import_text(store, text, fmt, source, stop))
            except LabelImportError as exc:
                run.summary = {"imported": 0, "bad_rows": exc.bad_rows, "result": exc.to_json()}
                refused = exc
                raise LabelImportFailed(exc.header) from None
            report.run_id = run.run_id
            run.summary = report.to_json() | {"result": report.to_json()}
    except LabelImportFailed:
        assert refused is not None
        raise refused from None  # the caller gets every bad line (the CLI prints them)
    return report


async def _off_the_loop(work: Callable[[threading.Event], T]) -> T:
    """`work(stop)` in a thread (the loop serves other runs meanwhile), in this task's context (the run's
    progress and cancel switch). When this task is cancelled (Ctrl-C cancels every task of the loop; a run's hard
    cancel) `stop` is set and the work is waited for: it ends at its next check, so a run stored as cancelled has
    written nothing — unless the work had already committed, which is then its result. The thread's future is a
    plain future, not a task: cancelling the loop's tasks cannot leave it running unseen."""
    stop = threading.Event()
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(None, context.run, work, stop)
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError as exc:
            stop.set()
            cancelled = exc
    if cancelled is not None and future.exception() is not None:
        raise cancelled
    return future.result()
