"""A toy mechanism, the shape a new one takes (docs/adding-a-mechanism.md): an experiment adapter, an export
table, a scorecard role, labels, a CLI sub-app, a page and a demo flow, registered in both registries by `register()`
(the test's fixture) instead of `engine.mechanism.BUILTIN` and `dashboard/commands/toy.py`."""

from __future__ import annotations

from dashboard.ui_registry import register_ui, unregister_ui
from engine.registry import register_mechanism, unregister_mechanism
from tests.toymech.spec import SPEC, UI


def register() -> None:
    register_mechanism(SPEC)
    register_ui(UI)


def unregister() -> None:
    unregister_mechanism(SPEC.name)
    unregister_ui(UI.name)
