"""The Ray executor: the same groups and decisions as the local executor, on Ray actors.

`ray.init(address=RAY_ADDRESS)` joins an existing cluster; without RAY_ADDRESS a local instance starts
(`num_cpus=2`, no dashboard). Each actor opens the store at the driver's URL (a cluster needs a database
every node reaches: PostgreSQL) and builds its models from `HubModels`; it runs `concurrency` groups at
once (an async actor), so at equal concurrency it waits on the same calls the local executor does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.experiments.definition import ROOT, Experiment
from engine.experiments.runner import HubModels, InProcess, Recorded

if TYPE_CHECKING:
    from engine.experiments.mechanisms import Models
    from engine.store import Store


class _Worker(InProcess):
    def __init__(self, store_url: str, models: HubModels) -> None:
        from engine.store import Store

        self.store = Store(store_url, reap=False)
        self.models = models.build(self.store)

    async def ping(self) -> int:
        return os.getpid()


def ensure_ray(address: str | None = None) -> Any:
    """Ray, initialised: at `address` / RAY_ADDRESS, else a local instance (2 CPUs, no dashboard)."""
    import ray

    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        runtime_env = {"env_vars": {"PYTHONPATH": path}}
        if address:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
        else:
            ray.init(num_cpus=2, include_dashboard=False, runtime_env=runtime_env, log_to_driver=False)
    return ray


class RayExecutor:
    """`actors` actors, each running up to `max_concurrency` groups at once (default: the definition's
    concurrency; the driver bounds what is in flight anyway). With `keep_actors`, the actors outlive one
    experiment and serve the next one on the same store and models (call `shutdown()` when done): what a
    page or a benchmark does to pay Ray's start-up once."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        actors: int = 1,
        *,
        max_concurrency: int | None = None,
        keep_actors: bool = False,
    ) -> None:
        self.address = address
        self.actors = actors
        self.max_concurrency = max_concurrency
        self.keep_actors = keep_actors
        self._workers: list[Any] = []
        self._key: tuple[str, HubModels, int] | None = None
        self._next = 0

    async def start(self, definition: Experiment, store: Store, models: Models | HubModels) -> None:
        if not isinstance(models, HubModels):
            raise ValueError("the ray executor builds its models on the workers: pass HubModels")
        concurrency = max(definition.concurrency, self.max_concurrency or 0)
        key = (str(store.url), models, concurrency)
        if self._workers and self._key == key:
            return
        await self.shutdown()
        ray = ensure_ray(self.address)
        cls = ray.remote(num_cpus=0, max_concurrency=concurrency)(_Worker)
        self._workers = [cls.remote(store.url, models) for _ in range(self.actors)]
        self._key = key
        for w in self._workers:
            await w.ping.remote()

    def _worker(self) -> Any:
        w = self._workers[self._next % len(self._workers)]
        self._next += 1
        return w

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        experiment_id: str,
        group: str,
    ) -> Recorded:
        result: Recorded = await self._worker().record.remote(
            definition, list(cases), dict(call_params), experiment_id, group
        )
        return result

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._worker().decide.remote(
            definition, recording, [dict(d) for d in decisions]
        )
        return result

    async def close(self) -> None:
        if not self.keep_actors:
            await self.shutdown()

    async def shutdown(self) -> None:
        if not self._workers:
            return
        import ray

        for w in self._workers:
            ray.kill(w)
        self._workers = []
        self._key = None
