"""The Ray executor: the same groups and decisions as the local executor, on Ray actors.

`ray.init(address=RAY_ADDRESS)` joins an existing cluster; without RAY_ADDRESS a local instance starts
(`num_cpus=2`, no dashboard). Each actor opens the store at the driver's URL (a cluster needs a database
every node reaches: PostgreSQL) and builds its models from `HubModels`; it runs `concurrency` groups at
once (an async actor), so at equal concurrency it waits on the same calls the local executor does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, get_settings
from engine.experiments.definition import ROOT, Experiment
from engine.experiments.execution import GroupJob, HubModels, InProcess, Recorded
from engine.store import Store

if TYPE_CHECKING:
    from engine.experiments.adapters.base import Models


class _Worker(InProcess):
    def __init__(self, store_url: str, models: HubModels) -> None:

        self.store = Store(store_url, reap=False)
        self.models = models.build(self.store)

    async def ping(self) -> int:
        return os.getpid()


class RayUnavailable(ConfigError):
    """Ray cannot be reached or used at the address given; the message names RAY_ADDRESS and what to do."""


def _probe(address: str, timeout_s: float) -> None:
    """Refuse at once an address nothing answers on: `ray.init` would retry for minutes, warning each time."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", a bare host: Ray's own lookup answers quickly
    host = host.strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        reason = f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise RayUnavailable(
            f"cannot reach the Ray cluster at RAY_ADDRESS={address} ({reason}): "
            "start it (`ray start --head`), fix RAY_ADDRESS, or unset it for a local Ray instance"
        ) from None


def _keep_signal_handlers() -> Any:
    """`ray.init` installs its own SIGTERM handler in the driver (it exits 15 with a traceback, leaving runs
    `running`): the process's handlers (the CLI's: cancel, close the runs as `cancelled`, exit 143 / 130) are
    put back once Ray has started."""
    if threading.current_thread() is not threading.main_thread():
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def kept() -> Iterator[None]:
        saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in saved.items():
                if handler is not None:
                    signal.signal(signum, handler)

    return kept()


def ensure_ray(address: str | None = None, timeout_s: float | None = None) -> Any:
    """Ray, initialised: at `address` / RAY_ADDRESS, else a local instance (2 CPUs, no dashboard). An address
    that does not answer within `timeout_s` (JUDGELAB_RAY_CONNECT_TIMEOUT_S) is a RayUnavailable naming it;
    so is a `ray://` address without the Ray client installed."""
    import ray  # heavy: ray

    if not ray.is_initialized():
        timeout_s = get_settings().ray_connect_timeout_s if timeout_s is None else timeout_s
        address = address or os.environ.get("RAY_ADDRESS") or None
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        runtime_env = {"env_vars": {"PYTHONPATH": path}}
        with _keep_signal_handlers():
            if address:
                if address.startswith("ray://"):
                    _client_available(address)
                    _probe(address.removeprefix("ray://"), timeout_s)
                else:
                    _probe(address, timeout_s)
                try:
                    ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise RayUnavailable(
                        f"cannot join the Ray cluster at RAY_ADDRESS={address}: {' '.join(str(exc).split())[:300]}"
                    ) from None
            else:
                ray.init(num_cpus=2, include_dashboard=False, runtime_env=runtime_env, log_to_driver=False)
    return ray


def _client_available(address: str) -> None:
    # heavy: ray
    from ray._private.utils import get_ray_client_dependency_error  # what ray.init checks, then a ValueError

    if get_ray_client_dependency_error() is not None:
        raise RayUnavailable(
            f"RAY_ADDRESS={address}: a ray:// address needs the Ray client, which is not installed "
            '(`pip install "ray[client]"`); or give the cluster\'s GCS address (HEAD:6379) instead'
        ) from None


async def _cancel_remote(ref: Any, wait_s: float = 3.0) -> None:
    """Cancel an actor task whose caller was cancelled (a Cancel, SIGTERM, SIGINT): Ray cancels the task's
    coroutine in the actor, whose run then closes as `cancelled` before the actor is killed. Waited for at
    most `wait_s`; what is still open after that is closed by the driver (`close_recordings`)."""
    import ray  # heavy: ray

    with contextlib.suppress(Exception):
        ray.cancel(ref)
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(asyncio.wrap_future(ref.future()), wait_s)


async def _remote(ref: Any) -> Any:
    """The result of an actor task; the task is cancelled on the actor when its caller is."""
    try:
        return await ref
    except asyncio.CancelledError:
        await _cancel_remote(ref)
        raise


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

    async def record(self, job: GroupJob) -> Recorded:
        recorded: Recorded = await _remote(self._worker().record.remote(job))
        return recorded

    async def decide(
        self, definition: Experiment, recording: Any, decisions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        decided: list[dict[str, Any]] = await _remote(
            self._worker().decide.remote(definition, recording, [dict(d) for d in decisions])
        )
        return decided

    async def close(self) -> None:
        if not self.keep_actors:
            await self.shutdown()

    async def shutdown(self) -> None:
        if not self._workers:
            return
        import ray  # heavy: ray

        for w in self._workers:
            ray.kill(w)
        self._workers = []
        self._key = None
