"""Search: Optuna's TPE sampler over the decision space, maximising (or minimising) a metric in `n_trials`
trials, run by the driver. The groups are recorded once (the calls); every trial is then a re-decision with no
model call, stored as a cell run (its row carries the trial number), so the trials can be listed."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.experiments.adapters.base import ExperimentAdapter
from engine.experiments.definition import Experiment, Range, expand
from engine.experiments.driver import Driver
from engine.runctx import checkpoint, progress

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


def mean_metrics(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Metrics averaged over repeats (None when any repeat has none); the `error` of a trial the settings refuse,
    the same in every repeat, is kept (the row and the CLI show it). Other texts stay None, as stored runs hold."""
    out: dict[str, Any] = {}
    for key in values[0]:
        given = [v.get(key) for v in values]
        nums = [n for n in given if isinstance(n, int | float)]
        if len(nums) == len(given):
            out[key] = round(statistics.fmean(nums), 6)
        else:
            out[key] = given[0] if key == "error" and all(n == given[0] for n in given) else None
    return out


class OptunaSearch:
    """The plan of a search experiment (see `driver.Plan`): one recording per group (a repeat, a model, a
    panel), then `n_trials` settings proposed by the sampler, each decided on every recording and averaged."""

    title = " (search)"
    resumable = False
    trials = True

    def __init__(self, definition: Experiment, mech: ExperimentAdapter) -> None:
        assert definition.search is not None
        self.definition = definition
        self.search = definition.search
        self.groups = {c.group: c for c in expand(definition.model_copy(update={"space": {}}), mech.decision)}
        self.units = self.search.n_trials
        self.config: dict[str, Any] = {"search": self.search.model_dump()}
        self.metric = self.search.metric
        self.minimize = self.search.direction == "minimize"
        self.study: optuna.Study | None = None

    def begin(self, driver: Driver) -> None:
        items = len(driver.cases) * len(self.groups) if driver.mech.calls else None
        progress(total=self.search.n_trials, step="recording", items_total=items, unit="trials")

    async def run(self, driver: Driver) -> None:
        import optuna  # heavy: optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=self.definition.seed)
        study = self.study = optuna.create_study(direction=self.search.direction, sampler=sampler)
        recorded = [await driver.record(c.call_params, g) for g, c in self.groups.items()]
        for number in range(self.search.n_trials):
            checkpoint()
            trial = study.ask()
            params = {name: suggest(trial, name, values) for name, values in self.definition.space.items()}
            decided = [(await driver.decide(r, [params]))[0] for r in recorded]
            metrics = mean_metrics([values for values, _ in decided])
            outcomes = decided[0][1] if len(decided) == 1 else None  # repeats: no one set of outcomes
            value = metrics.get(self.search.metric)
            if isinstance(value, int | float):
                study.tell(trial, float(value))
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            new = sum(r.new_calls for r in recorded) if number == 0 else 0
            tags = {"cell": number, "trial": number, "repeat": 0, "params": params}
            await driver.store_cell(tags, (metrics, outcomes), recorded[0], new_calls=new, label=f"trial {number}")

    def summary(self) -> dict[str, Any]:
        study = self.study
        return {"best_params": study.best_params if study is not None and study.best_trials else None}
