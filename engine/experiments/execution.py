"""Where the cells of an experiment run: the models (`HubModels`), how one group is recorded and its cells decided
(`record_group`, `decide_many`), and the local executor. The driver (`driver.Driver`) hands groups to an
executor and stores what comes back; the Ray executor runs the same `InProcess` code on its actors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from engine.events import async_run_context
from engine.experiments.adapters import mechanism
from engine.experiments.adapters.base import ExperimentAdapter, Models
from engine.experiments.definition import CallMode, Experiment
from engine.runctx import RunCancelled, checkpoint
from engine.store import Store
from models.registry import ModelHub

RECORD = "experiment.record"  # the run kind of a group's recording
DECIDE_CHUNK = 64  # cells decided at once (in a thread); a cancel or a signal is checked between chunks


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


@dataclass(frozen=True)
class GroupJob:
    """One group to record: its call parameters over the definition's base, on the experiment's cases
    (picklable: a Ray actor records it as this process does)."""

    definition: Experiment
    cases: list[Any]
    call_params: dict[str, Any]
    experiment_id: str
    group: str


class Executor(Protocol):
    """Where an experiment's groups are recorded and its settings decided; the driver does the rest."""

    name: str

    async def start(self, definition: Experiment, store: Store, models: Models | HubModels) -> None: ...

    async def record(self, job: GroupJob) -> Recorded: ...

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...


async def record_group(
    mech: ExperimentAdapter,
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

    async def record(self, job: GroupJob) -> Recorded:
        assert self.models is not None and self.store is not None
        mech = mechanism(job.definition.mechanism)
        return await record_group(
            mech, job.definition, job.cases, job.call_params, self.models, self.store, job.experiment_id, job.group
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
