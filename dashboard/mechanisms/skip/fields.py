"""The Skip cache page's form: its session-state keys and the URL name of its run, the recorded judge, each widget's
range and first value, and the settings a run re-attached from the URL puts back. It draws nothing itself: the
controls (`controls`) and the page (`page`) do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dashboard import formstate as form
from dashboard import state
from dashboard.watch import watched_run
from engine.config import get_settings
from engine.skip.config import ResponseConfig
from engine.skip.run import SimulationConfig
from engine.skip.workload import WorkloadSpec

KEY = "skip."
FORM = KEY.removesuffix(".")  # its form's marker: "skip.form_for" names the run the form shows
DETAILS = "skip"
RUN = KEY + "run_id"  # the simulation shown: also in the URL (`?run=`), so a reload re-attaches
RECORDED = "Recorded Gemma judgments (default workload)"


def recording() -> Path:
    return get_settings().data_dir / "recordings" / "skipcache-default.jsonl"


# The form's widgets: (min, max) and the default each starts at. Kept here, not in the widgets, so that a reload
# can put the attached run's settings in (`restore_form`) before they are drawn.
RANGES: dict[str, tuple[float, float]] = {
    "channels": (1, 500),
    "hours": (1.0, 72.0),
    "rate": (0.01, 5.0),
    "burst": (1.0, 20.0),
    "seed": (0, 10_000),
    "high": (0.5, 1.0),
    "high_s": (0, 172_800),
    "mid": (0.0, 1.0),
    "mid_s": (0, 172_800),
    "default_s": (0, 86_400),
    "interval": (10, 3600),
    "min_wait": (0, 7200),
}


def _defaults() -> dict[str, Any]:
    d, r = WorkloadSpec(), ResponseConfig()
    return {
        "channels": d.channels,
        "hours": d.hours,
        "rate": d.bursts_per_hour,
        "burst": d.mean_burst_messages,
        "seed": d.seed,
        "high": 0.9,
        "high_s": 43200,
        "mid": 0.7,
        "mid_s": 3600,
        "default_s": 600,
        "interval": r.check_interval_seconds,
        "min_wait": r.min_wait_seconds,
    }


def init_state() -> None:
    for name, value in _defaults().items():
        form.default(KEY + name, value)


def restore() -> None:
    """On first sight of the run in the URL (a reload, a shared link), the form takes its settings."""
    form.restore_from(FORM, watched_run("run", RUN), restore_form)


def restore_form(run_id: str) -> None:
    """Put a stored simulation's settings into the form (before its widgets are drawn): the generated workload,
    the thresholds, the checker and the judge, so the next Simulate runs the same simulation. A value the
    form cannot show (out of a widget's range, a model not available here) leaves that widget as it is; an
    uploaded workload is not kept (the upload box stays empty)."""
    run = state.get_store().get_run(run_id)
    if run is None or run.kind != "skip.simulate":
        return
    try:
        sim = SimulationConfig.model_validate(run.config)
    except ValueError:  # stored by an older version: the form keeps its own settings
        return
    response = sim.response
    values: dict[str, float] = {}
    if sim.workload is not None:
        w = sim.workload
        values |= {"channels": w.channels, "hours": w.hours, "rate": w.bursts_per_hour}
        values |= {"burst": w.mean_burst_messages, "seed": w.seed}
    levels = sorted(response.judgment_skip.thresholds, key=lambda t: -t.min_confidence)
    if len(levels) == 2:
        values |= {"high": levels[0].min_confidence, "high_s": levels[0].skip_seconds}
        values |= {"mid": levels[1].min_confidence, "mid_s": levels[1].skip_seconds}
    values |= {"default_s": response.judgment_skip.default_skip_seconds}
    values |= {"interval": response.check_interval_seconds, "min_wait": response.min_wait_seconds}
    shown: dict[str, Any] = {KEY + n: v for n, v in values.items() if RANGES[n][0] <= v <= RANGES[n][1]}
    shown |= {KEY + "policy": response.failure_policy.value, KEY + "method": sim.method}
    availability = state.get_availability().get(sim.model_id or "")
    if sim.model_id is None and sim.recording is not None:
        shown[KEY + "judge"] = RECORDED
    elif availability is not None and availability.available:
        shown[KEY + "judge"] = sim.model_id
    form.restore(shown)
