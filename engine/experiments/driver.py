"""The one experiment driver: what a grid and a search both do, on either executor.

An experiment is a run of kind `experiment` holding the definition and, once it ends, the result table. Its
plan (`grid.Grid` or `search.OptunaSearch`) says which groups to record and which settings to decide; the driver
starts and closes the executor around the plan, records a group through it (a stored run of kind
`experiment.record`, the only step that calls models: at most `per_model_concurrency[m]` groups at once on model
`m`), has it decide settings from a recording (no call), stores each decided cell as a run of kind
`experiment.cell` tagged with the experiment id, reports progress (one unit per cell), and writes the table, the
best row and the ties. A cancelled run stops between cells with `RunCancelled`; a recording an executor left
`running` is closed as `cancelled`. Executors differ only in where a group is recorded and decided: this process
(`LocalExecutor`) or Ray actors (`RayExecutor`), so they give the same table.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import uuid4

from engine.events import run_context
from engine.experiments.adapters import mechanism
from engine.experiments.adapters.base import Models
from engine.experiments.definition import DefinitionError, Experiment
from engine.experiments.evidence import split_outcomes
from engine.experiments.execution import DECIDE_CHUNK, RECORD, Executor, GroupJob, HubModels, Recorded
from engine.experiments.results import (
    CELL,
    EXPERIMENT,
    ExperimentResult,
    annotate_ties,
    best_row,
    experiment_runs,
    finished_outcomes,
    finished_rows,
    row_of,
)
from engine.runctx import checkpoint, progress
from engine.store import CANCELLED, RUNNING, RunFilter, Store

YIELD_EVERY_S = 0.02  # storing cells: the event loop is handed back at least this often

Decided = tuple[dict[str, Any], Mapping[str, Any] | None]  # a cell's metrics, and its per-item outcomes


class Plan(Protocol):
    """What the driver runs: the cells of a grid, or the trials of a search."""

    units: int  # cells or trials: the progress units, stored as the experiment's `cells`
    config: dict[str, Any]  # what the experiment's run stores besides the driver's keys
    title: str  # the experiment run's name after its id and the definition's name
    metric: str  # the best row's and the ties' metric
    minimize: bool
    resumable: bool  # cells finished before are skipped (and counted as `skipped`)
    trials: bool  # the rows are a search's trials

    def begin(self, driver: Driver) -> None:
        """The first progress report, before the experiment's run starts."""

    async def run(self, driver: Driver) -> None:
        """Record the groups and store every cell through the driver."""

    def summary(self) -> dict[str, Any]:
        """What the experiment's summary holds after its table."""


@dataclass
class Finished:
    """The cells an experiment finished before (`--resume`): their rows and per-item outcomes, by cell index."""

    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcomes: dict[int, Mapping[str, Any]] = field(default_factory=dict)


def new_experiment_id() -> str:
    return f"exp-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid4().hex[:6]}"


def resumed_cells(store: Store, definition: Experiment, resume: str, source: str) -> Finished:
    """The finished cells of experiment `resume`, which must have run this very definition."""
    earlier = experiment_runs(store, resume)
    if not earlier:
        raise DefinitionError([f"no experiment {resume} in the store"])
    if earlier[-1].config.get("digest") != definition.digest():
        raise DefinitionError(
            [f"{source or 'definition'}: differs from the one experiment {resume} ran; resume it with the same file"]
        )
    return Finished(finished_rows(store, resume), finished_outcomes(store, resume))


def close_recordings(store: Store, experiment_id: str) -> None:
    """A recording still `running` once its experiment ends (a Ray actor killed mid-call) is closed as
    `cancelled`, so no run of the experiment is left running."""
    for run in store.search_runs(RunFilter(kinds=(RECORD,), statuses=(RUNNING,)), limit=100_000):
        if run.config.get("experiment_id") == experiment_id:
            store.finish_run(run.id, status=CANCELLED, error="cancelled: its experiment ended while it recorded")


class Driver:
    """One experiment's run: the executor it runs on, the cases, the rows stored so far (a resumed experiment's
    finished ones included) and their outcomes."""

    def __init__(
        self,
        definition: Experiment,
        store: Store,
        executor: Executor,
        *,
        experiment_id: str,
        source: str = "",
        on_row: Callable[[dict[str, Any]], None] | None = None,
        finished: Finished | None = None,
    ) -> None:
        self.definition = definition
        self.store = store
        self.executor = executor
        self.experiment_id = experiment_id
        self.source = source
        self.on_row = on_row
        self.mech = mechanism(definition.mechanism)
        finished = finished or Finished()
        self.rows: dict[int, dict[str, Any]] = dict(finished.rows)
        self.outcomes: dict[int, Mapping[str, Any]] = dict(finished.outcomes)
        self.skipped = len(finished.rows)
        self.cases = self.mech.load_cases(definition)
        self.live_before = store.call_count(live_only=True)
        self.per_model = {m: asyncio.Semaphore(n) for m, n in definition.per_model_concurrency.items()}
        self.handed_back = time.monotonic()

    @property
    def decide_chunk(self) -> int:
        """Settings handed to one `decide` (a cancel is checked between them): the executor's own, if it has one."""
        return max(1, int(getattr(self.executor, "decide_chunk", DECIDE_CHUNK)))

    async def run(self, plan: Plan, models: Models | HubModels) -> ExperimentResult:
        """Run the plan inside the experiment's run, and write its table and summary."""
        definition = self.definition
        config = {
            "experiment_id": self.experiment_id,
            "definition": definition.model_dump(mode="json", by_alias=True),
            "digest": definition.digest(),
            "source": self.source,
            "executor": self.executor.name,
            "cells": plan.units,
            **plan.config,
        }
        plan.begin(self)
        name = f"{self.experiment_id} {definition.name}{plan.title}"
        with run_context(self.store, EXPERIMENT, config, name=name) as run:
            await self._execute(plan, models)
            run.summary = self._summary(plan)
        summary = run.summary
        return ExperimentResult(
            experiment_id=self.experiment_id,
            run_id=run.run_id,
            rows=summary["table"],
            metric=plan.metric,
            best=summary["best"],
            new_calls=summary["new_calls"],
            executor=self.executor.name,
            skipped=self.skipped if plan.resumable else 0,
            trials=summary["table"] if plan.trials else [],
        )

    async def _execute(self, plan: Plan, models: Models | HubModels) -> None:
        ended = False
        try:
            await self.executor.start(self.definition, self.store, models)
            await plan.run(self)
            ended = True
        finally:
            await self.executor.close()
            if not ended:
                close_recordings(self.store, self.experiment_id)

    def _summary(self, plan: Plan) -> dict[str, Any]:
        table = [self.rows[i] for i in sorted(self.rows)]
        best = best_row(table, plan.metric, plan.minimize)  # before the ties annotate the rows
        new_calls = self.store.call_count(live_only=True) - self.live_before
        ties = annotate_ties(self.definition, table, self.outcomes, plan.metric)
        return {
            "experiment_id": self.experiment_id,
            "metric": plan.metric,
            "best": best,
            "ties": ties,
            "new_calls": new_calls,
            "cells": len(table),
            **({"skipped": self.skipped} if plan.resumable else {}),
            "table": table,
            **plan.summary(),
        }

    async def record(self, call_params: Mapping[str, Any], group: str) -> Recorded:
        """Record one group through the executor, within the per-model bounds."""
        async with contextlib.AsyncExitStack() as stack:
            if self.per_model:
                for m in self.mech.models_of(self.definition, call_params):
                    if m in self.per_model:
                        await stack.enter_async_context(self.per_model[m])
            checkpoint()
            job = GroupJob(self.definition, self.cases, dict(call_params), self.experiment_id, group)
            return await self.executor.record(job)

    async def decide(self, recorded: Recorded, decisions: Sequence[Mapping[str, Any]]) -> list[Decided]:
        """Each setting's metrics and outcomes from one recording, decided by the executor (no call)."""
        checkpoint()
        return [split_outcomes(m) for m in await self.executor.decide(self.definition, recorded.recording, decisions)]

    async def store_cell(
        self, tags: Mapping[str, Any], decided: Decided, recorded: Recorded, *, new_calls: int, label: str
    ) -> None:
        """Store one decided cell as a run (`tags`: the cell's index, trial, repeat, group and params as its
        run's config holds them), keep its row and outcomes, and report it."""
        checkpoint()
        values, outcomes = decided
        index = int(tags["cell"])
        config = {"experiment_id": self.experiment_id, **tags, "recording_run": recorded.run_id}
        with run_context(self.store, CELL, config, name=f"{self.experiment_id} {label}") as crun:
            row = row_of(tags, values, new_calls=new_calls, run_id=crun.run_id, recording_run=recorded.run_id)
            crun.summary = {"row": row, "metrics": values, **({"outcomes": outcomes} if outcomes else {})}
        if outcomes:
            self.outcomes[index] = outcomes
        self.rows[index] = row
        if self.on_row is not None:
            self.on_row(row)
        progress(advance=1, step=label)
        await self._hand_back()

    async def _hand_back(self) -> None:
        """Storing cells is synchronous: give the loop (and a cancel) a turn at least every YIELD_EVERY_S."""
        if time.monotonic() - self.handed_back >= YIELD_EVERY_S:
            await asyncio.sleep(0)
            self.handed_back = time.monotonic()
