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
"""

from __future__ import annotations

import csv
import html
import io
import json
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.handraise import restore_conversation, skip_line
from engine.history import cell, headline
from engine.jury import JuryView
from engine.mechanism import mechanisms, resolve_callable
from engine.store import EventRow, LlmCall, Run, Store
from models.secrets import redact, redact_obj

EXPORT_FORMAT = "judgelab.run/1"
# What a spreadsheet takes as the start of a formula (OWASP CSV injection); their full-width and small forms
# are caught by NFKC (＝ → =). A cell starting with a tab or a carriage return is neutralised whatever follows.
FORMULA_CHARS = frozenset("=+-@")
FORMULA_LEAD = ("\t", "\r")
# What a spreadsheet may skip before it reads a formula: any whitespace, controls, and the invisible format
# characters (zero-width space U+200B, word joiner U+2060, BOM U+FEFF, bidi marks …).
SKIPPED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
# Bookkeeping events: the timeline keeps them, no table is made of them.
RUN_EVENTS = frozenset({"run_started", "run_finished", "run_failed", "run_cancelled"})
HTML_TABLE_ROWS = 300  # rows of a table shown in the report (the CSV has every one)
HTML_CELL_CHARS = 400
HTML_PAYLOAD_CHARS = 2000


class ExportError(ValueError):
    """The run cannot be exported as asked (no such run, no such table); the message says which."""


@dataclass(frozen=True)
class RunRecord:
    """A stored run with everything recorded for it."""

    run: Run
    events: list[EventRow]
    calls: list[LlmCall]
    totals: dict[str, Any]
    tags: list[str]

    def pairs(self, *types: str) -> list[tuple[str, dict[str, Any]]]:
        """(type, payload) of its events, of the given types only when any are named."""
        return [(e.type, e.payload) for e in self.events if not types or e.type in types]


def load_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise ExportError(f"no run {run_id} — `judgelab runs list` shows the recorded ones")
    return RunRecord(
        run=run,
        events=store.events(run_id),
        calls=store.calls(run_id, limit=None),
        totals=dict(store.run_totals([run_id]).get(run_id, {})),
        tags=store.tags([run_id]).get(run_id, []),
    )


# -- tables ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    rows: list[dict[str, Any]]
    fixed: tuple[str, ...] = ()  # columns it has even without rows

    @property
    def columns(self) -> list[str]:
        """Its fixed columns, then every other key of its rows in the order they first appear."""
        return list(dict.fromkeys([*self.fixed, *(k for row in self.rows for k in row)]))


def _flat(payload: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """One row from an event payload: scalars as they are, a dict of scalars as dotted columns, anything
    deeper as its JSON text."""
    row: dict[str, Any] = {}
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and not prefix and all(not isinstance(v, Mapping | list) for v in value.values()):
            row.update(_flat(value, f"{name}."))
        else:
            row[name] = value
    return row


CALL_COLUMNS = (
    "call_id",
    "created_at",
    "purpose",
    "model_id",
    "backend",
    "model_name",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "cost",
    "would_cost",
    "finish_reason",
    "error_type",
    "error",
    "attempts",
    "flags",
    "request_hash",
    "prompt",
    "raw_text",
    "parsed",
)
EVENT_COLUMNS = ("seq", "ts", "offset_s", "type", "payload")


def _calls(record: RunRecord) -> list[dict[str, Any]]:
    rows = []
    for c in record.calls:
        request = json.loads(c.request_json or "{}")
        messages = request.get("messages") if isinstance(request, dict) else None
        prompt = (
            "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages if isinstance(m, dict))
            if isinstance(messages, list)
            else json.dumps(request, ensure_ascii=False)
        )
        rows.append(
            {
                "call_id": c.id,
                "created_at": c.created_at,
                "purpose": c.purpose,
                "model_id": c.model_id,
                "backend": c.backend,
                "model_name": c.model_name,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "latency_s": c.latency_s,
                "cost": c.cost,
                "would_cost": c.would_cost,
                "finish_reason": c.finish_reason,
                "error_type": c.error_type,
                "error": c.error,
                "attempts": c.attempts,
                "flags": ", ".join(map(str, json.loads(c.flags_json or "[]"))),
                "request_hash": c.request_hash,
                "prompt": prompt,
                "raw_text": c.raw_text,
                "parsed": c.parsed_json,
            }
        )
    return rows


def _events(record: RunRecord) -> list[dict[str, Any]]:
    start = record.events[0].ts if record.events else None
    return [
        {
            "seq": e.seq,
            "ts": e.ts,
            "offset_s": None if start is None else round((e.ts - start).total_seconds(), 3),
            "type": e.type,
            "payload": e.payload_json,
        }
        for e in record.events
    ]


def _headline(record: RunRecord) -> list[dict[str, Any]]:
    run = record.run
    return [
        {
            "run_id": run.id,
            "kind": run.kind,
            "name": run.name,
            "tags": ", ".join(record.tags),
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "config_hash": run.config_hash,
            "error": run.error,
            **headline(run, record.totals),
        }
    ]


def _jury_positions(record: RunRecord) -> list[dict[str, Any]]:
    """Each juror's position at phase 1 and after each round: verdict, score, whether it moved, and why (its
    text, and the machine detail behind it: a likelihood juror's features, map and what it heard; empty for a
    generating juror and in runs recorded before the field existed)."""

    view = JuryView.fold(record.pairs())
    models = {j.get("juror_id"): j.get("model_id") for j in view.jurors}
    consensus = view.phase1_consensus or {}
    # Seats identical by construction: their matching verdicts are one judgment, not a consensus reached
    after_phase1 = "identical by construction" if view.identical_seats else consensus.get("consensusStatus")
    rows = [
        {
            "round": 0,
            "stage": "phase 1",
            "juror": e.get("juror"),
            "role": view.role(e.get("juror", "")),
            "model_id": models.get(e.get("juror")),
            "verdict": e.get("verdict"),
            "score": e.get("score"),
            "confidence": e.get("confidence"),
            "previous_verdict": None,
            "previous_score": None,
            "position_changed": None,
            "fallback": e.get("fallback"),
            "fallback_reason": e.get("fallbackReason"),
            "consensus_after": after_phase1,
            "text": e.get("reasoning"),
            "detail": e.get("detail") or "",
            "flags": ", ".join(map(str, e.get("flags") or [])),
            "call_id": e.get("callId"),
        }
        for e in view.phase1
    ]
    for rnd in view.rounds:
        after = (rnd.get("completed") or {}).get("consensusStatus")
        for st in rnd["statements"]:
            ev = st.get("evaluation") or {}
            rows.append(
                {
                    "round": rnd["round"],
                    "stage": f"round {rnd['round']}",
                    "juror": st.get("juror"),
                    "role": view.role(st.get("juror", "")),
                    "model_id": models.get(st.get("juror")),
                    "verdict": st.get("newVerdict"),
                    "score": st.get("newScore"),
                    "confidence": ev.get("confidence"),
                    "previous_verdict": st.get("previousVerdict"),
                    "previous_score": st.get("previousScore"),
                    "position_changed": st.get("positionChanged"),
                    "fallback": ev.get("fallback"),
                    "fallback_reason": ev.get("fallbackReason"),
                    "consensus_after": after,
                    "text": st.get("statement"),
                    "detail": st.get("detail") or "",
                    "flags": ", ".join(map(str, ev.get("flags") or [])),
                    "call_id": ev.get("callId"),
                }
            )
    return rows


def _conversation(record: RunRecord) -> Any:

    if not record.pairs("user_message"):
        return None
    try:
        return restore_conversation(record.run.config, record.pairs())
    except ValueError:
        return None  # not a conversation's config: its events are still in the `events` table


def _conversation_hands(record: RunRecord) -> list[dict[str, Any]]:
    """One row per hand per answered turn: the page's telemetry."""
    conv = _conversation(record)
    return [] if conv is None else list(conv.telemetry)


def _conversation_messages(record: RunRecord) -> list[dict[str, Any]]:
    """The chat: each user message, then each answer or skip line of its turn."""
    conv = _conversation(record)
    if conv is None:
        return []

    rows: list[dict[str, Any]] = []
    for state in conv.states:
        rows.append({"turn": state.turn_id, "speaker": "user", "kind": "message", "text": state.text})
        for h in state.hands:
            r = state.resolved.get(h.model)
            if r is not None and r.approved:
                rows.append(
                    {
                        "turn": state.turn_id,
                        "speaker": h.model,
                        "kind": "answer",
                        "text": state.answers.get(h.model, ""),
                        "tokens": state.answer_tokens.get(h.model),
                        "error": state.answer_errors.get(h.model),
                        "decided_by": r.by,
                    }
                )
            elif state.answered:
                rows.append(
                    {
                        "turn": state.turn_id,
                        "speaker": h.model,
                        "kind": "skip",
                        "text": skip_line(h),
                        "decided_by": None if r is None else r.by,
                    }
                )
    return rows


def _event_rows(*types: str) -> Callable[[RunRecord], list[dict[str, Any]]]:
    def rows(record: RunRecord) -> list[dict[str, Any]]:
        return [_flat(p) for _, p in record.pairs(*types)]

    return rows


def _director_lines(record: RunRecord) -> list[dict[str, Any]]:
    """Every reviewed line (or draft) with its status, each rule's status, tone and rubric.

    Two shapes are stored: a review (`director_verdict`: rules a list of {rule, status, …}, tone a mapping of
    its parts, rubric a mapping) and a script line (`director_line`: rules a mapping rule → status, tone its
    score, rubric the average). Both become the same columns; anything else is kept as its text."""
    rows = []
    for type_, p in record.pairs("director_verdict", "director_line"):
        row = {k: v for k, v in p.items() if k not in ("rules", "tone", "rubric", "reasons")}
        row["event"] = type_
        row |= _rule_columns(p.get("rules"))
        tone = p.get("tone")
        if isinstance(tone, Mapping):
            row |= {f"tone.{key}": value for key, value in tone.items()}
        elif tone is not None:
            row["tone.score"] = tone
        rubric = p.get("rubric")
        if isinstance(rubric, Mapping):
            row |= {f"rubric.{k}": rubric.get(k) for k in ("average", "status", "failed") if k in rubric}
        elif rubric is not None:
            row["rubric.average"] = rubric
        reasons = p.get("reasons")
        if reasons is not None:
            row["reasons"] = " · ".join(map(str, reasons)) if isinstance(reasons, list) else str(reasons)
        rows.append(row)
    return rows


def _rule_columns(rules: object) -> dict[str, Any]:
    """`rule.<name>` → status, from a list of rule results or a mapping of rule → status."""
    if isinstance(rules, Mapping):
        return {f"rule.{name}": status for name, status in rules.items()}
    if isinstance(rules, list):
        return {f"rule.{r.get('rule')}": r.get("status") for r in rules if isinstance(r, Mapping)}
    return {} if rules is None else {"rules": rules}


def _director_hit_rates(record: RunRecord) -> list[dict[str, Any]]:
    """A script's rule hit rates with their 95 % Wilson intervals (a `director.batch` run's stored result)."""
    if not record.run.kind.startswith("director.batch"):
        return []
    result = record.run.summary.get("result")
    rates = result.get("hit_rates") if isinstance(result, Mapping) else None
    if not isinstance(rates, Mapping):
        return []
    rows = []
    for rule, rate in rates.items():
        if not isinstance(rate, Mapping):
            continue
        row: dict[str, Any] = {"rule": rule}
        for name in ("warn", "retry"):
            ci = rate.get(f"{name}_ci")
            low, high = (ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else (None, None)
            row |= {name: rate.get(name), f"{name}_ci_low": low, f"{name}_ci_high": high}
        rows.append(row)
    return rows


def _director_batch(record: RunRecord) -> list[dict[str, Any]]:
    """A script scored line by line: the rubric average per line (and whatever else each line's event holds)."""
    if not record.run.kind.startswith("director.batch"):
        return []
    return [_flat(p) | {"event": t} for t, p in record.pairs() if t.startswith("director_") and t != "director_verdict"]


def _calibration_items(record: RunRecord) -> list[dict[str, Any]]:
    rows = [_flat(p) for _, p in record.pairs("calibration_item")]
    summary = record.run.summary
    result = summary.get("result")
    items = result.get("items") if isinstance(result, Mapping) else summary.get("items")
    if not rows and "calibrat" in record.run.kind and isinstance(items, list):
        rows = [_flat(i) for i in items if isinstance(i, Mapping)]
    return rows


def _simulation(record: RunRecord) -> list[dict[str, Any]]:
    """A skip simulation's figures, one row with the cache and one without (when the run stored both)."""
    if not record.run.kind.startswith("skip."):
        return []
    summary = record.run.summary
    # `run_simulation` keeps the comparison under "result" (older runs: "comparison", or the summary itself)
    nested = next((summary[k] for k in ("result", "comparison") if isinstance(summary.get(k), Mapping)), None)
    source: Mapping[str, Any] = nested if nested is not None else summary
    rows = [
        {"setting": name.replace("_", " "), **_flat(source[name])}
        for name in ("without_cache", "with_cache")
        if isinstance(source.get(name), Mapping)
    ]
    if not rows:
        rows = [{"setting": "summary", **{k: v for k, v in summary.items() if not isinstance(v, Mapping | list)}}]
    return rows


TableBuilder = Callable[[RunRecord], list[dict[str, Any]]]
# Every run's tables; then each mechanism's (its `MechanismSpec.tables`, in the registry's export order).
COMMON_TABLES: list[tuple[str, str, TableBuilder]] = [
    ("headline", "the run and its headline figures", _headline),
    ("calls", "telemetry: every LLM call (model, tokens, latency, cost, error, prompt, reply)", _calls),
    ("events", "every event in order, its payload as JSON", _events),
]


def table_builders() -> list[tuple[str, str, TableBuilder]]:
    """Every export table in its fixed order: the common ones, then each registered mechanism's."""
    found = list(COMMON_TABLES)
    for spec in mechanisms("exports"):
        for table in spec.tables:
            build = _event_rows(*table.events) if table.events else resolve_callable(table.build)
            found.append((table.name, table.description, build))
    return found


def tables(record: RunRecord) -> dict[str, Table]:
    """Every table this run has rows for, in a fixed order (`headline`, `calls` and `events` always)."""
    fixed = {"calls": CALL_COLUMNS, "events": EVENT_COLUMNS}
    found: dict[str, Table] = {}
    for name, description, build in table_builders():
        rows = build(record)
        if rows or name in ("headline", "calls", "events"):
            found[name] = Table(name, description, rows, fixed.get(name, ()))
    return found


# -- CSV ------------------------------------------------------------------------------------------------------


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


def is_formula(text: str) -> bool:
    """Whether a spreadsheet could read the text as a formula: it starts with a tab or a carriage return, or
    its first character that is not whitespace, a control or invisible is = + - @ in any width."""
    if text.startswith(FORMULA_LEAD):
        return True
    for ch in text:
        if unicodedata.normalize("NFKC", ch)[:1] in FORMULA_CHARS:
            return True
        if not (ch.isspace() or unicodedata.category(ch) in SKIPPED_CATEGORIES):
            return False
    return False


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


# -- JSON -----------------------------------------------------------------------------------------------------


def run_document(record: RunRecord) -> dict[str, Any]:
    """The whole run as one JSON-ready value: the run, its config and summary, every event and every call."""
    run = record.run
    document = {
        "format": EXPORT_FORMAT,
        "exported_at": datetime.now(UTC).isoformat(),
        "run": {
            "id": run.id,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            "tags": record.tags,
            "started_at": run.started_at.isoformat(),
            "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
            "duration_s": run.duration_s,
            "error": run.error,
            "config_hash": run.config_hash,
            "headline": headline(run, record.totals),
            "totals": record.totals,
        },
        "config": run.config,
        "summary": run.summary,
        "events": [{"seq": e.seq, "type": e.type, "ts": e.ts.isoformat(), "payload": e.payload} for e in record.events],
        "calls": [
            {
                "id": c.id,
                "created_at": c.created_at.isoformat(),
                "purpose": c.purpose,
                "model_id": c.model_id,
                "backend": c.backend,
                "model_name": c.model_name,
                "request_hash": c.request_hash,
                "request": json.loads(c.request_json or "{}"),
                "raw_text": c.raw_text,
                "parsed": json.loads(c.parsed_json) if c.parsed_json else None,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "latency_s": c.latency_s,
                "cost": c.cost,
                "would_cost": c.would_cost,
                "finish_reason": c.finish_reason,
                "error": c.error,
                "error_type": c.error_type,
                "flags": json.loads(c.flags_json or "[]"),
                "attempts": c.attempts,
            }
            for c in record.calls
        ],
    }
    return dict(redact_obj(document))


def run_json(record: RunRecord) -> str:
    return redact(json.dumps(run_document(record), ensure_ascii=False, indent=2, default=str))


# -- HTML -----------------------------------------------------------------------------------------------------


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
