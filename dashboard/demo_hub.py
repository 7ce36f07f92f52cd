"""Demo mode's model side, below the page state: whether demo mode is on (the sidebar switch, else
JUDGELAB_DEMO=1) and the hub whose every model answers from the recorded demo runs (`data/demo/`) through the
replay backend, never live. `dashboard.state` builds its hub from here; the sidebar and the notices of
`dashboard.demo` build on the state."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from engine.demo import DemoManifest, load_demo, load_manifest, miss_message
from engine.store import Store
from models.base import ChatModel
from models.catalog import Catalog
from models.registry import Availability, ModelHub, build_model

ENV = "JUDGELAB_DEMO"
SWITCH = "demo.on"


def env_on() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def enabled() -> bool:
    """The sidebar switch once it has been drawn, else JUDGELAB_DEMO."""
    return bool(st.session_state.get(SWITCH, env_on()))


class DemoHub(ModelHub):
    """A hub whose every model is `build_model(spec, replay_from=store)`: recorded answers only."""

    def __init__(self, catalog: Catalog, store: Store, manifest: DemoManifest) -> None:
        super().__init__(catalog, call_log=store)
        self.manifest = manifest

    def get(self, model_id: str, *, replay: bool = False, delay_s: float = 0.0, fallthrough: bool = False) -> ChatModel:
        key = (model_id, True, 0.0, False)  # whatever a page asks for: replay, never live
        if key not in self._models:
            model = build_model(self.catalog.get(model_id), call_log=self.call_log, replay_from=self.call_log)
            model.miss_hint = lambda purpose: miss_message(purpose, self.manifest)  # type: ignore[attr-defined]
            self._models[key] = model
        return self._models[key]


def demo_hub(catalog: Catalog, store: Store, folder: Path | None = None) -> DemoHub:
    """The demo hub over `store`, with the demo runs loaded into it first when they are not there yet."""
    manifest = load_manifest(folder)
    load_demo(store, folder)
    return DemoHub(catalog, store, manifest)


def availability(catalog: Catalog, manifest: DemoManifest) -> dict[str, Availability]:
    """In demo mode a model can be picked when its answers were recorded."""
    recorded = manifest.recorded_models
    return {
        m: Availability(m, m in recorded, "recorded for the demo" if m in recorded else "not recorded for the demo")
        for m in catalog.ids
    }
