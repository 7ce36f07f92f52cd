"""The Director lab's form: its session-state keys and the URL names of its runs, the widgets' first values, and the
settings a run re-attached from the URL puts back into its tab's form."""

from __future__ import annotations

from typing import Any

from dashboard import formstate as form
from dashboard import state
from dashboard.watch import watched_run
from engine.director.dialogue import DuoConfig

KEY = "director."
# The runs this page shows live in the URL under these names, so a reload or a second tab re-attaches.
CHECK_PARAM, BATCH_PARAM, DUO_PARAM = "check", "batch", "duo"
CHECK_RUN, BATCH_RUN, DUO_RUN = KEY + "check_run", KEY + "batch_run", KEY + "duo_run_id"


RUBRIC_JUDGES = ["signals", "generate", "likelihood"]


DUO_DEFAULTS: dict[str, Any] = {
    "duo_topic": "夏の思い出",
    "duo_scene": "海辺の散歩",
    "duo_turns": 4,
    "duo_retries": 2,
    "duo_policy": "mark",
    "duo_rubric": False,
}


def init_state(profiles: dict[str, Any]) -> None:
    """The widgets' first values, here rather than in the widgets, so a reload can put a run's settings in."""
    names = list(profiles)
    form.default(KEY + "character", "yana" if "yana" in names else names[0] if names else None)
    form.default(KEY + "line", "えー、ほんと？海って気持ちいいわ！")
    form.default(KEY + "scene", "海辺の散歩")
    form.default(KEY + "use_rubric", False)
    form.default(KEY + "duo_first", "yana" if "yana" in names else names[0] if names else None)
    form.default(KEY + "duo_second", "ayu" if "ayu" in names else names[0] if names else None)
    for name, value in DUO_DEFAULTS.items():
        form.default(KEY + name, value)


def restore_forms(profiles: dict[str, Any]) -> None:
    """On first sight of each run in the URL (a reload, a shared link), its tab's form takes its settings
    before a widget is drawn, so the next click runs the same check, batch or dialogue, not the defaults."""
    for param, key in ((CHECK_PARAM, CHECK_RUN), (BATCH_PARAM, BATCH_RUN), (DUO_PARAM, DUO_RUN)):
        form.restore_from(key, watched_run(param, key), lambda run_id: restore_form(run_id, profiles))


def _usable(model_id: Any) -> bool:
    availability = state.get_availability().get(str(model_id))
    return availability is not None and availability.available


def restore_form(run_id: str, profiles: dict[str, Any]) -> None:
    """Put a stored director run's settings into its tab's form. A character or model this page cannot offer
    leaves that widget as it is; a batch's uploaded script is not kept (the page shows the shipped one)."""
    run = state.get_store().get_run(run_id)
    if run is None or not run.kind.startswith("director."):
        return
    config, values = run.config, {}
    judge = (config.get("director") or {}).get("rubric_judge")
    judge = judge if judge in RUBRIC_JUDGES else None
    model = config.get("model_id")
    if run.kind == "director.check":
        if config.get("character") in profiles:
            values["character"] = config["character"]
        values |= {"line": str(config.get("text") or ""), "scene": str(config.get("scene") or "")}
        values["use_rubric"] = model is not None
        if _usable(model):
            values["rubric_model"] = model
        if judge:
            values["rubric_judge"] = judge
    elif run.kind == "director.batch":
        if config.get("character") in profiles:
            values["batch_character"] = config["character"]
        if _usable(model):
            values["batch_model"] = model
        if judge:
            values["batch_rubric_judge"] = judge
    elif run.kind == "director.duo":
        try:
            duo = DuoConfig(**config)
        except (TypeError, ValueError):  # stored by an older version: the form keeps its own settings
            return
        if duo.first in profiles and duo.second in profiles:
            values |= {"duo_first": duo.first, "duo_second": duo.second}
        values |= {"duo_topic": duo.topic, "duo_scene": duo.scene, "duo_turns": duo.turns}
        if duo.director.max_retries <= 5:  # the widget's range
            values["duo_retries"] = duo.director.max_retries
        values |= {"duo_policy": duo.director.on_retries_exhausted, "duo_rubric": duo.rubric}
        if _usable(duo.model_id):
            values["duo_model"] = duo.model_id
        if duo.rubric and judge:
            values["duo_rubric_judge"] = judge
    form.restore({KEY + name: value for name, value in values.items()})
