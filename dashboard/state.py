"""Thin cached accessors: every page reaches the store, the models and the loop through these."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard.registry import RunRegistry
from dashboard.runner import BackgroundLoop
from engine.config import get_settings
from engine.store import Store
from models.catalog import Catalog, load_catalog
from models.registry import Availability, ModelHub, check_all


def get_store() -> Store:
    """The store of the configured database (one per URL, so changing JUDGELAB_DATABASE_URL works)."""
    return _store_for(get_settings().resolved_database_url)


@st.cache_resource(show_spinner=False)
def _store_for(url: str) -> Store:
    return Store(url)


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


def get_hub() -> ModelHub:
    return _hub_for(get_settings().resolved_database_url)


@st.cache_resource(show_spinner=False)
def _hub_for(url: str) -> ModelHub:
    return ModelHub(get_catalog(), call_log=_store_for(url))


@st.cache_data(ttl=15, show_spinner=False)
def get_availability() -> dict[str, Availability]:
    results = get_loop().run(check_all(get_catalog()), timeout=10)
    return {a.model_id: a for a in results}


def list_runs(kind: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    return _list_runs(get_settings().resolved_database_url, kind, limit)


@st.cache_data(ttl=2, show_spinner=False)
def _list_runs(url: str, kind: str | None, limit: int) -> list[dict[str, Any]]:
    store = _store_for(url)
    runs = store.list_runs(kind=kind, limit=limit)
    totals = store.run_totals([r.id for r in runs])
    rows = []
    for r in runs:
        t = totals.get(r.id, {})
        rows.append(
            {
                "run": r.id, "kind": r.kind, "status": r.status, "started": r.started_at,
                "duration_s": r.duration_s, "calls": int(t.get("calls", 0)), "errors": int(t.get("errors", 0)),
                "tokens": int(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0)),
                "cost_usd": float(t.get("cost", 0.0)), "would_cost_usd": t.get("would_cost"), "error": r.error,
            }
        )
    return rows


def clear_reads() -> None:
    """Callbacks call this after a write so the next render reads fresh data."""
    _list_runs.clear()


@st.cache_resource(show_spinner="Loading the local model and the embedder…")
def preload() -> str:
    """Load the bundled Gemma and the MiniLM embedder (JUDGELAB_PRELOAD=1, used by the memory bench)."""
    from engine.embeddings import get_embedder
    from models.backends.llamacpp import bundled_model_path, load_llama

    load_llama(bundled_model_path())
    get_embedder().embed(["warm up"])
    return "Local model and embedder loaded"
