"""Run control: progress reaches the controlling RunControl from tasks, and a cancel stops the next call
with RunCancelled, which run_context stores as `cancelled` with the events emitted before it."""

from __future__ import annotations

import asyncio

import pytest

from engine import runctx
from engine.events import run_context
from engine.store import Store
from tests.fakes.scripted import FnModel


def test_progress_reaches_the_control_from_tasks_and_is_free_outside() -> None:
    runctx.progress(total=3, step="nobody listens")  # outside a controlled block: no effect, no error
    seen: list[tuple[int, int | None, str]] = []
    ctrl = runctx.RunControl(on_progress=lambda p: seen.append((p.done, p.total, p.step)))

    async def unit(i: int) -> None:
        await asyncio.sleep(0)
        runctx.progress(advance=1, step=f"unit {i}")

    async def main() -> None:
        runctx.progress(total=3)
        await asyncio.gather(*(unit(i) for i in range(3)))

    with runctx.controlled(ctrl):
        asyncio.run(main())
    assert ctrl.progress.done == 3 and ctrl.progress.total == 3
    assert ctrl.progress.fraction == 1.0 and ctrl.progress.eta_s == 0.0
    assert [s[0] for s in seen] == [0, 1, 2, 3]


def test_cancel_stops_the_next_call_and_the_run_is_stored_cancelled(tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    model = FnModel(lambda r: "ok", call_log=store)
    ctrl = runctx.RunControl()

    async def work(handle) -> None:
        for i in range(5):
            await model.complete(f"line {i}")
            handle.emit("step", i=i)
            if i == 1:
                ctrl.cancel()

    with pytest.raises(runctx.RunCancelled):
        with runctx.controlled(ctrl), run_context(store, "test.cancel", {}) as handle:
            asyncio.run(work(handle))
    run = store.list_runs(kind="test.cancel")[0]
    assert run.status == "cancelled"
    steps = [e.payload["i"] for e in store.events(run.id) if e.type == "step"]
    assert steps == [0, 1]
    assert len(store.calls(run.id)) == 2  # the third call never went out
