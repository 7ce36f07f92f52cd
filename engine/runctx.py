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
class Progress:
    """Done / total, the current step, and an ETA from the mean time per finished unit so far."""

    done: int = 0
    total: int | None = None
    step: str = ""
    started: float = field(default_factory=time.monotonic)
    updated: float = field(default_factory=time.monotonic)

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    @property
    def elapsed_s(self) -> float:
        return self.updated - self.started

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far; None before the first unit is done or without a total."""
        if not self.total or self.done <= 0:
            return None
        pace = (time.monotonic() - self.started) / self.done
        return max(0.0, pace * (self.total - self.done))

    def as_dict(self) -> dict[str, object]:
        return {
            "done": self.done,
            "total": self.total,
            "step": self.step,
            "elapsed_s": round(time.monotonic() - self.started, 3),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 3),
        }


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
        self, done: int | None = None, total: int | None = None, step: str | None = None, advance: int = 0
    ) -> Progress:
        with self._lock:
            p = self.progress
            if total is not None:
                p.total = total
            if done is not None:
                p.done = done
            p.done += advance
            if step is not None:
                p.step = step
            p.updated = time.monotonic()
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


def progress(done: int | None = None, total: int | None = None, step: str | None = None, advance: int = 0) -> None:
    """Report progress to the current run, if any: `total` once, then `advance=1` (or `done=`) per unit."""
    ctrl = _CURRENT.get()
    if ctrl is not None:
        ctrl.report(done=done, total=total, step=step, advance=advance)
