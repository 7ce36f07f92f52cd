"""Pages watch runs; they don't wait for them.

`watch_run(run_id, fold, render)` is a fragment that re-runs on its own every `every_s` while the run is
live: it folds the events stored since the last look (``Store.events(run_id, after_seq)``) into the
page's view, renders it, and shows the run's progress (done / total, step, ETA) with a Cancel button. Once
the run has ended it stops refreshing (one full rerun, so the rest of the page sees the final state).

The run id lives in the URL (`url_run` / `set_url_run`), so a reload, a return visit or a second tab
re-attaches to the live run. Nothing here waits on a model: every read is a store query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import streamlit as st

from dashboard import state
from dashboard.components import md
from engine.store import CANCELLED, FINISHED, RUNNING


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
    """'3 / 10 · discussion round 1 · 12 s elapsed · about 28 s left' from a progress dict."""
    if not progress:
        return "starting…"
    done, total = progress.get("done") or 0, progress.get("total")
    parts = [f"{done} / {total}" if total else f"{done} done"]
    if progress.get("step"):
        parts.append(str(progress["step"]))
    if progress.get("elapsed_s") is not None:
        parts.append(f"{float(progress['elapsed_s']):.0f} s elapsed")
    eta = progress.get("eta_s")
    parts.append("ETA after the first step" if eta is None else f"about {float(eta):.0f} s left")
    return " · ".join(parts)


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


def render_progress(run_id: str, key: str) -> None:
    """The progress bar with counts and ETA, and Cancel (only where this process runs it)."""
    registry = state.get_registry()
    progress = registry.progress(run_id)
    fraction = 0.0
    if progress and progress.get("total"):
        fraction = min(1.0, float(progress.get("done") or 0) / float(progress["total"]))
    bar, button = st.columns([5, 1])
    bar.progress(fraction, text=md(eta_text(progress)))
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
    run_id: str, fold: Callable[[], V], render: Callable[[V, bool], None], *, key: str, every_s: float = 0.5
) -> V | None:
    """Show `run_id` live: fold its events with `fold()` (a fresh view with ``apply(type, payload)``) and
    `render(view, live)`; progress and Cancel while it runs; stop refreshing once it has ended. Returns
    the view as of this script run (None when there is no such run)."""
    store = state.get_store()
    run = store.get_run(run_id)
    if run is None:
        st.warning(f"No run {md(run_id)} in this database.")
        return None
    live_at_start = run.status == RUNNING

    @st.fragment(run_every=every_s if live_at_start else None)
    def watching() -> None:
        current = store.get_run(run_id)
        status = current.status if current is not None else RUNNING
        view = fold_events(run_id, fold, key + ".fold")
        if status == RUNNING:
            render_progress(run_id, key)
        elif status == CANCELLED:
            st.warning(
                f"Cancelled — {md((current.error if current else '') or 'stopped', inline=False)}. "
                "Everything it completed is kept."
            )
        elif status != FINISHED:
            st.error(f"Run {md(status)} — {md((current.error if current else '') or '', inline=False)}")
        render(view, status == RUNNING)
        if live_at_start and status != RUNNING:
            st.rerun()  # the run ended: one full rerun, after which this fragment no longer refreshes

    watching()
    cache = st.session_state.get(key + ".fold")
    return cache["view"] if isinstance(cache, dict) else None
