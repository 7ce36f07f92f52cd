"""Thin cached accessors: every page reaches the store, the models and the loop through these."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import demo_hub
from dashboard.background import BackgroundLoop
from dashboard.live_runs import RunRegistry
from dashboard.text import md
from engine.config import get_settings
from engine.demo import load_manifest
from engine.embeddings import get_embedder
from engine.history import (
    EXPERIMENT_KIND,
    count_turns,
    display_names,
    experiment_line,
    experiment_of,
    left_open,
    status_words,
)
from engine.store import Run, RunFilter, Store, StoreError
from engine.store.connection import RESTART
from models.backends import llamacpp
from models.catalog import Catalog, load_catalog
from models.registry import Availability, ModelHub, check_all


def get_store() -> Store:
    """The store of the configured database (one per URL, so changing JUDGELAB_DATABASE_URL works)."""
    return _store_for(get_settings().resolved_database_url)


@st.cache_resource(show_spinner=False)
def _store_for(url: str) -> Store:
    return Store(url)


def store_notice() -> None:
    """At the top of every page: why the store cannot be opened, or that its file was deleted or replaced since
    it was (every write is then refused; the connections already open read on, so the pages show what it held)."""
    try:  # opening the store at start marks runs whose process died as interrupted
        store = get_store()
    except StoreError as exc:
        st.error(str(exc))
        return
    if (gone := store.file_problem()) is not None:
        st.error(md(f"{gone}: pages show what it held, and nothing more can be recorded — {RESTART}"))


@st.cache_resource(show_spinner=False)
def get_loop() -> BackgroundLoop:
    return BackgroundLoop()


def get_registry() -> RunRegistry:
    """The process's run registry for the configured database: runs started here outlive the page."""
    return _registry_for(get_settings().resolved_database_url)


@st.cache_resource(show_spinner=False)
def _registry_for(url: str) -> RunRegistry:
    return RunRegistry(get_loop(), _store_for(url))


@st.cache_resource(show_spinner=False)
def get_catalog(path: str | None = None) -> Catalog:
    return load_catalog(path)


def demo_mode() -> bool:
    """Demo mode (sidebar switch or JUDGELAB_DEMO=1): every model answers from the recorded demo runs."""
    return demo_hub.enabled()


def get_hub() -> ModelHub:
    """The models of every page; in demo mode each is `build_model(spec, replay_from=store)`, never live."""
    url = get_settings().resolved_database_url
    return _demo_hub_for(url) if demo_mode() else _hub_for(url)


@st.cache_resource(show_spinner="Loading the demo recording…")
def _demo_hub_for(url: str) -> ModelHub:
    hub = demo_hub.demo_hub(get_catalog(), _store_for(url))
    clear_reads()
    return hub


@st.cache_resource(show_spinner=False)
def _hub_for(url: str) -> ModelHub:
    return ModelHub(get_catalog(), call_log=_store_for(url))


def get_availability() -> dict[str, Availability]:
    """Which models can be used now; in demo mode, the model whose answers were recorded."""
    if demo_mode():
        get_hub()  # the demo runs are loaded before a page offers them
        return demo_hub.availability(get_catalog(), load_manifest())
    return _live_availability(tuple(get_catalog().ids))


@st.cache_resource(show_spinner=False)
def _probe_loop() -> BackgroundLoop:
    """The availability probes' own loop: a run that keeps the run loop busy never makes a page wait on them."""
    return BackgroundLoop()


PROBE_TIMEOUT_S = 10.0


def _live_availability(model_ids: tuple[str, ...] = ()) -> dict[str, Availability]:
    """Which models can run now. A check that does not answer within `PROBE_TIMEOUT_S` (a machine too busy, a
    server that hangs) makes every model "not checked" for this rerun, never an error on the page."""
    try:
        return _checked_availability(model_ids)
    except TimeoutError:
        reason = f"the availability check gave no answer within {PROBE_TIMEOUT_S:.0f} s: reload the page to check again"
        return {model_id: Availability(model_id, False, reason) for model_id in model_ids}


@st.cache_data(ttl=15, show_spinner=False)
def _checked_availability(model_ids: tuple[str, ...] = ()) -> dict[str, Availability]:
    """Keyed by the catalog's ids: a catalog that changed (another file, an added model) is checked anew, never
    answered from the last one's cache. A timeout raises, so it is never cached."""
    results = _probe_loop().run(check_all(get_catalog()), timeout=PROBE_TIMEOUT_S)
    return {a.model_id: a for a in results}


get_availability.clear = _checked_availability.clear  # type: ignore[attr-defined]  # callers refresh it so


def list_runs(kind: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    return _list_runs(get_settings().resolved_database_url, kind, limit)


@st.cache_data(ttl=2, show_spinner=False)
def _list_runs(url: str, kind: str | None, limit: int) -> list[dict[str, Any]]:
    store = _store_for(url)
    return _rows(store, store.list_runs(kind=kind, limit=limit))


def _rows(store: Store, runs: list[Run]) -> list[dict[str, Any]]:

    totals = store.run_totals([r.id for r in runs])
    tags = store.tags([r.id for r in runs])
    names = display_names(store, runs)
    turns = count_turns(store, runs)
    rows = []
    for r in runs:
        t = totals.get(r.id, {})
        rows.append(
            {
                "run": r.id,
                "name": names[r.id],
                "stored_name": r.name,
                "experiment": experiment_of(r),
                "cells": experiment_line(r) if r.kind == EXPERIMENT_KIND else "",
                "kind": r.kind,
                "status": status_words(r, turns.get(r.id, 0)),
                "tags": tags.get(r.id, []),
                "started": r.started_at,
                "duration_s": r.duration_s,
                "calls": int(t.get("calls", 0)),
                "errors": int(t.get("errors", 0)),
                "tokens": int(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0)),
                "cost_usd": float(t.get("cost", 0.0)),
                "would_cost_usd": t.get("would_cost"),
                "error": None if left_open(r) else r.error,  # closing an open conversation is no error
                "config_hash": r.config_hash,
            }
        )
    return rows


def search_runs(where: RunFilter, limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
    """How many runs match, and one page of them (newest first) as table rows."""
    return _search_runs(get_settings().resolved_database_url, where, limit, offset)


@st.cache_data(ttl=2, show_spinner=False)
def _search_runs(url: str, where: RunFilter, limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
    store = _store_for(url)
    return store.count_runs(where), _rows(store, store.search_runs(where, limit=limit, offset=offset))


def filter_choices() -> dict[str, list[str]]:
    """What the history can be filtered by: the kinds, models and tags that occur."""
    return _filter_choices(get_settings().resolved_database_url)


@st.cache_data(ttl=5, show_spinner=False)
def _filter_choices(url: str) -> dict[str, list[str]]:
    store = _store_for(url)
    return {"kinds": store.run_kinds(), "models": store.call_models(), "tags": store.all_tags()}


def clear_reads() -> None:
    """Callbacks call this after a write so the next render reads fresh data."""
    _list_runs.clear()
    _search_runs.clear()
    _filter_choices.clear()


@st.cache_resource(show_spinner="Loading the local model and the embedder…")
def preload() -> str:
    """Load the bundled Gemma and the MiniLM embedder (JUDGELAB_PRELOAD=1, used by the memory bench)."""
    llamacpp.load_llama(llamacpp.bundled_model_path())
    get_embedder().embed(["warm up"])
    return "Local model and embedder loaded"
