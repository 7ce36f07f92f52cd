"""A tab's run: started in the registry and watched from the URL (a run with no model call given the moment it needs),
and the tab's export box once it has ended."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import streamlit as st

from dashboard import state
from dashboard.components import export_buttons
from dashboard.mechanisms.director.fields import KEY
from dashboard.watch import is_live, start_watched


def start_run(
    kind: str, config: Any, entry: Callable[[Any, Any, Any], Any], param: str, key: str, *, settle: bool = False
) -> str | None:
    """`entry(config, models, store)` started in the registry as a `kind` run that the page watches (its id in
    the URL at `param`). With `settle`, a run that makes no model call is given the moment it needs (at most a
    second), so its result shows with this click."""
    hub, store = state.get_hub(), state.get_store()
    run_id = start_watched(
        kind, config.model_dump(mode="json"), lambda: entry(config, hub.get, store), param=param, key=key
    )
    if run_id and settle:
        _settle(run_id, 1.0)
    return run_id


def _settle(run_id: str, timeout_s: float) -> None:
    """Give a run that makes no model call the moment it needs (bounded), so its result shows at once."""
    live = state.get_registry().get(run_id)
    if live is not None:
        concurrent.futures.wait([live.future], timeout=timeout_s)


def export_tab(run_key: str, name: str) -> None:
    """A tab's export box names that tab's own run (once ended): the Check tab exports its check, never the
    batch another tab recorded."""
    run_id = st.session_state.get(run_key)
    if run_id and not is_live(run_id):
        export_buttons(state.get_store(), run_id, key=f"{KEY}export.{name}")
