"""Running an experiment: one entry point, `run_experiment(definition, store, models, executor=...)`.

It picks the plan (a grid, or an Optuna search when the definition has `search:`) and the executor (`local`:
asyncio, `concurrency` groups at once and `per_model_concurrency` calls per model, decisions in worker processes
when `processes` > 1; `ray`: `RayExecutor`, actors on the Ray cluster at RAY_ADDRESS or a local instance), and
hands both to the one driver (`driver.Driver`), which records, decides, stores and reports the same way for
every plan and executor. Progress goes to `engine.runctx.progress` (one unit per cell); a cancelled run stops
between cells with `RunCancelled`, and `resume=ID` skips the cells already finished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.experiments.adapters import mechanism
from engine.experiments.adapters.base import Models
from engine.experiments.definition import Experiment
from engine.experiments.driver import Driver, Finished, Plan, new_experiment_id, resumed_cells
from engine.experiments.execution import Executor, HubModels, LocalExecutor
from engine.experiments.grid import Grid
from engine.experiments.ray_executor import RayExecutor
from engine.experiments.results import ExperimentResult
from engine.experiments.search import OptunaSearch
from engine.store import Store


def resolve_executor(executor: str | Executor, **kw: Any) -> Executor:
    if not isinstance(executor, str):
        return executor
    if executor == "local":
        return LocalExecutor(**kw)
    if executor == "ray":
        return RayExecutor(**kw)
    raise ValueError(f"unknown executor {executor!r}: local or ray")


async def run_experiment(
    definition: Experiment,
    store: Store,
    models: Models | HubModels | None = None,
    *,
    executor: str | Executor = "local",
    resume: str | None = None,
    source: str = "",
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> ExperimentResult:
    """Run (or resume) an experiment and return its table. `models`: a model-id → ChatModel function (local
    executor only), or `HubModels` (the catalog through the call store: the default, in the definition's
    call mode). `on_row` is called with each grid cell's row as it is stored."""
    mech = mechanism(definition.mechanism)
    models = models if models is not None else HubModels(definition.calls, definition.delay_s)
    ex = resolve_executor(executor)
    if ex.name == "ray" and not isinstance(models, HubModels):
        raise ValueError("the ray executor builds its models on the workers: pass HubModels")
    experiment_id = resume or new_experiment_id()
    finished: Finished | None = None
    plan: Plan
    if definition.search is not None:
        plan = OptunaSearch(definition, mech)
        on_row = None  # a search shows its trials in its table only
    else:
        if resume:
            finished = resumed_cells(store, definition, resume, source)
        plan = Grid(definition, mech, resumed=bool(resume))
    driver = Driver(definition, store, ex, experiment_id=experiment_id, source=source, on_row=on_row, finished=finished)
    return await driver.run(plan, models)
