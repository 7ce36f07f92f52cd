"""`judgelab demo record`: record the demo runs with the bundled model, through the entry points the pages call,
with the settings the pages start with (so a presenter who clicks through with the defaults replays them).

Each page is recorded by its flow: the Models page's here, each mechanism's the one its `MechanismUI.demo` names
(`engine/<mechanism>/demo.py`, or `dashboard/demo_flows/` for one that speaks the dashboard's words), in the
demo's order. They record into a throw-away SQLite store; the runs
are written to `data/demo/runs.jsonl` and what was recorded per page to `data/demo/manifest.json`. Inputs are tried
in order until one shows what the demo is for (raised hands, position changes, retries); the manifest notes when
none did.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dashboard.mechanism_ui import MODELS_PAGE
from dashboard.ui_registry import demo_flows
from engine.demo import (
    MANIFEST_FILE,
    MODEL,
    RUNS_FILE,
    DemoManifest,
    PageDemo,
    export_runs,
    load_manifest,
    read_runs,
    recording_hub,
    write_runs,
)
from engine.modelruns import stream_prompt
from engine.store import Store
from models.base import ChatModel
from models.probe import FREE_MESSAGES, FREE_TEXT
from models.types import Message

MODELS_MAX_TOKENS = 256  # the Models page's default token budget
MODELS_MODEL = "smollm2-135m"  # the Models page opens on the instruction-tuned model (the base model continues text)


def models_prefill() -> dict[str, Any]:
    """The Models page's prompt box as it opens (its default system prompt and prompt, free text, temperature 0),
    with the recorded model picked: the widget values that replay the recorded prompt."""

    return {
        "models.model": MODELS_MODEL,
        "models.system": FREE_MESSAGES[0].content,  # the page's defaults (pages/models.py)
        "models.prompt": FREE_MESSAGES[1].content,
        "models.output": FREE_TEXT,
        "models.temperature": 0.0,
        "models.max_tokens": MODELS_MAX_TOKENS,
    }


async def record_models(store: Store) -> tuple[str, dict[str, Any]]:
    """The Models page's Send with its defaults: one `models.prompt` run streaming the default prompt, the request
    the page makes (`engine.modelruns.stream_prompt`, the entry point the page calls)."""

    values = models_prefill()
    messages = [
        Message(role="system", content=values["models.system"]),
        Message(role="user", content=values["models.prompt"]),
    ]
    text, run_id = "", ""
    model = recording_hub(store)(MODELS_MODEL)
    streamed = stream_prompt(store, model, MODELS_MODEL, messages, values["models.output"], 0.0, MODELS_MAX_TOKENS)
    async for kind, value in streamed:
        if kind == "run":
            run_id = value
        else:
            text += value.text or ""
    return run_id, {"chars": len(text)}


def record_models_page(store: Store) -> PageDemo:
    """The Models page's demo (not a mechanism's page: its flow is built in)."""

    run_id, facts = asyncio.run(record_models(store))
    return PageDemo(
        title="Models (try a model)",
        inputs=[models_prefill()["models.prompt"]],
        run_ids=[run_id],
        prefill=models_prefill(),
        note=f"Send the prefilled prompt to {MODELS_MODEL} ({facts['chars']} characters answered when recorded).",
    )


def page_flows() -> dict[str, Callable[[Store], PageDemo]]:
    """Every page the demo records, in its order: the Models page, then each registered mechanism's page."""
    return {MODELS_PAGE: record_models_page, **demo_flows()}


def record(folder: Path, only: set[str] | None = None) -> DemoManifest:
    """Record every page's demo run (or only those named) and write the demo files; pages not recorded again keep
    their earlier runs. The process's cached baselines are as they were afterwards."""

    saved = dict(ChatModel._BASELINES)
    try:
        return _record(folder, only)
    finally:
        ChatModel._BASELINES.clear()
        ChatModel._BASELINES.update(saved)


def _record(folder: Path, only: set[str] | None) -> DemoManifest:

    pages: dict[str, PageDemo] = {}
    documents: dict[str, dict[str, Any]] = {}
    if only and (folder / MANIFEST_FILE).is_file():
        pages = dict(load_manifest(folder).pages)
        documents = {d["run"]["id"]: d for d in read_runs(folder / RUNS_FILE)}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/demo.db")
        for page, flow in page_flows().items():
            if not only or page in only:
                pages[page] = flow(store)
        kept = {r for p in pages.values() for r in p.run_ids}
        fresh = {d["run"]["id"]: d for d in export_runs(store, sorted(kept - set(documents)))}
        store.dispose()
    documents.update(fresh)
    manifest = DemoManifest(
        model_id=MODEL,
        models=[MODEL, MODELS_MODEL],
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        pages=pages,
    )
    write_runs([documents[r] for p in pages.values() for r in p.run_ids], folder / RUNS_FILE)
    (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return manifest
