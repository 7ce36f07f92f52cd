"""The run's export tables: the common ones (headline, calls, events), then each registered mechanism's, built by
the builder its `MechanismSpec` names (or from its events)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.exports.record import RunRecord, Table, TableBuilder, call_fields, flat
from engine.history import headline
from engine.registry import mechanisms

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
            call_fields(c)
            | {
                "call_id": c.id,
                "flags": ", ".join(map(str, json.loads(c.flags_json or "[]"))),
                "prompt": prompt,
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


def _event_rows(*types: str) -> Callable[[RunRecord], list[dict[str, Any]]]:
    def rows(record: RunRecord) -> list[dict[str, Any]]:
        return [flat(p) for _, p in record.pairs(*types)]

    return rows


def _corrected(record: RunRecord) -> list[dict[str, Any]]:
    """The judge's rates beside your labels' and the corrected ones (PPI++), as the Runs page shows them."""
    return [dict(r) for r in record.corrected]


# Every run's tables; then each mechanism's (its `MechanismSpec.tables`, in the registry's export order).
COMMON_TABLES: list[tuple[str, str, TableBuilder]] = [
    ("headline", "the run and its headline figures", _headline),
    ("calls", "telemetry: every LLM call (model, tokens, latency, cost, error, prompt, reply)", _calls),
    ("events", "every event in order, its payload as JSON", _events),
    (
        "corrected_rates",
        "the judge's rate of each value, your labels' rate and the rate corrected by your labels (PPI++), each "
        "with its 95 % interval, and the labels that would halve the corrected interval",
        _corrected,
    ),
]


def table_builders() -> list[tuple[str, str, TableBuilder]]:
    """Every export table in its fixed order: the common ones, then each registered mechanism's."""
    found = list(COMMON_TABLES)
    for spec in mechanisms():
        for table in spec.tables():
            build = table.build or _event_rows(*table.events)
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
