"""The dashboard's mechanism registry: every `MechanismUI` (`dashboard.mechanism_ui`), listed in one order,
registration order (the engine's, `engine.registry`).

The built-in entries are registered when this module is imported (`BUILTIN`, each mechanism's CLI module's `UI`);
anything else (a test's toy mechanism) calls `register_ui`.
"""

from __future__ import annotations

from dashboard.mechanism_ui import MODELS_PAGE, DemoFlow, MechanismUI
from dashboard.mechanisms.confidence import cli as confidence
from dashboard.mechanisms.director import cli as director
from dashboard.mechanisms.handraise import cli as handraise
from dashboard.mechanisms.jury import cli as jury
from dashboard.mechanisms.skip import cli as skip
from engine.registry import mechanism_spec

BUILTIN = (handraise.UI, skip.UI, jury.UI, director.UI, confidence.UI)  # the plugin table, in the engine's order

_UIS: dict[str, MechanismUI] = {}


def register_ui(ui: MechanismUI) -> MechanismUI:
    """Add a mechanism's dashboard entry (again: the same name replaces the old one); returns it."""
    _UIS[ui.name] = ui
    return ui


def unregister_ui(name: str) -> None:
    _UIS.pop(name, None)


def uis() -> list[MechanismUI]:
    """Every registered entry, in registration order."""
    return list(_UIS.values())


def ui(name: str) -> MechanismUI:
    try:
        return _UIS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; one of {', '.join(_UIS)}") from None


def demo_flows() -> dict[str, DemoFlow]:
    """Each registered mechanism's demo page (`MechanismSpec.demo_page`) and the flow that records it
    (`MechanismUI.demo`, loaded here), in registration order."""
    return {mechanism_spec(u.name).demo_page: u.demo() for u in uis() if u.demo}


def demo_pages() -> tuple[str, ...]:
    """Every page `judgelab demo record` records, in its order: the Models page, then each mechanism's."""
    return (MODELS_PAGE, *(mechanism_spec(u.name).demo_page for u in uis() if u.demo))


for _ui in BUILTIN:
    register_ui(_ui)
