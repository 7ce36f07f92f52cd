"""A self-contained HTML report of a run: escaped text, figure specs in non-executed JSON, a CSP that forbids
any request, plotly.js inlined once."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.exports.record import RunRecord
from engine.exports.tables import _calls, _events, tables
from engine.history import cell, headline
from models.secrets import redact, redact_obj

HTML_TABLE_ROWS = 300  # rows of a table shown in the report (the CSV has every one)


HTML_CELL_CHARS = 400


HTML_PAYLOAD_CHARS = 2000


@dataclass(frozen=True)
class Figure:
    """A chart for the report: its title and its Plotly JSON (`fig.to_json()`: data and layout)."""

    title: str
    spec: str


CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)


STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;
color:#1f2a24}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3df}
.meta{color:#5b6b63}.tag{background:#e6f0eb;border-radius:4px;padding:0 .4rem;margin-right:.3rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0;width:100%}
table{display:block;overflow-x:auto;max-width:100%}/* a wide table scrolls inside the page: the page fits the window */
th,td{border:1px solid #dde3df;padding:.25rem .4rem;text-align:left;vertical-align:top}
th{background:#f3f6f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:.8rem}
.figure{min-height:340px;margin:1rem 0}.note{color:#5b6b63;font-size:.85rem}
.status-failed,.status-interrupted,.status-cancelled{color:#b3261e}.status-finished{color:#1b6e5a}
"""


RENDER = """
document.querySelectorAll('div.figure[data-spec]').forEach(function (el) {
  var spec = JSON.parse(document.getElementById(el.getAttribute('data-spec')).textContent);
  Plotly.newPlot(el, spec.data || [], spec.layout || {}, {responsive: true, displaylogo: false});
});
"""


def _e(value: object) -> str:
    return html.escape(redact(value if isinstance(value, str) else cell(value, 10**9)), quote=True)


def _script_json(text: str) -> str:
    """JSON text that cannot end the <script> element it sits in (and stays the same JSON)."""
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _td(value: object, limit: int = HTML_CELL_CHARS) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num">{_e(value)}</td>'
    text = "" if value is None else cell(redact_obj(value), limit)
    return f"<td>{_e(text)}</td>"


def _html_table(columns: Sequence[str], rows: Iterable[Mapping[str, Any]], limit: int = HTML_CELL_CHARS) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_td(r.get(c), limit) for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _money(value: Any) -> str:
    if not value:
        return "$0"
    return f"${value:.4g}" if value >= 0.0001 else f"${value:.2e}"


def figures_html(figures: Sequence[Figure]) -> str:
    """The figures as placeholders with their specs beside them (RENDER draws them once plotly.js is in)."""
    if not figures:
        return '<p class="note">No chart for this kind of run.</p>'
    parts = []
    for i, figure in enumerate(figures):
        parts.append(
            f'<div class="figure" id="figure-{i}" data-spec="spec-{i}" role="img" '
            f'aria-label="{_e(figure.title)}"></div>'
            f'<script type="application/json" id="spec-{i}">{_script_json(redact(figure.spec))}</script>'
        )
    return "".join(parts)


def _timeline_html(record: RunRecord) -> str:
    rows = []
    for row in _events(record):
        payload = json.dumps(redact_obj(json.loads(row["payload"] or "{}")), ensure_ascii=False, indent=1)
        if len(payload) > HTML_PAYLOAD_CHARS:
            payload = payload[:HTML_PAYLOAD_CHARS] + f"… ({len(payload)} characters in all: the JSON export has it)"
        rows.append(
            f'<tr><td class="num">{row["seq"]}</td><td class="num">{_e(row["offset_s"])}</td>'
            f"<td>{_e(row['type'])}</td><td><pre>{_e(payload)}</pre></td></tr>"
        )
    return (
        "<table><thead><tr><th>seq</th><th>+s</th><th>type</th><th>payload</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def html_report(record: RunRecord, figures: Sequence[Figure] = (), plotly_js: str = "") -> str:
    """One HTML file that needs nothing else: config, headline figures, the charts (interactive, with
    plotly.js inlined once), the run's tables and its event timeline."""
    run = record.run
    numbers = headline(run, record.totals)
    head_rows = "".join(
        f"<tr><th>{_e(name)}</th>"
        + (f"<td>{_e(_money(value))}</td>" if name in ("cost", "would_cost") else _td(value))
        + "</tr>"
        for name, value in numbers.items()
    )
    shown = {n: t for n, t in tables(record).items() if n not in ("headline", "events", "calls") and t.rows}
    table_parts = []
    for name, table in shown.items():
        more = len(table.rows) - HTML_TABLE_ROWS
        table_parts.append(
            f'<h3>{_e(name)}</h3><p class="note">{_e(table.description)}'
            + (f" — the first {HTML_TABLE_ROWS} of {len(table.rows)} rows (the CSV has all)" if more > 0 else "")
            + "</p>"
            + _html_table(table.columns, table.rows[:HTML_TABLE_ROWS])
        )
    call_columns = [
        "call_id",
        "created_at",
        "purpose",
        "model_id",
        "prompt_tokens",
        "completion_tokens",
        "latency_s",
        "cost",
        "would_cost",
        "error_type",
        "error",
        "flags",
    ]
    calls = _calls(record)
    script = f"<script>{plotly_js}</script>" if plotly_js and figures else ""
    tags = "".join(f'<span class="tag">{_e(t)}</span>' for t in record.tags)
    body = f"""
<h1>{_e(run.kind)} · {_e(run.id)}</h1>
<p class="meta">{_e(run.name)}</p>
<p class="meta">status <b class="status-{_e(run.status)}">{_e(run.status)}</b> ·
started {_e(run.started_at.isoformat())}
{"" if run.finished_at is None else " · finished " + _e(run.finished_at.isoformat())} · config hash
<code>{_e(run.config_hash)}</code> {tags}</p>
{"" if not run.error else f'<p class="status-failed"><b>error</b>: {_e(run.error)}</p>'}
<h2>Headline figures</h2><table><tbody>{head_rows}</tbody></table>
<h2>Charts</h2>{figures_html(figures)}
{"<h2>Tables</h2>" + "".join(table_parts) if table_parts else ""}
<h2>Event timeline ({len(record.events)} events)</h2>{_timeline_html(record)}
<h2>LLM calls ({len(calls)})</h2>{_html_table(call_columns, calls)}
<h2>Config</h2><pre>{_e(json.dumps(redact_obj(run.config), ensure_ascii=False, indent=2))}</pre>
<h2>Summary</h2><pre>{_e(json.dumps(redact_obj(run.summary), ensure_ascii=False, indent=2))}</pre>
<p class="note">Exported by judgelab on {_e(datetime.now(UTC).isoformat(timespec="seconds"))} from the stored run
only. This file is self-contained: it opens offline and loads nothing.</p>
"""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="referrer" content="no-referrer">
<title>{_e(run.kind)} · {_e(run.id)} — judgelab report</title>
<style>{STYLE}</style>{script}</head>
<body>{body}<script>{RENDER if script else ""}</script></body></html>
"""
    return page
