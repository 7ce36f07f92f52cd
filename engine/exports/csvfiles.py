"""CSV of a run's tables: the one CSV writer (`csv_rows`), whose cells a spreadsheet cannot run as formulas."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engine.exports.record import ExportError, RunRecord, Table
from engine.exports.tables import tables
from engine.formulas import is_formula
from models.secrets import redact

EXPORT_FORMAT = "judgelab.run/1"


def csv_cell(value: object) -> str | int | float:
    """A value as a spreadsheet may safely read it: numbers stay numbers; text is redacted and, where it
    would start a formula, gets a leading apostrophe; nested values become JSON text; None is empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, datetime):
        text = value.isoformat()
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    text = redact(text)
    return "'" + text if is_formula(text) else text


def csv_rows(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """The one CSV writer (runs and experiments): a header line of the columns, then each row's values by
    `csv_cell`, RFC 4180 quoting, CRLF line ends."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([csv_cell(c) for c in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return out.getvalue()


def csv_text(table: Table) -> str:
    """The table as CSV (RFC 4180 quoting, a header line of its columns)."""
    return csv_rows(table.columns, table.rows)


def csv_bytes(table: Table) -> bytes:
    """UTF-8 with a byte order mark, so a spreadsheet reads non-ASCII text (Japanese lines) right."""
    return csv_text(table).encode("utf-8-sig")


def csv_zip(record: RunRecord) -> bytes:
    """Every table of the run as `<table>.csv` in one zip file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, table in tables(record).items():
            archive.writestr(f"{name}.csv", csv_bytes(table))
    return buffer.getvalue()


def table_csv(record: RunRecord, name: str) -> bytes:
    found = tables(record)
    if name not in found:
        raise ExportError(f"run {record.run.id} has no table {name!r} — it has: {', '.join(found)}")
    return csv_bytes(found[name])
