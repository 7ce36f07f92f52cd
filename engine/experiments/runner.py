"""Running an experiment: one entry point, `run_experiment(definition, store, models, executor=...)`.

Cells that differ only in decision parameters share a group; a group is recorded once (a stored run of
kind `experiment.record`, the only step that calls models — through the call store, so a request made
before is replayed, not paid again), then each of its cells is decided from the recording with no call and
stored as a run of kind `experiment.cell` tagged with the experiment id. The experiment itself is a run of
kind `experiment` holding the definition and the result table. Progress goes to `engine.runctx.progress`
(one unit per cell); a cancelled run stops between cells with `RunCancelled`, and `resume=ID` skips the
cells already finished.

Bounded at any size: the cells are made lazily (`definition.Cells`, refused above JUDGELAB_MAX_CELLS),
`concurrency` workers take one group at a time, a group's cells are decided in chunks in a worker thread (off
the event loop, which in the dashboard every page shares) and stored with the loop handed back every
`YIELD_EVERY_S`, so a Cancel, SIGTERM or SIGINT lands within a chunk.

Executors: `local` (asyncio, `concurrency` groups at once and `per_model_concurrency` calls per model;
decisions in worker processes when `processes` > 1) and `ray` (`RayExecutor`: actors on the Ray cluster at
RAY_ADDRESS, or a local instance). Both are driven by the same code here, so they give the same table.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from engine.events import run_context
from engine.experiments.definition import Cell, DefinitionError, Experiment, Group, expand
from engine.experiments.evidence import split_outcomes
from engine.experiments.execution import (
    CELL,
    DECIDE_CHUNK,
    EXPERIMENT,
    RECORD,
    ROW_META,
    YIELD_EVERY_S,
    Executor,
    ExperimentResult,
    HubModels,
    InProcess,
    LocalExecutor,
    Recorded,
    annotate_ties,
    best_row,
    cell_runs,
    comparable_rows,
    decide_in_thread,
    decide_many,
    default_row,
    experiment_runs,
    finished_outcomes,
    finished_rows,
    list_experiments,
    mean_metrics,
    new_experiment_id,
    record_group,
    row_of,
    show_experiment,
)
from engine.experiments.mechanisms import Models, mechanism
from engine.experiments.ray_executor import RayExecutor
from engine.experiments.search import run_search
from engine.runctx import checkpoint, progress
from engine.store import CANCELLED, RUNNING, RunFilter, Store

# The executor layer (execution.py) keeps the names it had here.
__all__ = [
    "CELL",
    "DECIDE_CHUNK",
    "EXPERIMENT",
    "Executor",
    "ExperimentResult",
    "HubModels",
    "InProcess",
    "LocalExecutor",
    "RECORD",
    "ROW_META",
    "Recorded",
    "YIELD_EVERY_S",
    "annotate_ties",
    "best_row",
    "cell_runs",
    "close_recordings",
    "comparable_rows",
    "decide_in_thread",
    "decide_many",
    "default_row",
    "experiment_runs",
    "finished_outcomes",
    "finished_rows",
    "list_experiments",
    "mean_metrics",
    "new_experiment_id",
    "record_group",
    "resolve_executor",
    "row_of",
    "run_experiment",
    "show_experiment",
]


def resolve_executor(executor: str | Executor, **kw: Any) -> Executor:
    if not isinstance(executor, str):
        return executor
    if executor == "local":
        return LocalExecutor(**kw)
    if executor == "ray":
        return RayExecutor(**kw)
    raise ValueError(f"unknown executor {executor!r}: local or ray")


def _chunks(items: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    while part := list(itertools.islice(items, size)):
        yield part


def close_recordings(store: Store, experiment_id: str) -> None:
    """A recording still `running` once its experiment ends (a Ray actor killed mid-call) is closed as
    `cancelled`, so no run of the experiment is left running."""
    for run in store.search_runs(RunFilter(kinds=(RECORD,), statuses=(RUNNING,)), limit=100_000):
        if run.config.get("experiment_id") == experiment_id:
            store.finish_run(run.id, status=CANCELLED, error="cancelled: its experiment ended while it recorded")


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
    call mode)."""
    mech = mechanism(definition.mechanism)
    models = models if models is not None else HubModels(definition.calls, definition.delay_s)
    ex = resolve_executor(executor)
    if ex.name == "ray" and not isinstance(models, HubModels):
        raise ValueError("the ray executor builds its models on the workers: pass HubModels")
    if definition.search is not None:
        return await run_search(definition, store, models, ex, resume=resume, source=source)
    experiment_id = resume or new_experiment_id()
    done: dict[int, dict[str, Any]] = {}
    if resume:
        earlier = experiment_runs(store, resume)
        if not earlier:
            raise DefinitionError([f"no experiment {resume} in the store"])
        if earlier[-1].config.get("digest") != definition.digest():
            raise DefinitionError(
                [
                    f"{source or 'definition'}: differs from the one experiment {resume} ran; "
                    "resume it with the same file"
                ]
            )
        done = finished_rows(store, resume)
    cells = expand(definition, mech.decision)  # lazy; refused here above the cell cap
    cases = mech.load_cases(definition)
    rows: dict[int, dict[str, Any]] = dict(done)
    cell_outcomes: dict[int, Mapping[str, Any]] = finished_outcomes(store, resume) if resume else {}
    metric = definition.metric or mech.default_metric
    live_before = store.call_count(live_only=True)
    config = {
        "experiment_id": experiment_id,
        "definition": definition.model_dump(mode="json", by_alias=True),
        "digest": definition.digest(),
        "source": source,
        "executor": ex.name,
        "cells": len(cells),
        "resumed": bool(resume),
    }
    # the cells wait on the recordings: their cases (and calls) are counted too, and pace the ETA
    pending_groups = (
        sum(1 for g in cells.groups() if any(c.index not in done for c in cells.members(g))) if mech.calls else 0
    )
    recorded_items = len(cases) * pending_groups
    progress(total=len(cells), done=len(done), step="starting", items_total=recorded_items or None)
    per_model = {m: asyncio.Semaphore(n) for m, n in definition.per_model_concurrency.items()}
    chunk_size = max(1, int(getattr(ex, "decide_chunk", DECIDE_CHUNK)))
    handed_back = [time.monotonic()]

    async def hand_back() -> None:
        """Storing cells is synchronous: give the loop (and a cancel) a turn at least every YIELD_EVERY_S."""
        if time.monotonic() - handed_back[0] >= YIELD_EVERY_S:
            await asyncio.sleep(0)
            handed_back[0] = time.monotonic()

    async def run_group(group: Group) -> None:
        members = (c for c in cells.members(group) if c.index not in done)
        first = next(members, None)
        if first is None:
            return  # every cell of the group finished before (resume): not recorded again
        async with contextlib.AsyncExitStack() as stack:
            for m in mech.models_of(definition, group.call_params):
                if m in per_model:
                    await stack.enter_async_context(per_model[m])
            checkpoint()
            recorded = await ex.record(definition, cases, group.call_params, experiment_id, group.key)
        new = recorded.new_calls
        for part in _chunks(itertools.chain([first], members), chunk_size):
            checkpoint()
            metrics = await ex.decide(definition, recorded.recording, [c.decision_params for c in part])
            for cell, decided in zip(part, metrics, strict=True):
                checkpoint()
                values, outcomes = split_outcomes(decided)
                cell_config = {"experiment_id": experiment_id, **cell.as_dict(), "recording_run": recorded.run_id}
                with run_context(store, CELL, cell_config, name=f"{experiment_id} cell {cell.index}") as crun:
                    row = row_of(cell, values, new_calls=new, run_id=crun.run_id, recording_run=recorded.run_id)
                    crun.summary = {"row": row, "metrics": values, **({"outcomes": outcomes} if outcomes else {})}
                if outcomes:
                    cell_outcomes[cell.index] = outcomes
                new = 0  # the group's new calls are counted on its first cell
                rows[cell.index] = row
                if on_row is not None:
                    on_row(row)
                progress(advance=1, step=f"cell {cell.index}")
                await hand_back()

    groups = cells.groups()

    async def worker() -> None:
        for group in groups:  # shared: each worker takes the next group (asyncio: no two take one)
            await run_group(group)

    with run_context(store, EXPERIMENT, config, name=f"{experiment_id} {definition.name}") as run:
        ended = False
        try:
            await ex.start(definition, store, models)
            tasks = [asyncio.ensure_future(worker()) for _ in range(min(definition.concurrency, cells.group_count))]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            ended = True
        finally:
            await ex.close()
            if not ended:
                close_recordings(store, experiment_id)
        table = [rows[i] for i in sorted(rows)]
        new_calls = store.call_count(live_only=True) - live_before
        best = best_row(table, metric)
        ties = annotate_ties(definition, table, cell_outcomes, metric)
        run.summary = {
            "experiment_id": experiment_id,
            "metric": metric,
            "best": best,
            "ties": ties,
            "new_calls": new_calls,
            "cells": len(table),
            "skipped": len(done),
            "table": table,
        }
    return ExperimentResult(
        experiment_id=experiment_id,
        run_id=run.run_id,
        rows=table,
        metric=metric,
        best=best,
        new_calls=new_calls,
        executor=ex.name,
        skipped=len(done),
    )
