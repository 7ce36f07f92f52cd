"""Run control: progress and cooperative cancel for whatever runs inside a controlled block.

Entry points (``jury.run_case``, ``director.run_script``, ...) report progress through the free
functions here and never need a parameter for it: the run registry, or a CLI command, wraps the call
in ``controlled(ctrl)``, and every ``progress(...)`` inside (tasks and ``asyncio.to_thread`` workers
included: they copy the context) lands on that ``RunControl``. Outside a controlled block they cost
nothing.

Cancel is cooperative. ``RunControl.cancel()`` sets an event that the model layer checks before each
call and retry (``models.recording.checkpoint``), so the run stops between calls with
``RunCancelled`` (an ``asyncio.CancelledError``), which ``engine.events.run_context`` stores as
``cancelled`` with every event emitted so far. Entry points may call ``checkpoint()`` between steps
that make no model call.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from models.recording import RunCancelled, call_context, cancelled, checkpoint

__all__ = [
    "Progress",
    "RunCancelled",
    "RunControl",
    "cancelled",
    "checkpoint",
    "controlled",
    "current",
    "progress",
]


@dataclass
class Pace:
    """How long the rest of a counter takes, at the pace of its own ticks.

    The pace is measured from a reference tick: the first one (`skip_first`: the first unit carries the
    warm-up, e.g. loading a model, and later units are steady) or the start. Between ticks the estimate
    counts down (the unit in flight has been running for a while), so a stalled counter never makes the
    estimate grow with the elapsed time; once the unit in flight is later than the pace says, the estimate
    is what the units after it take at the quickest pace seen (never 0 with units to go) until the next tick
    measures the pace again."""

    started: float
    start_done: int = 0  # units already done when counting began (they took none of this time)
    skip_first: bool = False
    since: float | None = None  # the reference tick: time, and units done then
    since_done: int = 0
    last: float | None = None
    last_done: int = -1
    fastest: float | None = None  # the quickest seconds per unit seen between two ticks (a floor for what is left)

    def tick(self, done: int, now: float) -> None:
        if done <= max(self.last_done, self.start_done):
            return
        if self.since is None:
            self.since, self.since_done = (now, done) if self.skip_first else (self.started, self.start_done)
        if self.last is not None and done > self.last_done:
            each = (now - self.last) / (done - self.last_done)
            self.fastest = each if self.fastest is None else min(self.fastest, each)
        self.last, self.last_done = now, done

    def pace_s(self) -> float | None:
        """Seconds per unit, None before the first tick."""
        if self.last is None or self.since is None:
            return None
        if self.last_done > self.since_done:
            return (self.last - self.since) / (self.last_done - self.since_done)
        return (self.last - self.started) / (self.last_done - self.start_done)  # one tick: its units since the start

    def remaining_s(self, total: int | None, now: float) -> float | None:
        pace = self.pace_s()
        if not total or pace is None or self.last is None:
            return None
        left = max(0, total - self.last_done)
        if not left:
            return 0.0
        # the unit in flight counts down; the units after it take at least the quickest unit seen each, so the
        # estimate never drops below the time already known to remain (it read "about 2 s left" with turns to go)
        floor = (left - 1) * (self.fastest if self.fastest is not None else pace)
        return max(floor, pace * left - (now - self.last))


@dataclass
class Progress:
    """Done / total (the run's units: cells, steps), the current step, the items and model calls recorded
    so far (a run whose units wait on a long recording: an experiment records its cases first), and an ETA
    from each counter's own pace (`Pace`): the items' while items remain, then the units' since the items
    ended."""

    done: int = 0
    total: int | None = None
    step: str = ""
    unit: str = ""  # what done / total count, in words ("steps", "checks", "cells"); "" when the step says it
    items: int = 0
    items_total: int | None = None
    calls: int = 0
    started: float = field(default_factory=time.monotonic)
    updated: float = field(default_factory=time.monotonic)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    _units: Pace = field(init=False, repr=False)
    _items: Pace = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._units = Pace(self.started)
        self._items = Pace(self.started, skip_first=True)

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    @property
    def elapsed_s(self) -> float:
        return self.updated - self.started

    @property
    def recording(self) -> bool:
        """Items remain to be recorded: the ETA is theirs."""
        return bool(self.items_total) and self.items < (self.items_total or 0)

    def start_at(self, done: int) -> None:
        """Set `done`; before any unit has ticked, these units took none of the time (a resumed run)."""
        self.done = done
        if self._units.last is None:
            self._units = Pace(self._units.started, start_done=done)

    def tick(self, now: float) -> None:
        """Measure the counters after a report at `now`."""
        self.updated = now
        if self.items_total and self.items:
            self._items.tick(self.items, now)
            if self.items >= self.items_total and self._units.started < (self._items.last or 0):
                # the items are done: the units' pace from here on (the recording's time is not theirs)
                self._units = Pace(now, start_done=self.done)
        self._units.tick(self.done, now)

    def eta_at(self, now: float) -> float | None:
        """Seconds left at `now`; None before the counter that paces it has ticked, or without a total."""
        if self.recording:
            return self._items.remaining_s(self.items_total, now)
        if self.total and self.done >= self.total:
            return 0.0
        return self._units.remaining_s(self.total, now)

    @property
    def eta_s(self) -> float | None:
        return self.eta_at(self.clock())

    def as_dict(self) -> dict[str, object]:
        now = self.clock()
        eta = self.eta_at(now)
        out: dict[str, object] = {
            "done": self.done,
            "total": self.total,
            "step": self.step,
            "unit": self.unit,
            "elapsed_s": round(now - self.started, 3),
            "eta_s": None if eta is None else round(eta, 3),
        }
        if self.items_total or self.items or self.calls:
            out |= {"items": self.items, "items_total": self.items_total, "calls": self.calls}
        return out


class RunControl:
    """One run's cancel switch and progress, shared between the thread that runs it and the pages."""

    def __init__(self, run_id: str | None = None, on_progress: Callable[[Progress], None] | None = None) -> None:
        self.run_id = run_id
        # Set once the run exists in the store (`engine.events.run_context` calls `attach`), so whoever
        # started it learns its id at once, long before it ends.
        self.attached = threading.Event()
        self.run_ids: list[str] = [run_id] if run_id else []
        self.cancel_event = threading.Event()
        self.cancel_reason = ""
        self.progress = Progress()
        self._on_progress = on_progress
        self._lock = threading.Lock()

    def attach(self, run_id: str) -> None:
        """A stored run was created under this control (the first one is *the* run; an entry point that
        stores several runs lists them all in `run_ids`)."""
        with self._lock:
            self.run_ids.append(run_id)
            if self.run_id is None:
                self.run_id = run_id
        self.attached.set()

    def cancel(self, reason: str = "cancelled by the user") -> None:
        self.cancel_reason = reason
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def report(
        self,
        done: int | None = None,
        total: int | None = None,
        step: str | None = None,
        advance: int = 0,
        *,
        items: int = 0,
        items_total: int | None = None,
        calls: int = 0,
        unit: str | None = None,
    ) -> Progress:
        with self._lock:
            p = self.progress
            if unit is not None:
                p.unit = unit
            if total is not None:
                p.total = total
            if done is not None and total is not None:  # set with the total: units an earlier run did (resumed)
                p.start_at(done)
            elif done is not None:  # a unit count reported as it goes
                p.done = done
            p.done += advance
            if step is not None:
                p.step = step
            if items_total is not None:
                p.items_total = items_total
            p.items += items
            p.calls += calls
            p.tick(p.clock())
        if self._on_progress is not None:
            self._on_progress(p)
        return p


_CURRENT: contextvars.ContextVar[RunControl | None] = contextvars.ContextVar("judgelab_run_control", default=None)


def current() -> RunControl | None:
    return _CURRENT.get()


@contextlib.contextmanager
def controlled(ctrl: RunControl) -> Iterator[RunControl]:
    """Everything run inside reports progress to `ctrl` and stops between calls once it is cancelled."""
    token = _CURRENT.set(ctrl)
    try:
        with call_context(cancel=ctrl.cancel_event):
            yield ctrl
    finally:
        _CURRENT.reset(token)


def progress(
    done: int | None = None,
    total: int | None = None,
    step: str | None = None,
    advance: int = 0,
    *,
    items: int = 0,
    items_total: int | None = None,
    calls: int = 0,
    unit: str | None = None,
) -> None:
    """Report progress to the current run, if any: `total` once (with its `unit` in words), then `advance=1` (or
    `done=`) per unit.
    A run whose units wait on a recording also counts what it records: `items_total` once, then `items=1`
    and the model `calls` it took per recorded item (the ETA is then the recording's own)."""
    ctrl = _CURRENT.get()
    if ctrl is not None:
        ctrl.report(
            done=done,
            total=total,
            step=step,
            advance=advance,
            items=items,
            items_total=items_total,
            calls=calls,
            unit=unit,
        )
