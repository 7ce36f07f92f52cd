"""The dashboard's side of the mechanism registry: one `MechanismUI` per mechanism (its page, CLI sub-app, report
figures, calibration job, demo flow and the words of its labels), beside the engine's `MechanismSpec` of the same
name (`engine.mechanism`). The app's navigation, the `judgelab` command, the run report, `calibrate-judge`, `demo
record`, the label buttons, the Labels page and the page benchmark loop over it.

A mechanism's CLI module, `dashboard/commands/<name>.py`, registers its entry (`register_ui`); this module imports
it for every mechanism of the engine's registry. Pages and figures are named by ``"module:attribute"`` references,
resolved when used, so the CLI starts without Streamlit. Surfaces with an order of their own
sort by `MechanismUI.order[surface]` ("nav", "cli", "figures", "calibrate", "demo"), as `engine.mechanism` does.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.mechanism import mechanism_names, mechanism_spec

MODELS_PAGE = "models"  # the demo's one page that is no mechanism's: its flow is built in (`dashboard.demo_record`)


@dataclass(frozen=True)
class LabelWords:
    """The words of a mechanism's labels on the pages (`dashboard.labelling`, the Labels page); the values are the
    engine's (`LabelSpec.values`).

    - `title`: the mechanism on the Labels page, "Jury (the right verdict)" (a table shows the part before " (");
    - `buttons`: value → the words on its button ("Should speak"); `answers`: value → a short answer for tables
      and "the judge said …" ("speak"); a value without words is shown with its underscores as spaces;
    - `words` ("module:function", value → words): an open vocabulary's values in words (the jury's verdicts),
      and `choices` its default buttons where an item names none;
    - `question`: asked over a queue item whose context names a participant (``{participant}``, markdown); the
      item is then shown by its context's text;
    - `usable`: its labels a refit can learn from, counted beside the refit button ("usable hand labels"), and
      `usable_why` why some are not ("only hands judged by the likelihood judge …"; "": nothing said)."""

    title: str
    buttons: Mapping[str, str] = field(default_factory=dict)
    answers: Mapping[str, str] = field(default_factory=dict)
    words: str = ""
    choices: tuple[str, ...] = ()
    question: str = ""
    usable: str = "usable labels"
    usable_why: str = ""


@dataclass(frozen=True)
class MechanismUI:
    """What the dashboard needs to know about one mechanism.

    - `page` ("module:function") renders its page, shown in the navigation as `title` with `icon` at `url_path`;
    - `cli` ("module:attribute") is its Typer sub-app, `judgelab <name> …`;
    - `figures`: the run report's chart builders ("module:function" taking a `RunRecord`);
    - `calibration_split` (a file under data/calibration/) and `calibration_job` ("module:function",
      `(data, model_id, limit)` → `RefitJob`): its judge maps' refit in `judgelab calibrate-judge`;
    - `labels`: the words of its labels (None: shown as the values are written);
    - `demo` ("module:function", `(store)` → `PageDemo`): records its page's demo run (`judgelab demo record`),
      kept under its `MechanismSpec.demo_page`; empty, the demo has no run of its page."""

    name: str
    page: str
    title: str
    icon: str
    url_path: str
    cli: str = ""
    figures: tuple[str, ...] = ()
    calibration_split: str = ""
    calibration_job: str = ""
    order: Mapping[str, int] = field(default_factory=dict)
    labels: LabelWords | None = None
    demo: str = ""


_UIS: dict[str, MechanismUI] = {}
_TRIED: set[str] = set()


def _load_builtin() -> None:
    """Each registered mechanism's CLI module, `dashboard.commands.<name>`, registers its entry when imported."""
    for name in mechanism_names():
        if name in _TRIED:
            continue
        _TRIED.add(name)
        module = f"dashboard.commands.{name}"
        if name not in _UIS and importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


def register_ui(ui: MechanismUI) -> MechanismUI:
    """Add a mechanism's dashboard entry (again: the same name replaces the old one); returns it."""
    _UIS[ui.name] = ui
    return ui


def unregister_ui(name: str) -> None:
    _UIS.pop(name, None)


def uis(surface: str | None = None) -> list[MechanismUI]:
    """Every registered entry: in registration order, or in `surface`'s order (unplaced ones last)."""
    _load_builtin()
    found = list(_UIS.values())
    if surface is None:
        return found
    return sorted(found, key=lambda u: u.order.get(surface, len(found) + found.index(u)))


def ui(name: str) -> MechanismUI:
    _load_builtin()
    try:
        return _UIS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; one of {', '.join(_UIS)}") from None


def demo_flows() -> dict[str, str]:
    """Each registered mechanism's demo page (`MechanismSpec.demo_page`) and the flow that records it
    (`MechanismUI.demo`), in the demo's order."""
    return {mechanism_spec(u.name).demo_page: u.demo for u in uis("demo") if u.demo}


def demo_pages() -> tuple[str, ...]:
    """Every page `judgelab demo record` records, in its order: the Models page, then each mechanism's."""
    return (MODELS_PAGE, *demo_flows())
