"""The Labels page's import: an uploaded file of labels imported as a run the page watches (progress, Cancel), then
what it did or the first bad lines."""

from __future__ import annotations

import hashlib
import re
from functools import partial
from typing import Any, Literal

import streamlit as st

from dashboard import state
from dashboard.components import md
from dashboard.watch import Collected, start_error, start_watched, watch_run, watched_run
from engine.inputs import InputError, read_upload
from engine.labels import (
    run_import,
)
from engine.labels.io import KIND as IMPORT_KIND
from engine.store import CANCELLED

KEY = "labels."  # the Labels page's keys (pages/labels.py): the import is part of that page


IMPORT_RUN = KEY + "l.run"  # the import run this session watches (also in the URL, as ?import=)


def upload_name(name: str) -> str:
    """An uploaded file's own name, never a folder a browser or a test put before it."""
    return name.replace("\\", "/").rsplit("/", 1)[-1] or "upload"


def handle_import(name: str, data: bytes) -> str | None:
    """Import an uploaded file of labels as a run the page watches (progress in rows, Cancel): nothing is written
    unless every row is good, and a label already stored is not stored again. Returns the run's id."""
    name = upload_name(name)
    fmt: Literal["jsonl", "csv"] = "csv" if name.lower().endswith(".csv") else "jsonl"
    st.session_state[IMPORT_RUN + ".error"] = None
    try:
        text = read_upload(name, data)
    except InputError as exc:  # too large, not UTF-8: one line naming the file
        st.session_state[IMPORT_RUN + ".error"] = f"Nothing imported: {exc}"
        return None
    config = {"source": name, "format": fmt, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16]}
    store = state.get_store()
    run_id = start_watched(
        IMPORT_KIND, config, partial(run_import, store, text, fmt, name), param="import", key=IMPORT_RUN
    )
    if run_id is None:  # it could not start (the database refused its run): one line, in the import's words
        why = str(st.session_state.get(IMPORT_RUN + ".error") or "")
        st.session_state[IMPORT_RUN + ".error"] = f"Nothing imported: {_reason(why.split(' could not start: ')[-1])}"
    return run_id


def render_import() -> None:
    """The import this session started (or the URL names): its progress and Cancel while it goes, then what it
    did, or the first bad lines and how many more."""
    start_error(IMPORT_RUN)
    run_id = watched_run("import", IMPORT_RUN)
    if not run_id:
        return
    run = state.get_store().get_run(run_id)
    if run is None or run.kind != IMPORT_KIND:
        return
    watch_run(run_id, Collected, _render_import, key=KEY + "l.watch", outcome=_import_outcome)


def _render_import(view: Collected, live: bool) -> None:
    if live:
        st.caption("Checking every row, then writing them all at once: Cancel before the end writes nothing.")
        return
    result = view.result
    if not isinstance(result, dict) or view.summary is None:
        return
    name = str(view.events[0][1].get("name") or "") if view.events else ""
    imported, present = int(result.get("imported", 0) or 0), int(result.get("already_present", 0) or 0)
    st.success(f"{md(name)}: {imported:,} imported, {present:,} already present.")


def _import_outcome(run: Any) -> None:
    """An import that did not finish: cancelled (nothing written), or refused with its bad lines."""
    if run.status == CANCELLED:
        name = str(run.config.get("source") or "the file")
        st.warning(f"Import of {md(name)} cancelled: nothing was imported (an import writes all its labels or none).")
        return
    result = run.summary.get("result") if isinstance(run.summary, dict) else None
    problems = result.get("problems") if isinstance(result, dict) else None
    if problems:
        lines = "\n".join(f"- {md(str(p))}" for p in problems)
        st.error(f"Nothing imported — fix these lines:\n\n{lines}")
        return
    st.error(f"Nothing imported: {md(_reason(str(run.error or run.status)))}")


def _reason(error: str) -> str:
    """An error's first line without its exception's name ('StoreError: the database …' → 'the database …')."""
    reason = re.sub(r"^[A-Za-z]+(Error|Exception|Cancelled): ", "", error.strip())
    return reason.splitlines()[0] if reason else "it did not finish"
