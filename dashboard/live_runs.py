"""The run registry: runs that outlive the page that started them.

`start(kind, config, entry)` runs an entry-point coroutine (``jury.run_case(...)``,
``handraise.run_benchmark(...)``, …) on the dashboard's background loop under
``engine.runctx.controlled``, and returns the stored run's id as soon as the entry point has created it
(``engine.events.run_context`` attaches it to the control), long before the run ends. Pages keep only
that id (in the URL) and watch the run's events in the store, so a rerun, a reload, another page or a
second tab never loses it.

- **One run per identical start.** A second start of the same kind with the same config hash while the
  first is live returns the first one's id (a double click, two tabs).
- **Progress.** Entry points report done / total / step through ``runctx.progress``; the registry keeps
  it in memory and writes it to the store (``Store.set_progress``, at most every `progress_every_s`, and
  once more at the end), so any tab or process can show it with the ETA.
- **Cancel.** `cancel(run_id)` sets the run's cancel switch: the model layer raises ``RunCancelled``
  before the next call and a local llama.cpp generation stops at its next token; the run is stored as
  ``cancelled`` with every event it completed. A run that ignores the switch for `hard_cancel_after_s`
  (a remote call that hangs) has its task cancelled, which is stored the same way.
- **Conversations.** A conversation is a run the page drives turn by turn, not an entry point. It is
  *tracked* (`track`) and *touched* on every turn; `reap_idle` closes it as ``interrupted`` when its
  browser session has been gone for `session_grace_s` or it has seen no activity for `idle_s`
  (``JUDGELAB_CONVERSATION_IDLE_S``, default 30 min), so an abandoned conversation never stays
  ``running``. A reaper thread calls it every `reap_every_s`.

The core needs no Streamlit: `dashboard.state.get_registry` holds one per process.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dashboard.background import BackgroundLoop
from engine.config import get_settings
from engine.runctx import Progress, RunCancelled, RunControl, controlled
from engine.store import FINISHED, INTERRUPTED, RUNNING, Store, StoreError, config_hash
from models.secrets import redact_obj

log = logging.getLogger(__name__)

Entry = Callable[[], Awaitable[Any]]


def idle_limit_s() -> float:
    """How long a conversation may sit without a turn before it is closed (JUDGELAB_CONVERSATION_IDLE_S)."""

    return get_settings().conversation_idle_s


@dataclass
class LiveRun:
    """One run started through the registry, while this process holds it."""

    kind: str
    key: str
    control: RunControl
    future: concurrent.futures.Future[Any]
    started: float = field(default_factory=time.monotonic)
    last_written: float = 0.0

    @property
    def run_id(self) -> str:
        assert self.control.run_id is not None
        return self.control.run_id

    @property
    def done(self) -> bool:
        return self.future.done()


@dataclass
class Tracked:
    """A conversation run the page drives: when it was last used, and how to tell its session is gone."""

    run_id: str
    alive: Callable[[], bool] | None
    last_seen: float = field(default_factory=time.monotonic)
    gone_since: float | None = None
    closed: str | None = None  # why the reaper closed it


class RegistryError(RuntimeError):
    """A run could not be started; the message says why."""


class RunRegistry:
    def __init__(
        self,
        loop: BackgroundLoop,
        store: Store,
        *,
        progress_every_s: float = 0.5,
        attach_timeout_s: float = 30.0,
        hard_cancel_after_s: float = 15.0,
        idle_s: float | None = None,
        session_grace_s: float = 60.0,
        reap_every_s: float | None = 30.0,
        keep_ended: int = 32,
    ) -> None:
        self.loop = loop
        self.store = store
        self.progress_every_s = progress_every_s
        self.attach_timeout_s = attach_timeout_s
        self.hard_cancel_after_s = hard_cancel_after_s
        self.idle_s = idle_limit_s() if idle_s is None else idle_s
        self.session_grace_s = session_grace_s
        self.keep_ended = keep_ended  # ended runs whose return value stays at hand (a page shows it); older: store
        self._lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._runs: dict[str, LiveRun] = {}
        self._by_key: dict[str, LiveRun] = {}
        self._tracked: dict[str, Tracked] = {}
        self._stop = threading.Event()
        if reap_every_s:
            threading.Thread(target=self._reap_loop, args=(reap_every_s,), name="judgelab-reaper", daemon=True).start()

    # -- runs of an entry point -------------------------------------------------------------------
    @staticmethod
    def key(kind: str, config: Mapping[str, Any]) -> str:
        return f"{kind}:{config_hash(redact_obj(dict(config)))}"

    def start(self, kind: str, config: Mapping[str, Any], entry: Entry) -> str:
        """Run `entry()` (a coroutine that stores one run) on the background loop and return the run's id
        as soon as it exists. An identical run (same kind, same config hash) still live is attached to
        instead: its id is returned and nothing new starts."""
        key = self.key(kind, config)
        with self._start_lock:  # held while the run is created: a second identical start waits, then attaches
            with self._lock:
                same = self._by_key.get(key)
            if same is not None and not same.done:
                return same.run_id
            live_ref: list[LiveRun] = []
            control = RunControl(on_progress=self._progress_writer(live_ref))

            async def controlled_entry() -> Any:
                try:
                    with controlled(control):
                        return await entry()
                finally:  # written before anyone waiting on the run can see it end
                    if live_ref:
                        self._write_progress(live_ref[0], force=True, ended=True)

            future = self.loop.submit(controlled_entry())
            self._wait_attached(control, future, kind)
            live = LiveRun(kind=kind, key=key, control=control, future=future)
            live_ref.append(live)
            with self._lock:
                self._runs[live.run_id] = live
                self._by_key[key] = live
        self._write_progress(live, force=True)
        future.add_done_callback(lambda _f: self._ended(live))
        return live.run_id

    def _wait_attached(self, control: RunControl, future: concurrent.futures.Future[Any], kind: str) -> None:
        deadline = time.monotonic() + self.attach_timeout_s
        while not control.attached.wait(0.02):
            if future.done():
                if control.attached.is_set():
                    # It stored its run and ended between the two looks (seen under load: this thread waits
                    # for the CPU while the loop runs the whole entry point). A run is attached before its
                    # entry point ends, so after `done` this look is final.
                    return
                exc = future.exception() if not future.cancelled() else None
                if exc is not None:  # a StoreError's line says it all (e.g. the database file was deleted)
                    why = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
                    raise RegistryError(f"the {kind} run could not start: {why}") from exc
                raise RegistryError(f"the {kind} entry point ended without storing a run")
            if time.monotonic() > deadline and not control.attached.is_set():
                control.cancel("it did not start within the time allowed")
                raise RegistryError(f"the {kind} run did not start within {self.attach_timeout_s:g} s")

    def get(self, run_id: str) -> LiveRun | None:
        with self._lock:
            return self._runs.get(run_id)

    def is_live(self, run_id: str) -> bool:
        live = self.get(run_id)
        return live is not None and not live.done

    def cancel(self, run_id: str, reason: str = "cancelled by the user") -> bool:
        """Ask a live run to stop (between calls, or at the next token of a local generation). False when
        this process holds no such live run."""
        live = self.get(run_id)
        if live is None or live.done:
            return False
        live.control.cancel(reason)
        if self.hard_cancel_after_s:
            timer = threading.Timer(self.hard_cancel_after_s, self._hard_cancel, args=(live,))
            timer.daemon = True
            timer.start()
        return True

    def _hard_cancel(self, live: LiveRun) -> None:
        if not live.done:
            log.warning(
                "run %s ignored its cancel switch for %.0f s: cancelling its task",
                live.run_id,
                self.hard_cancel_after_s,
            )
            live.future.cancel()

    def wait(self, run_id: str, timeout: float | None = None) -> Any:
        """The entry point's return value (tests, the CLI); raises what it raised (RunCancelled once
        cancelled)."""
        live = self.get(run_id)
        if live is None:
            raise KeyError(run_id)
        try:
            return live.future.result(timeout)
        except concurrent.futures.CancelledError:  # the task ended by RunCancelled (or a hard cancel)
            raise RunCancelled(live.control.cancel_reason or "cancelled") from None

    def progress(self, run_id: str) -> dict[str, Any] | None:
        """Done / total / step / elapsed / ETA: live from memory when this process runs it, else the last
        figures stored by whichever process does (or did)."""
        live = self.get(run_id)
        if live is not None and not live.done:
            return live.control.progress.as_dict()
        return self.store.progress(run_id)

    def _progress_writer(self, live_ref: list[LiveRun]) -> Callable[[Progress], None]:
        def on_progress(_p: Progress) -> None:
            if live_ref:
                self._write_progress(live_ref[0])

        return on_progress

    def _write_progress(self, live: LiveRun, *, force: bool = False, ended: bool = False) -> None:
        now = time.monotonic()
        p = live.control.progress
        if not force and now - live.last_written < self.progress_every_s and p.done != p.total:
            return
        live.last_written = now
        try:
            self.store.set_progress(live.run_id, {**p.as_dict(), "ended": ended or live.done})
        except StoreError as exc:  # its one line (e.g. the database file was deleted): the run says it too
            log.warning("could not store the progress of run %s: %s", live.run_id, exc)
        except Exception:  # progress is a convenience: a failed write never stops the run
            log.exception("could not store the progress of run %s", live.run_id)

    def _ended(self, live: LiveRun) -> None:
        self._write_progress(live, force=True, ended=True)
        with self._lock:
            if self._by_key.get(live.key) is live:
                del self._by_key[live.key]
            ended = [run_id for run_id, r in self._runs.items() if r.done]  # in start order
            for run_id in ended[: max(0, len(ended) - self.keep_ended)]:
                del self._runs[run_id]  # its figures stay in the store; only its return value goes

    # -- conversations (runs the page drives turn by turn) -----------------------------------------
    def track(self, run_id: str, alive: Callable[[], bool] | None = None) -> None:
        """Watch a running run the page drives itself; `alive()` says whether its browser session exists."""
        with self._lock:
            self._tracked[run_id] = Tracked(run_id, alive)

    def touch(self, run_id: str, now: float | None = None) -> bool:
        """A turn happened. False when the run was already closed by the reaper (why: `closed_reason`)."""
        with self._lock:
            t = self._tracked.get(run_id)
            if t is None or t.closed:
                return False
            t.last_seen = time.monotonic() if now is None else now
            return True

    def closed_reason(self, run_id: str) -> str | None:
        with self._lock:
            t = self._tracked.get(run_id)
            return None if t is None else t.closed

    def release(
        self, run_id: str, *, status: str = FINISHED, summary: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        """The page closes its conversation itself ("New conversation")."""
        with self._lock:
            t = self._tracked.pop(run_id, None)
        if t is not None and t.closed:
            return
        run = self.store.get_run(run_id)
        if run is not None and run.status == RUNNING:
            self.store.finish_run(run_id, status=status, summary=summary, error=error)

    def reap_idle(self, now: float | None = None) -> list[str]:
        """Close as `interrupted` every tracked conversation whose session is gone (for `session_grace_s`)
        or that saw no turn for `idle_s`. Returns the ids closed."""
        now = time.monotonic() if now is None else now
        closed = []
        with self._lock:
            tracked = [t for t in self._tracked.values() if not t.closed]
        for t in tracked:
            why = None
            alive = True
            if t.alive is not None:
                try:
                    alive = t.alive()
                except Exception:
                    alive = True
            if not alive:
                t.gone_since = t.gone_since or now
                if now - t.gone_since >= self.session_grace_s:
                    why = "its browser session ended"
            else:
                t.gone_since = None
            if why is None and now - t.last_seen >= self.idle_s:
                why = f"no turn for {self.idle_s / 60:g} min"
            if why is None:
                continue
            t.closed = why
            run = self.store.get_run(t.run_id)
            if run is not None and run.status == RUNNING:
                events = self.store.events(t.run_id)
                after = f"after event {events[-1].seq}" if events else "before its first event"
                self.store.finish_run(
                    t.run_id, status=INTERRUPTED, error=f"interrupted {after}: the conversation was left ({why})"
                )
                closed.append(t.run_id)
        return closed

    def _reap_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.reap_idle()
            except Exception:
                log.exception("reaping idle conversations failed")

    def close(self) -> None:
        self._stop.set()
