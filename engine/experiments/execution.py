"""The executor layer of an experiment: the models (`HubModels`), how a group is recorded and its cells decided
(`record_group`, `decide_many`), the local executor, and the result rows and tables read back from the store.
The driver (`runner.run_experiment`) and the search and Ray executors build on this module; it needs none of
them."""

from __future__ import annotations

import asyncio
import statistics
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import uuid4

from engine.events import async_run_context
from engine.experiments.analysis import LOWER_IS_BETTER
from engine.experiments.definition import CallMode, Cell, Experiment
from engine.experiments.evidence import table_evidence
from engine.experiments.mechanisms import Mechanism, Models, mechanism
from engine.runctx import RunCancelled, checkpoint
from engine.store import FINISHED, Store
from models.registry import ModelHub

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
