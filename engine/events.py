"""Typed events and their sinks, and the run context every mechanism runs inside.

A run emits events in order (`seq` 0, 1, 2, …). The store sink always writes them; a live queue sink
feeds a page that watches. Replay reads the same events back from the store, so what a page shows
live and what it shows in replay come from one source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from engine import runctx
from engine.store import CANCELLED, FAILED, FINISHED, INTERRUPTED, RUNNING, Store, StoreError
from models.recording import call_context
from models.secrets import redact_obj
from models.source import ModelSource as _ModelSource

# A mechanism's event callback: emit(type, **payload). What it returns is ignored.
Emit = Callable[..., object]

log = logging.getLogger(__name__)

# What every entry point gets to reach its models: a catalog id → the model (`ModelHub.get`), so the page,
# the CLI and a test hand in their own hub (or scripted models) and the entry point stays the same. One
# definition: models.source.
ModelSource = _ModelSource

# Event types of the foundation; mechanism modules add their own names (kept as plain strings so a
# replay of an old run never fails on a type that was renamed since).
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
RUN_FAILED = "run_failed"
RUN_CANCELLED = "run_cancelled"

# Why the current process is being stopped (set by the CLI's signal handlers), so a cancelled run
# says "SIGTERM received" rather than an empty CancelledError.
_cancel_reason: str | None = None


def set_cancel_reason(reason: str | None) -> None:
    global _cancel_reason
    _cancel_reason = reason


def cancel_reason(exc: BaseException) -> str:
    if _cancel_reason:
        return _cancel_reason
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by SIGINT (Ctrl-C)"

    control = runctx.current()
    if control is not None and control.cancelled:
        return control.cancel_reason or "cancelled by the user"
    if isinstance(exc, runctx.RunCancelled):
        return exc.reason
    return f"the task running it was cancelled{f' ({exc})' if str(exc) else ''}"


class Event(BaseModel):
    run_id: str
    seq: int
    type: str
    payload: dict[str, Any] = Field(default_factory=dict)
    ts: datetime = Field(default_factory=lambda: datetime.now(UTC))


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class StoreSink:
    """Writes every event to the store (always attached)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def emit(self, event: Event) -> None:
        self.store.append_event(event.run_id, event.seq, event.type, event.payload, event.ts)


class QueueSink:
    """A thread-safe queue a page (another thread) drains; `None` marks the end of the run."""

    def __init__(self, maxsize: int = 0) -> None:
        self.queue: queue.Queue[Event | None] = queue.Queue(maxsize)

    def emit(self, event: Event) -> None:
        self.queue.put(event)

    def close(self) -> None:
        self.queue.put(None)

    def drain(self, timeout: float = 0.0) -> tuple[list[Event], bool]:
        """Events available now (waiting up to `timeout` for the first); True once the run ended."""
        events: list[Event] = []
        ended = False
        try:
            item = self.queue.get(timeout=timeout) if timeout else self.queue.get_nowait()
            while True:
                if item is None:
                    ended = True
                    break
                events.append(item)
                item = self.queue.get_nowait()
        except queue.Empty:
            pass
        return events, ended


class ListSink:
    """Keeps events in memory (tests, CLI JSON output)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


class EventBus:
    """Numbers events of one run and hands each to every sink. A failing extra sink is logged,
    never allowed to stop the run; the store sink's failure is raised (nothing may go unrecorded)."""

    def __init__(self, run_id: str, sinks: list[EventSink]) -> None:
        self.run_id = run_id
        self.sinks = sinks
        self._seq = 0
        self._lock = threading.Lock()
        self._pending: list[Event] | None = None  # buffered for the store while `batched`
        self._flush_every = 0
        self._flush_at = 0.0
        self._max_age_s = 0.0

    @contextlib.contextmanager
    def batched(self, every: int = 512, max_age_s: float = 0.25) -> Iterator[None]:
        """Within the block, the store gets the events in transactions of up to `every` (or whatever `max_age_s`
        gathered: a page watching the run still sees them within a quarter of a second); every other sink
        gets each at once. The rest is written when the block ends, however it ends."""
        with self._lock:
            self._pending, self._flush_every, self._max_age_s = [], max(1, every), max_age_s
            self._flush_at = time.monotonic() + max_age_s
        try:
            yield
        finally:
            with self._lock:
                try:
                    self._flush()
                finally:
                    self._pending = None

    def _flush(self) -> None:
        """Write the buffered events (under the lock)."""
        pending, self._pending = self._pending or [], ([] if self._pending is not None else None)
        self._flush_at = time.monotonic() + self._max_age_s
        store = next((s.store for s in self.sinks if isinstance(s, StoreSink)), None)
        if pending and store is not None:
            store.append_events([(e.run_id, e.seq, e.type, e.payload, e.ts) for e in pending])

    def emit(self, type_: str, **payload: object) -> Event:
        # Keys are redacted before any sink sees the event: the live page as much as the store.
        payload = redact_obj(payload)
        with self._lock:
            event = Event(run_id=self.run_id, seq=self._seq, type=type_, payload=payload)
            self._seq += 1
            for sink in self.sinks:
                if isinstance(sink, StoreSink) and self._pending is not None:
                    self._pending.append(event)  # written with the others at the next flush
                    if len(self._pending) >= self._flush_every or time.monotonic() >= self._flush_at:
                        self._flush()
                elif isinstance(sink, StoreSink):
                    sink.emit(event)
                else:
                    try:
                        sink.emit(event)
                    except Exception:
                        log.exception("event sink %r failed", sink)
        return event


class RunHandle:
    def __init__(self, store: Store, run_id: str, bus: EventBus) -> None:
        self.store = store
        self.run_id = run_id
        self.bus = bus
        self.summary: dict[str, Any] = {}

    def emit(self, type_: str, **payload: object) -> Event:
        return self.bus.emit(type_, **payload)


def said_in_one_line(exc: BaseException) -> bool:
    """Whether `exc` is one of the project's own errors about bad input or the environment (a bad file, label,
    map, setting, a store that cannot be written: a `ValueError` or `StoreError` defined in engine/ or models/),
    whose one-line message is all there is to say: its failed run keeps no traceback (the machine's paths
    and the code's lines are not the user's business). Any other exception is a fault: its traceback is kept."""
    kind = type(exc)
    own = kind.__module__.split(".")[0] in ("engine", "models")
    return own and issubclass(kind, ValueError | StoreError)


@contextlib.contextmanager
def run_context(
    store: Store,
    kind: str,
    config: dict[str, Any] | None = None,
    *,
    name: str = "",
    sinks: list[EventSink] | None = None,
) -> Iterator[RunHandle]:
    """Create a run, attribute every model call inside to it, and close it: finished, failed, or
    cancelled (KeyboardInterrupt / CancelledError: SIGINT, SIGTERM via the CLI, a cancelled task) with
    every event emitted so far and the reason."""

    run = store.create_run(kind, config, name=name)
    bus = EventBus(run.id, [StoreSink(store), *(sinks or [])])
    handle = RunHandle(store, run.id, bus)
    bus.emit(RUN_STARTED, kind=kind, name=name, config=config or {})
    control = runctx.current()
    if control is not None:  # the run registry learns the id now, not when the run ends
        control.attach(run.id)
    try:
        with call_context(run_id=run.id, purpose=kind):
            yield handle
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        reason = cancel_reason(exc)
        try:
            bus.emit(RUN_CANCELLED, reason=reason)
        finally:
            store.finish_run(run.id, status=CANCELLED, error=f"cancelled: {reason}", summary=handle.summary)
            _close_sinks(sinks)
        raise
    except BaseException as exc:
        message = f"{type(exc).__name__}: {exc}"
        where = {} if said_in_one_line(exc) else {"traceback": traceback.format_exc(limit=5)}
        try:
            bus.emit(RUN_FAILED, error=message, **where)
        finally:
            store.finish_run(run.id, status=FAILED, error=message, summary=handle.summary)
            _close_sinks(sinks)
        raise
    bus.emit(RUN_FINISHED, summary=handle.summary)
    store.finish_run(run.id, status=FINISHED, summary=handle.summary)
    _close_sinks(sinks)


@contextlib.asynccontextmanager
async def async_run_context(
    store: Store,
    kind: str,
    config: dict[str, Any] | None = None,
    *,
    name: str = "",
    sinks: list[EventSink] | None = None,
) -> AsyncIterator[RunHandle]:
    with run_context(store, kind, config, name=name, sinks=sinks) as handle:
        yield handle


def _close_sinks(sinks: list[EventSink] | None) -> None:
    for sink in sinks or []:
        close = getattr(sink, "close", None)
        if callable(close):
            close()


def incomplete_note(status: str, events: list[Any], error: str | None = None) -> str | None:
    """What a replay says about a run that did not finish: "incomplete: interrupted after event N", or
    None for a finished run. `events` are the stored events (rows with `seq` and `type`)."""
    if status == FINISHED:
        return None
    last = f"event {events[-1].seq} ({events[-1].type})" if events else "no event"
    if status == RUNNING:
        return f"incomplete: still running — {len(events)} event(s) so far, the last {last}"
    if status in (INTERRUPTED, CANCELLED):
        why = ""
        if error:
            why = " — " + error.split(": ", 1)[-1]
        return f"incomplete: {status} after {last}{why}"
    return f"incomplete: {status} after {last}" + (f" — {error}" if error else "")
