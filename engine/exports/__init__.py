"""Exports of one stored run: CSV of its tables, JSON of the whole run, a self-contained HTML report.

Everything comes from the stored run only (its row, events and calls), so an export says what the store
says. What leaves here is untrusted text made safe for where it goes, and free of keys:
- every value passes key redaction by value (`models.secrets.redact_obj`), then the whole output `redact`
  once more, so a key that reached the store before it was known (set later in the environment, say)
  still never leaves;
- a CSV cell that a spreadsheet would run as a formula gets a leading apostrophe (OWASP's CSV-injection
  advice): one that starts with = + - @ (or a full-width or small form of them, ＝ ＋ － ＠ ﹦ …), also after
  any leading whitespace, control or invisible character (no-break space, U+3000, zero-width space, BOM),
  and one that starts with a tab or a carriage return. `csv_rows` is the one CSV writer: run tables here,
  experiment tables (`engine.experiments.report`) through it too;
- in HTML every text is escaped; figure specs sit in non-executed JSON script elements with `<`, `>` and
  `&` escaped; a Content-Security-Policy forbids any network request, so even an injected element
  could load nothing.

The figures of the HTML report are built by the dashboard (`dashboard/report.py`, from the page's chart
builders) and handed in as Plotly JSON with the plotly.js source, which is inlined once: no Plotly import
here, and the file opens offline.

The package: `record` (a stored run, a table), `tables` (which tables a run has), `csvfiles`, `document` (JSON)
and `html`; each mechanism's own tables are in its package (`engine/<mechanism>/exports.py`).
"""

from __future__ import annotations

from engine.exports.csvfiles import (
    EXPORT_FORMAT,
    csv_bytes,
    csv_cell,
    csv_rows,
    csv_text,
    csv_zip,
    table_csv,
)
from engine.exports.document import (
    run_document,
    run_json,
)
from engine.exports.html import (
    CSP,
    HTML_CELL_CHARS,
    HTML_PAYLOAD_CHARS,
    HTML_TABLE_ROWS,
    RENDER,
    STYLE,
    Figure,
    figures_html,
    html_report,
)
from engine.exports.record import (
    RUN_EVENTS,
    ExportError,
    RunRecord,
    Table,
    TableBuilder,
    flat,
    load_run,
)
from engine.exports.tables import (
    CALL_COLUMNS,
    COMMON_TABLES,
    EVENT_COLUMNS,
    table_builders,
    tables,
)
from engine.formulas import FORMULA_CHARS, FORMULA_LEAD, SKIPPED_CATEGORIES, is_formula

__all__ = [
    "CALL_COLUMNS",
    "COMMON_TABLES",
    "CSP",
    "EVENT_COLUMNS",
    "EXPORT_FORMAT",
    "ExportError",
    "FORMULA_CHARS",
    "FORMULA_LEAD",
    "Figure",
    "HTML_CELL_CHARS",
    "HTML_PAYLOAD_CHARS",
    "HTML_TABLE_ROWS",
    "RENDER",
    "RUN_EVENTS",
    "RunRecord",
    "SKIPPED_CATEGORIES",
    "STYLE",
    "Table",
    "TableBuilder",
    "csv_bytes",
    "csv_cell",
    "csv_rows",
    "csv_text",
    "csv_zip",
    "figures_html",
    "flat",
    "html_report",
    "is_formula",
    "load_run",
    "run_document",
    "run_json",
    "table_builders",
    "table_csv",
    "tables",
]
