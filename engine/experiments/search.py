"""Search: Optuna's TPE sampler over the decision space, maximising (or minimising) a metric in
`n_trials` trials. The groups are recorded once (the calls); every trial is then a re-decision with no
model call, stored as a cell run (its row carries the trial number), so the trials can be listed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.events import run_context
from engine.experiments.definition import Experiment, Range, expand
from engine.experiments.evidence import split_outcomes
from engine.experiments.execution import (
    CELL,
    EXPERIMENT,
    Executor,
    ExperimentResult,
    HubModels,
    annotate_ties,
    best_row,
    mean_metrics,
    new_experiment_id,
)
from engine.experiments.mechanisms import Models, mechanism
from engine.runctx import checkpoint, progress
from engine.store import Store

if TYPE_CHECKING:
    import optuna


def suggest(trial: optuna.Trial, name: str, values: list[Any] | Range) -> Any:
    if isinstance(values, Range):
        if values.integer:
            return trial.suggest_int(
                name, int(values.start), int(values.stop), step=int(values.step or 1), log=values.log
            )
        if values.log:
            return trial.suggest_float(name, values.start, values.stop, log=True)
        return trial.suggest_float(name, values.start, values.stop, step=values.step)
    return trial.suggest_categorical(name, values)


async def run_search(
    definition: Experiment,
    store: Store,
    models: Models | HubModels,
    ex: Executor,
    *,
    resume: str | None = None,
    source: str = "",
) -> ExperimentResult:
    import optuna  # heavy: optuna

    assert definition.search is not None
    search = definition.search
    mech = mechanism(definition.mechanism)
    experiment_id = resume or new_experiment_id()
    cases = mech.load_cases(definition)
    groups = {c.group: c for c in expand(definition.model_copy(update={"space": {}}), mech.decision)}
    live_before = store.call_count(live_only=True)
    config = {
        "experiment_id": experiment_id,
        "definition": definition.model_dump(mode="json", by_alias=True),
        "digest": definition.digest(),
        "source": source,
        "executor": ex.name,
        "cells": search.n_trials,
        "search": search.model_dump(),
    }
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=search.direction, sampler=optuna.samplers.TPESampler(seed=definition.seed))
    rows: list[dict[str, Any]] = []
    trial_outcomes: dict[int, Mapping[str, Any]] = {}
    progress(total=search.n_trials, step="recording", items_total=len(cases) * len(groups) if mech.calls else None)
    with run_context(store, EXPERIMENT, config, name=f"{experiment_id} {definition.name} (search)") as run:
        await ex.start(definition, store, models)
        try:
            recorded = [await ex.record(definition, cases, c.call_params, experiment_id, g) for g, c in groups.items()]
            for number in range(search.n_trials):
                checkpoint()
                trial = study.ask()
                params = {name: suggest(trial, name, values) for name, values in definition.space.items()}
                decided = [split_outcomes((await ex.decide(definition, r.recording, [params]))[0]) for r in recorded]
                metrics = mean_metrics([values for values, _ in decided])
                outcomes = decided[0][1] if len(decided) == 1 else None  # repeats: no one set of outcomes
                value = metrics.get(search.metric)
                if isinstance(value, int | float):
                    study.tell(trial, float(value))
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                new = sum(r.new_calls for r in recorded) if number == 0 else 0
                cell = {
                    "experiment_id": experiment_id,
                    "cell": number,
                    "trial": number,
                    "repeat": 0,
                    "params": params,
                    "recording_run": recorded[0].run_id,
                }
                with run_context(store, CELL, cell, name=f"{experiment_id} trial {number}") as crun:
                    row = {
                        "cell": number,
                        "trial": number,
                        "repeat": 0,
                        **params,
                        **metrics,
                        "new_calls": new,
                        "run_id": crun.run_id,
                        "recording_run": recorded[0].run_id,
                    }
                    crun.summary = {"row": row, "metrics": metrics, **({"outcomes": outcomes} if outcomes else {})}
                if outcomes:
                    trial_outcomes[number] = outcomes
                rows.append(row)
                progress(advance=1, step=f"trial {number}")
        finally:
            await ex.close()
        best = best_row(rows, search.metric, search.direction == "minimize")
        new_calls = store.call_count(live_only=True) - live_before
        ties = annotate_ties(definition, rows, trial_outcomes, search.metric)
        run.summary = {
            "experiment_id": experiment_id,
            "metric": search.metric,
            "best": best,
            "ties": ties,
            "new_calls": new_calls,
            "cells": len(rows),
            "table": rows,
            "best_params": study.best_params if study.best_trials else None,
        }
    return ExperimentResult(
        experiment_id=experiment_id,
        run_id=run.run_id,
        rows=rows,
        metric=search.metric,
        best=best,
        new_calls=new_calls,
        executor=ex.name,
        trials=rows,
    )
