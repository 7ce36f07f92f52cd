"""Pages watch runs; they don't wait for them.

`watch_run(run_id, fold, render)` is a fragment that re-runs on its own every `every_s` while the run is
live: it folds the events stored since the last look (``Store.events(run_id, after_seq)``) into the
page's view, renders it, and shows the run's progress (done / total, step, ETA) with a Cancel button. Once
the run has ended it stops refreshing (one full rerun, so the rest of the page sees the final state).

The run id lives in the URL (`url_run` / `set_url_run`), so a reload, a return visit or a second tab
re-attaches to the live run. Nothing here waits on a model: every read is a store query.

A page section that starts runs uses `start_watched` (registry start or attach, id into the session and the
URL, a start failure kept for `start_error`), `watched_run` (the URL's run, else the session's), `Collected`
(a generic fold whose `result` is the entry point's stored ``summary["result"]``) and `live_result` (the
entry point's own return value, where this process ran it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import streamlit as st

from dashboard import demo, state
from dashboard import formstate as form
from dashboard.live_runs import RegistryError
from dashboard.text import md
from engine.store import CANCELLED, FAILED, FINISHED, RUNNING, StoreError


class Folder(Protocol):
    def apply(self, type_: str, payload: Mapping[str, Any]) -> None: ...


V = TypeVar("V", bound=Folder)

PROGRESS_AFTER_S = 0.0  # a live run shows its progress bar and Cancel at once: a short run is rarely seen live


def url_run(param: str = "run") -> str | None:
    value = st.query_params.get(param)
    return str(value) if value else None


def set_url_run(run_id: str | None, param: str = "run") -> None:
    if run_id:
        st.query_params[param] = run_id
    elif param in st.query_params:
        del st.query_params[param]


def eta_text(progress: dict[str, Any] | None) -> str:
    """'3 / 10 · discussion round 1 · 12 s elapsed · about 28 s left' from a progress dict; a run that records
    items first (an experiment) counts what it records until its first cell: 'recording: 7 / 24 items · then 264
    cells · 21 calls · judged h07 · 14 s elapsed · about 40 s left'."""
    if not progress:
        return "starting…"
    done, total = progress.get("done") or 0, progress.get("total")
    items, items_total = int(progress.get("items") or 0), progress.get("items_total")
    if items_total and items < int(items_total) and not done:  # the recording comes first: count what it records
        parts = [f"recording: {items} / {items_total} items", f"then {total} cells" if total else "then the cells"]
    else:
        unit = f" {progress['unit']}" if progress.get("unit") else ""
        parts = [f"{done:,} / {total:,}{unit}" if total else f"{done:,}{unit} done"]
        if items_total:
            parts.append(f"{items} / {items_total} items recorded")
        elif items:
            parts.append(f"{items} items recorded")
    if "calls" in progress:
        calls = int(progress.get("calls") or 0)
        parts.append(f"{calls} call{'' if calls == 1 else 's'}")
    if progress.get("step"):
        parts.append(str(progress["step"]))
    if progress.get("elapsed_s") is not None:
        parts.append(f"{float(progress['elapsed_s']):.0f} s elapsed")
    eta = progress.get("eta_s")
    if eta is not None and not math.isfinite(float(eta)):
        eta = None
    if eta is None:
        recording = bool(items_total) and items < int(items_total or 0)
        parts.append("ETA after the first item" if recording else "ETA after the first step")
    elif float(eta) < 1 and total and done < total:
        parts.append("almost done")
    else:
        parts.append(f"about {_duration(float(eta))} left")
    return " · ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fold_events(run_id: str, fold: Callable[[], V], key: str) -> V:
    """The view of `run_id`, kept in the session and brought up to date with the events stored since."""
    cache = st.session_state.get(key)
    if not isinstance(cache, dict) or cache.get("run_id") != run_id:
        cache = {"run_id": run_id, "seq": -1, "view": fold()}
        st.session_state[key] = cache
    for event in state.get_store().events(run_id, after_seq=cache["seq"]):
        cache["view"].apply(event.type, event.payload)
        cache["seq"] = event.seq
    return cache["view"]


def progress_fraction(progress: dict[str, Any] | None) -> float:
    """How far the bar is: the share of the time elapsed once there is an ETA (so a recording that precedes
    every unit moves the bar too), else done / total."""
    if not progress:
        return 0.0
    elapsed, eta = progress.get("elapsed_s"), progress.get("eta_s")
    if elapsed is not None and eta is not None and float(elapsed) + float(eta) > 0:
        return min(1.0, float(elapsed) / (float(elapsed) + float(eta)))
    items, items_total = int(progress.get("items") or 0), progress.get("items_total")
    if items_total and items < int(items_total) and not progress.get("done"):  # the recording, before any cell
        return min(1.0, items / float(items_total))
    if progress.get("total"):
        return min(1.0, float(progress.get("done") or 0) / float(progress["total"]))
    return 0.0


def render_progress(run_id: str, key: str) -> None:
    """The progress bar with counts and ETA, and Cancel (only where this process runs it)."""
    registry = state.get_registry()
    progress = registry.progress(run_id)
    bar, button = st.columns([5, 1])
    bar.progress(progress_fraction(progress), text=md(eta_text(progress)))
    here = registry.is_live(run_id)

    def cancel() -> None:
        registry.cancel(run_id)

    button.button(
        "Cancel",
        key=key + ".cancel",
        disabled=not here,
        on_click=cancel,
        help=None if here else "This run is driven by another process: stop it there.",
    )


def watch_run(
    run_id: str,
    fold: Callable[[], V],
    render: Callable[[V, bool], None],
    *,
    key: str,
    every_s: float = 0.5,
    outcome: Callable[[Any], None] | None = None,
) -> V | None:
    """Show `run_id` live: fold its events with `fold()` (a fresh view with ``apply(type, payload)``) and
    `render(view, live)`; progress and Cancel while it runs; stop refreshing once it has ended. `outcome(run)`
    shows a run that ended unfinished (cancelled, failed, interrupted) in the page's own words instead of the
    generic lines (an all-or-none import says that nothing was written). Returns the view as of this script run
    (None when there is no such run)."""
    store = state.get_store()
    try:
        run = store.get_run(run_id)
    except StoreError as exc:  # e.g. the database file deleted and no connection left to read it through
        st.error(md(str(exc), inline=False))
        return None
    if run is None:
        st.warning(f"No run {md(run_id)} in this database.")
        return None
    live_at_start = (run.status == RUNNING and _unrecorded_end(run_id) is None) or (
        run.status == FINISHED and _returning(run_id)
    )

    @st.fragment(run_every=every_s if live_at_start else None)
    def watching() -> None:
        try:
            current = store.get_run(run_id)
            view = fold_events(run_id, fold, key + ".fold")
        except StoreError as exc:  # the database file deleted or replaced meanwhile: the reason, no traceback
            st.error(md(str(exc), inline=False))
            return
        status = current.status if current is not None else RUNNING
        error = (current.error if current else "") or ""
        if status == RUNNING and (unrecorded := _unrecorded_end(run_id)) is not None:
            status, error = FAILED, unrecorded  # ended here, but its end could not be stored
        elif status == FINISHED and _returning(run_id):
            status = RUNNING  # its end is stored, its entry point is still returning: look again next tick
        if status == RUNNING:
            render_progress(run_id, key)
        elif outcome is not None and current is not None and status != FINISHED:
            # the run as it ended (its stored row may still say running: its end could not be stored); a new
            # row, as model_copy(update=) of a row read from the database keeps the stored values
            outcome(type(current)(**(current.model_dump() | {"status": status, "error": error})))
        elif status == CANCELLED:
            st.warning(f"Cancelled — {md(error or 'stopped', inline=False)}. Everything it completed is kept.")
        elif status != FINISHED and _demo_miss(error):
            # Demo mode, a request the recording lacks: a notice with the recorded input, no red, no half view.
            demo.miss_notice(demo.page_of_kind(run.kind), key=key + ".use_recorded")
        elif status != FINISHED:
            st.error(f"Run {md(status)} — {md(error, inline=False)}")
        if status in (RUNNING, FINISHED, CANCELLED) or not _demo_miss(error):
            render(view, status == RUNNING)
        if live_at_start and status != RUNNING:
            st.rerun()  # the run ended: one full rerun, after which this fragment no longer refreshes

    watching()
    cache = st.session_state.get(key + ".fold")
    return cache["view"] if isinstance(cache, dict) else None


def _unrecorded_end(run_id: str) -> str | None:
    """Why a run this process ran has ended although the store still says `running` — its end could not be
    written (the database file was deleted or replaced meanwhile) — or None."""
    live = state.get_registry().get(run_id)
    if live is None or not live.done or live.future.cancelled():
        return None
    exc = live.future.exception()
    return None if exc is None else str(exc)


def _returning(run_id: str) -> bool:
    """This process runs `run_id` and its entry point has not returned yet, although the run's end may be stored
    already (the entry point records it, then returns). A page that shows the return value of a finished run
    (`live_result`: a simulation's timeline) would otherwise draw the stored summary alone and never look again.
    A cancelled or failed run is shown as stored at once: no page needs its return value."""
    return state.get_registry().is_live(run_id)


def _demo_miss(error: str | None) -> bool:
    """A run that failed on a request outside the demo recording, while demo mode is on."""
    return demo.enabled() and demo.is_miss(error)


# -- runs a page starts and shows once done ----------------------------------------------------------------------


class Collected:
    """A generic fold: every event of the run in order, and its summary once it has finished (the entry
    points store their result as ``summary["result"]``, which is what the page then shows)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.summary: dict[str, Any] | None = None

    def apply(self, type_: str, payload: Any) -> None:
        if type_ == "run_finished":
            self.summary = dict(payload.get("summary") or {})
        else:
            self.events.append((type_, payload))

    def of(self, type_: str) -> list[Any]:
        return [p for t, p in self.events if t == type_]

    @property
    def result(self) -> Any:
        return None if self.summary is None else self.summary.get("result")


def watched_run(param: str, key: str) -> str | None:
    """The run a page section shows: the URL's (a reload, a shared link, a second tab), else this session's
    last one (a return visit), which is put back into the URL."""
    run_id = url_run(param) or st.session_state.get(key)
    if run_id:
        st.session_state[key] = run_id
        set_url_run(run_id, param)
    return run_id


def start_watched(kind: str, config: Any, entry: Callable[[], Any], *, param: str, key: str) -> str | None:
    """Start `entry` in the registry (or attach to the identical run still going) and return its id at once,
    kept in the session under `key` and in the URL under `param`. A run that cannot start leaves its reason
    under ``key + ".error"`` (shown by `start_error`). Nothing here waits on a model."""

    st.session_state[key + ".error"] = None
    try:
        run_id = state.get_registry().start(kind, config, entry)
    except RegistryError as exc:  # e.g. an unknown character, a database that refused the run
        st.session_state[key + ".error"] = str(exc)
        return None
    st.session_state[key] = run_id
    # A page restores a form from a run on first sight of it (a reload, a shared link: `formstate.restore_from`). This
    # run was started from the form as it is, so it is seen already: the next rerun (an example button, a slider)
    # must not put its settings back over what the user changes next.
    form.shown(key, run_id)
    set_url_run(run_id, param)
    state.clear_reads()
    return run_id


def start_error(key: str) -> None:
    if st.session_state.get(key + ".error"):
        st.error(md(st.session_state[key + ".error"], inline=False))


def is_live(run_id: str | None) -> bool:
    """The run is still going (in this process, or in another one that stores it as running)."""
    if not run_id:
        return False
    if state.get_registry().is_live(run_id):
        return True
    run = state.get_store().get_run(run_id)
    return run is not None and run.status == RUNNING


def live_result(run_id: str) -> Any:
    """The entry point's return value when this process ran `run_id` and it finished (richer than the stored
    summary: e.g. a simulation's timeline); None otherwise."""
    live = state.get_registry().get(run_id)
    if live is None or not live.done or live.future.cancelled() or live.future.exception() is not None:
        return None
    return live.future.result()
