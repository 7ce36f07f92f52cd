"""Call recording: every LLM call, success or failure, goes to a CallLog with its run and purpose.

The model layer does not know the database; `engine.store.Store` implements `CallLog`. The run id and
purpose travel in a context variable, so engine code sets them once around a block and every call
made inside (including calls in tasks it spawns) is attributed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class CallContext:
    run_id: str | None = None
    purpose: str = "adhoc"
    # Set by the run registry (engine.runctx): when this event is set, the next model call, and a local
    # generation at its next token, raises RunCancelled.
    cancel: threading.Event | None = None


class RunCancelled(asyncio.CancelledError):
    """The run was cancelled cooperatively (its cancel event was set) between calls or between tokens.

    A CancelledError, so `except Exception` fallbacks in the mechanisms never swallow it and
    `engine.events.run_context` stores the run as `cancelled` with every event emitted so far."""

    def __init__(self, reason: str = "cancelled by the user") -> None:
        super().__init__(reason)
        self.reason = reason


def checkpoint() -> None:
    """Raise RunCancelled when the current run has been cancelled; free when nothing is set."""
    cancel = _CONTEXT.get().cancel
    if cancel is not None and cancel.is_set():
        raise RunCancelled()


def cancelled() -> bool:
    cancel = _CONTEXT.get().cancel
    return cancel is not None and cancel.is_set()


_CONTEXT: contextvars.ContextVar[CallContext] = contextvars.ContextVar(
    "judgelab_call_context",
    default=CallContext(),  # noqa: B039 - a frozen dataclass, immutable
)


@contextlib.contextmanager
def call_context(
    run_id: str | None = None, purpose: str | None = None, cancel: threading.Event | None = None
) -> Iterator[CallContext]:
    """Attribute every model call made inside this block to `run_id` and `purpose` (and, with `cancel`,
    let the run be cancelled between calls)."""
    current = _CONTEXT.get()
    ctx = CallContext(
        run_id=run_id if run_id is not None else current.run_id,
        purpose=purpose if purpose is not None else current.purpose,
        cancel=cancel if cancel is not None else current.cancel,
    )
    token = _CONTEXT.set(ctx)
    try:
        yield ctx
    finally:
        _CONTEXT.reset(token)


def current_context() -> CallContext:
    return _CONTEXT.get()


class CallFacts(BaseModel):
    """The facts of one LLM call that are stored as they are. Written once: `CallRecord` adds the request,
    the parsed answer and the flags; the store's table (`engine.store.LlmCall`) adds its id and their JSON."""

    run_id: str | None = None
    purpose: str = "adhoc"
    model_id: str
    backend: str
    model_name: str = ""
    request_hash: str
    raw_text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0  # dollars spent by this call: 0 for a replayed one
    would_cost: float | None = None  # replayed calls only: what the recorded original cost
    finish_reason: str | None = None
    error: str | None = None
    error_type: str | None = None
    attempts: int = 1
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class CallRecord(CallFacts):
    """One LLM call as stored. Holds the request (never headers or keys) and what came back."""

    request: dict[str, Any]
    parsed: dict[str, Any] | None = None
    flags: list[str] = Field(default_factory=list)


class CallLog(Protocol):
    """Where calls are written and where replay reads them back."""

    def record_call(self, record: CallRecord) -> int: ...

    def find_calls(self, request_hash: str) -> list[CallRecord]: ...


class MemoryCallLog:
    """A CallLog in memory: for the CLI's throw-away checks and for tests of the model layer."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record_call(self, record: CallRecord) -> int:
        self.records.append(record)
        return len(self.records)

    def find_calls(self, request_hash: str) -> list[CallRecord]:
        return [r for r in self.records if r.request_hash == request_hash]
