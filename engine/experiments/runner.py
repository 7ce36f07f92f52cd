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
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import uuid4

from engine.events import async_run_context, run_context
from engine.experiments.analysis import LOWER_IS_BETTER
from engine.experiments.definition import CallMode, Cell, DefinitionError, Experiment, Group, expand
from engine.experiments.evidence import split_outcomes, table_evidence
from engine.experiments.mechanisms import Mechanism, Models, mechanism
from engine.runctx import RunCancelled, checkpoint, progress
from engine.store import FINISHED, Store

EXPERIMENT, CELL, RECORD = "experiment", "experiment.cell", "experiment.record"
ROW_META = ("cell", "repeat", "trial", "new_calls", "run_id", "recording_run")
DECIDE_CHUNK = 64  # cells decided at once (in a thread); a cancel or a signal is checked between chunks
YIELD_EVERY_S = 0.02  # storing cells: the event loop is handed back at least this often


@dataclass(frozen=True)
class HubModels:
    """Models from the catalog, answered through the call store (picklable: a Ray worker builds its own)."""

    mode: CallMode = "replay_fallthrough"
    delay_s: float = 0.0

    def build(self, store: Store) -> Models:
        from models.registry import ModelHub

        hub = ModelHub(call_log=store)
        replay = self.mode != "live"
        fallthrough = self.mode == "replay_fallthrough"

        def get(model_id: str) -> Any:
            return hub.get(model_id, replay=replay, delay_s=self.delay_s, fallthrough=fallthrough)

        return get


@dataclass
class Recorded:
    run_id: str
    recording: Any
    new_calls: int


@dataclass
class ExperimentResult:
    experiment_id: str
    run_id: str
    rows: list[dict[str, Any]]
    metric: str
    best: dict[str, Any] | None
    new_calls: int
    executor: str
    skipped: int = 0
    trials: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "run_id": self.run_id,
            "executor": self.executor,
            "metric": self.metric,
            "best": self.best,
            "new_calls": self.new_calls,
            "cells": len(self.rows),
            "skipped": self.skipped,
            "rows": self.rows,
        }


class Executor(Protocol):
    name: str

    async def start(self, definition: Experiment, store: Store, models: Models | HubModels) -> None: ...

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        experiment_id: str,
        group: str,
    ) -> Recorded: ...

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...


async def record_group(
    mech: Mechanism,
    definition: Experiment,
    cases: Sequence[Any],
    call_params: Mapping[str, Any],
    models: Models,
    store: Store,
    experiment_id: str,
    group: str,
) -> Recorded:
    """Record one group's raw judgments as a stored run; the calls it made live are counted."""
    config = {
        "experiment_id": experiment_id,
        "group": group,
        "call_params": dict(call_params),
        "mechanism": definition.mechanism,
    }
    async with async_run_context(store, RECORD, config, name=f"{experiment_id} recording {group}") as run:
        recording = await mech.record(definition, cases, call_params, models, store, run.run_id)
        new = store.call_count(run.run_id, live_only=True)
        run.summary = {"calls": store.call_count(run.run_id), "new_calls": new}
        run.emit("experiment_recording", **mech.recording_json(recording))
    return Recorded(run.run_id, recording, new)


def decide_many(
    mechanism_name: str,
    definition: Experiment,
    recording: Any,
    decisions: Sequence[Mapping[str, Any]],
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """Pure: each decision setting's metrics from one recording (no model, no store). Checks between
    decisions whether to stop (`stop` set, or the run cancelled): RunCancelled, so a chunk run in a thread
    ends within one decision of a Cancel or a signal."""
    mech = mechanism(mechanism_name)
    out: list[dict[str, Any]] = []
    for d in decisions:
        if stop is not None and stop.is_set():
            raise RunCancelled("stopped")
        checkpoint()
        try:
            out.append(mech.decide(definition, recording, d))
        except ValueError as exc:  # a combination the settings refuse (pydantic's errors are ValueErrors)
            out.append({"error": " ".join(str(exc).split())[:300]})
    return out


async def decide_in_thread(
    definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`decide_many` in a worker thread, off the event loop (in the dashboard, the loop every page shares):
    the loop keeps serving while a chunk is decided, and a cancelled await stops the thread at its next
    decision."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(decide_many, definition.mechanism, definition, recording, decisions, stop)
    finally:
        stop.set()


class InProcess:
    """Records and decides groups in this process, with its store and models: what the local executor and
    each Ray worker do with the groups they are given."""

    store: Store | None = None
    models: Models | None = None

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        experiment_id: str,
        group: str,
    ) -> Recorded:
        assert self.models is not None and self.store is not None
        return await record_group(
            mechanism(definition.mechanism),
            definition,
            cases,
            call_params,
            self.models,
            self.store,
            experiment_id,
            group,
        )

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        return await decide_in_thread(definition, recording, decisions)


class LocalExecutor(InProcess):
    """This process: asyncio for the calls; decisions in `processes` worker processes when above one."""

    name = "local"

    def __init__(self, processes: int = 0, chunk: int = 250) -> None:
        self.processes = processes
        self.chunk = chunk
        self._pool: ProcessPoolExecutor | None = None

    @property
    def decide_chunk(self) -> int:
        """Cells the runner hands to one `decide` (a cancel is checked between them): with worker processes,
        enough for every process to take a part."""
        return max(DECIDE_CHUNK, 2 * self.chunk * self.processes) if self.processes > 1 else DECIDE_CHUNK

    async def start(self, definition: Experiment, store: Store, models: Models | HubModels) -> None:
        self.store = store
        self.models = models.build(store) if isinstance(models, HubModels) else models
        if self.processes > 1:
            self._pool = ProcessPoolExecutor(self.processes)

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        if self._pool is None or len(decisions) < 2 * self.chunk:
            return await super().decide(definition, recording, decisions)
        loop = asyncio.get_running_loop()
        parts = [list(decisions[i : i + self.chunk]) for i in range(0, len(decisions), self.chunk)]
        done = await asyncio.gather(
            *(
                loop.run_in_executor(self._pool, decide_many, definition.mechanism, definition, recording, p)
                for p in parts
            )
        )
        return [m for part in done for m in part]

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def resolve_executor(executor: str | Executor, **kw: Any) -> Executor:
    if not isinstance(executor, str):
        return executor
    if executor == "local":
        return LocalExecutor(**kw)
    if executor == "ray":
        from engine.experiments.ray_executor import RayExecutor

        return RayExecutor(**kw)
    raise ValueError(f"unknown executor {executor!r}: local or ray")


def _chunks(items: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    while part := list(itertools.islice(items, size)):
        yield part


def close_recordings(store: Store, experiment_id: str) -> None:
    """A recording still `running` once its experiment ends (a Ray actor killed mid-call) is closed as
    `cancelled`, so no run of the experiment is left running."""
    from engine.store import CANCELLED, RUNNING, RunFilter

    for run in store.search_runs(RunFilter(kinds=(RECORD,), statuses=(RUNNING,)), limit=100_000):
        if run.config.get("experiment_id") == experiment_id:
            store.finish_run(run.id, status=CANCELLED, error="cancelled: its experiment ended while it recorded")


def new_experiment_id() -> str:
    return f"exp-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid4().hex[:6]}"


def row_of(
    cell: Cell, metrics: Mapping[str, Any], *, new_calls: int, run_id: str, recording_run: str
) -> dict[str, Any]:
    return {
        "cell": cell.index,
        "repeat": cell.repeat,
        **cell.params,
        **metrics,
        "new_calls": new_calls,
        "run_id": run_id,
        "recording_run": recording_run,
    }


def comparable_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The table without what differs between two runs of one definition (run ids, wall-clock latency)."""
    return [
        {k: v for k, v in r.items() if k not in ("run_id", "recording_run", "latency_s")}
        for r in sorted(rows, key=lambda r: r["cell"])
    ]


def best_row(rows: Sequence[Mapping[str, Any]], metric: str, minimize: bool = False) -> dict[str, Any] | None:
    scored = [r for r in rows if isinstance(r.get(metric), int | float)]
    if not scored:
        return None
    if minimize:
        return dict(min(scored, key=lambda r: (r[metric], r["cell"])))
    return dict(max(scored, key=lambda r: (r[metric], -r["cell"])))  # ties: the first cell


def experiment_runs(store: Store, experiment_id: str) -> list[Any]:
    return [
        r
        for r in store.list_runs(EXPERIMENT, limit=1_000_000)
        if r.kind == EXPERIMENT and r.config.get("experiment_id") == experiment_id
    ]


def cell_runs(store: Store, experiment_id: str) -> list[Any]:
    return [r for r in store.list_runs(CELL, limit=1_000_000) if r.config.get("experiment_id") == experiment_id]


def finished_outcomes(store: Store, experiment_id: str) -> dict[int, Mapping[str, Any]]:
    """The per-item outcomes of an experiment's finished cells, by cell index (cells that stored any)."""
    return {
        int(run.config["cell"]): run.summary["outcomes"]
        for run in cell_runs(store, experiment_id)
        if run.status == FINISHED and isinstance(run.summary.get("outcomes"), Mapping)
    }


def default_row(definition: Experiment, rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The position of the row decided with the mechanism's default settings (its parameters change nothing
    over the base), if the grid has one."""
    mech = mechanism(definition.mechanism)
    try:
        default = mech.config(definition.base, {})
    except (ValueError, TypeError):
        return None
    for position, row in enumerate(rows):
        params = {k: row[k] for k in definition.space if k in row and k in mech.decision}
        if any(k in row and row[k] != definition.base.get(k, row[k]) for k in mech.calls if k in definition.space):
            continue
        try:
            if mech.config(definition.base, params) == default:
                return position
        except (ValueError, TypeError):
            continue
    return None


def annotate_ties(
    definition: Experiment,
    table: list[dict[str, Any]],
    outcomes: Mapping[int, Mapping[str, Any]],
    metric: str,
) -> dict[str, Any]:
    """Each row's interval on the metric and whether it ties with the best (in place), and the one-line summary."""
    evidence = table_evidence(
        [outcomes.get(int(r["cell"])) for r in table],
        [r.get(metric) for r in table],
        metric,
        minimize=metric in LOWER_IS_BETTER,
    )
    evidence.annotate(table)
    return evidence.summary(table, default_row(definition, table))


def finished_rows(store: Store, experiment_id: str) -> dict[int, dict[str, Any]]:
    """The finished cells of an experiment (its rows), by cell index."""
    out: dict[int, dict[str, Any]] = {}
    for run in cell_runs(store, experiment_id):
        if run.status == FINISHED and "row" in run.summary:
            out[int(run.config["cell"])] = {**run.summary["row"], "run_id": run.id}
    return out


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
        from engine.experiments.search import run_search

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


def list_experiments(store: Store) -> list[dict[str, Any]]:
    """One line per experiment (its latest run): id, name, status, cells, best."""
    latest: dict[str, Any] = {}
    for run in store.list_runs(EXPERIMENT, limit=1_000_000):
        if run.kind != EXPERIMENT:
            continue
        eid = run.config.get("experiment_id")
        if eid and eid not in latest:
            latest[eid] = run
    out = []
    for eid, run in latest.items():
        definition = run.config.get("definition", {})
        summary = run.summary
        out.append(
            {
                "experiment_id": eid,
                "name": definition.get("name"),
                "mechanism": definition.get("mechanism"),
                "status": run.status,
                "run_id": run.id,
                "started_at": run.started_at.isoformat(),
                "cells": run.config.get("cells"),
                "metric": summary.get("metric"),
                "best": summary.get("best"),
                "executor": run.config.get("executor"),
            }
        )
    return out


def show_experiment(store: Store, experiment_id: str) -> dict[str, Any]:
    """The definition, status and table of an experiment (from its finished cells, so a killed one shows
    what it finished)."""
    runs = experiment_runs(store, experiment_id)
    if not runs:
        raise KeyError(f"no experiment {experiment_id}")
    latest = runs[0]
    definition = latest.config.get("definition", {})
    finished = finished_rows(store, experiment_id)
    rows = [finished[i] for i in sorted(finished)]
    mech = mechanism(str(definition.get("mechanism")))
    metric = definition.get("metric") or mech.default_metric
    outcomes = finished_outcomes(store, experiment_id)
    try:
        ties = annotate_ties(Experiment.model_validate(definition), rows, outcomes, metric)
    except ValueError as exc:  # a stored definition this version cannot read: the table without ties
        ties = {"metric": metric, "note": f"ties not computed: {exc}", "text": ""}
    search = definition.get("search") or {}
    axes = [
        *definition.get("space", {}),
        *(["model"] if definition.get("models") else []),
        *(["panel"] if definition.get("panels") else []),
    ]
    return {
        "experiment_id": experiment_id,
        "name": definition.get("name"),
        "status": latest.status,
        "runs": [
            {
                "run_id": r.id,
                "status": r.status,
                "executor": r.config.get("executor"),
                "started_at": r.started_at.isoformat(),
                "error": r.error,
            }
            for r in runs
        ],
        "definition": definition,
        "cells": latest.config.get("cells"),
        "finished": len(rows),
        "metric": metric,
        "best": best_row(rows, search.get("metric", metric), search.get("direction") == "minimize"),
        "ties": ties,
        "outcomes": outcomes,  # per cell: another metric's intervals and ties are computed from these
        "new_calls": sum(int(r.get("new_calls") or 0) for r in rows),
        "rows": rows,
        "parameters": axes,
        "decision_parameters": sorted(mech.decision),
        "call_parameters": sorted(mech.calls),
    }


def mean_metrics(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Metrics averaged over repeats (None when any repeat has none)."""
    out: dict[str, Any] = {}
    for key in values[0]:
        nums = [v[key] for v in values]
        out[key] = round(statistics.fmean(nums), 6) if all(isinstance(n, int | float) for n in nums) else None
    return out
