"""A stored run with everything recorded for it (`load_run`), and the shape of an export table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.labels.corrected import corrected_rates
from engine.store import EventRow, LlmCall, Run, Store

# Bookkeeping events: the timeline keeps them, no table is made of them.
RUN_EVENTS = frozenset({"run_started", "run_finished", "run_failed", "run_cancelled"})


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
    corrected: list[dict[str, Any]] = field(default_factory=list)  # the judge's rates corrected by the labels

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
        corrected=[r.to_dict() for r in corrected_rates(store, run)],
    )


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


def call_fields(call: LlmCall) -> dict[str, Any]:
    """A recorded LLM call's own figures, as both the JSON document and the `llm_calls` table carry them (each adds
    its id and its own form of the request, the parsed answer and the flags)."""
    return {
        "created_at": call.created_at,
        "purpose": call.purpose,
        "model_id": call.model_id,
        "backend": call.backend,
        "model_name": call.model_name,
        "request_hash": call.request_hash,
        "raw_text": call.raw_text,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "latency_s": call.latency_s,
        "cost": call.cost,
        "would_cost": call.would_cost,
        "finish_reason": call.finish_reason,
        "error": call.error,
        "error_type": call.error_type,
        "attempts": call.attempts,
    }


def flat(payload: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """One row from an event payload: scalars as they are, a dict of scalars as dotted columns, anything
    deeper as its JSON text."""
    row: dict[str, Any] = {}
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and not prefix and all(not isinstance(v, Mapping | list) for v in value.values()):
            row.update(flat(value, f"{name}."))
        else:
            row[name] = value
    return row


TableBuilder = Callable[[RunRecord], list[dict[str, Any]]]
