"""JSON of a whole run: its row, events, calls, totals and tags, keys redacted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engine.exports.csvfiles import EXPORT_FORMAT
from engine.exports.record import RunRecord, call_fields
from engine.history import headline
from models.secrets import redact, redact_obj


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
            call_fields(c)
            | {
                "id": c.id,
                "created_at": c.created_at.isoformat(),
                "request": json.loads(c.request_json or "{}"),
                "parsed": json.loads(c.parsed_json) if c.parsed_json else None,
                "flags": json.loads(c.flags_json or "[]"),
            }
            for c in record.calls
        ],
    }
    return dict(redact_obj(document))


def run_json(record: RunRecord) -> str:
    return redact(json.dumps(run_document(record), ensure_ascii=False, indent=2, default=str))
