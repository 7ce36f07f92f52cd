"""The run registry without Streamlit: start returns the id at once, an identical start attaches, progress
and ETA are stored for other tabs and processes, cancel stores `cancelled` with every completed event, and
an abandoned conversation is closed. The local generation stopping at its next token uses the real model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard.background import BackgroundLoop
from dashboard.live_runs import RegistryError, RunRegistry
from engine import runctx
from engine.jury.config import JuryCase, JuryConfig
from engine.jury.decisions import JurorSeat
from engine.jury.runner import Jury, run_case
from engine.runctx import RunCancelled
from engine.store import Store
from tests.engine.test_jury_run import ev, scripted

SEATS = [JurorSeat(juror_id=j, model_id=j, role_name=f"Role {j}") for j in "abc"]
PLAN = {
    "a": {0: ev("safe_pass", 80), 1: ev("unsafe_fail", 20, "I was wrong"), 2: ev("unsafe_fail", 20)},
    "b": {0: ev("unsafe_fail", 10), 1: ev("unsafe_fail", 10), 2: ev("unsafe_fail", 10)},
    "c": {0: ev("unsafe_fail", 30), 1: ev("unsafe_fail", 25), 2: ev("unsafe_fail", 25)},
}
CASE = JuryCase(id="leak", content="Agent: the password is hunter2")


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    bg = BackgroundLoop()
    yield bg
    bg.stop()


@pytest.fixture
def registry(loop: BackgroundLoop, store: Store) -> Iterator[RunRegistry]:
    reg = RunRegistry(loop, store, progress_every_s=0.0, reap_every_s=None, hard_cancel_after_s=30)
    yield reg
    reg.close()


def jury_start(registry: RunRegistry, store: Store, delay_s: float, config: JuryConfig | None = None) -> str:
    config = config or JuryConfig(
        consensus_threshold=2.0,
        max_discussion_rounds=2,
        stagnation_rounds=5,
        final_judgment_method="majority_vote",
        parallel=False,
    )
    jury = Jury(SEATS, scripted(PLAN, delay_s=delay_s), config)
    settings = {"case": CASE.model_dump(), "jurors": [s.model_dump() for s in SEATS], "jury": config.model_dump()}
    return registry.start("jury.run", settings, lambda: run_case(store, jury, CASE))


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_start_returns_the_run_id_while_it_runs_and_progress_reaches_the_total(
    registry: RunRegistry, store: Store, tmp_path: Path
) -> None:
    run_id = jury_start(registry, store, delay_s=0.05)
    run = store.get_run(run_id)
    assert run is not None and run.status == "running" and registry.is_live(run_id)
    registry.wait(run_id, timeout=60)
    assert store.get_run(run_id).status == "finished"  # type: ignore[union-attr]
    # 3 jurors × (phase 1 + 2 rounds) + the final judgment; read back from the store by another connection.
    other = Store(store.url)
    stored = other.progress(run_id)
    assert stored is not None and stored["done"] == stored["total"] == 10 and stored["ended"] is True
    assert stored["step"] == "final judgment" and stored["eta_s"] == 0
    other.dispose()


def test_progress_has_an_eta_after_the_first_unit(registry: RunRegistry, store: Store) -> None:
    run_id = jury_start(registry, store, delay_s=0.15)
    assert registry.progress(run_id)["eta_s"] is None  # type: ignore[index]  # nothing done: no pace yet
    wait_for(lambda: (store.progress(run_id) or {}).get("done", 0) >= 2)
    live = registry.progress(run_id)
    assert (
        live is not None and live["total"] == 4 and live["eta_s"] is not None and live["eta_s"] > 0
    )  # phase 1 and the final judgment: no round counted before it runs (#38)
    assert live["step"].startswith("phase 1")
    registry.cancel(run_id)
    with pytest.raises(RunCancelled):
        registry.wait(run_id, timeout=30)


def test_an_identical_start_while_live_attaches_to_it(registry: RunRegistry, store: Store) -> None:
    first = jury_start(registry, store, delay_s=0.1)
    second = jury_start(registry, store, delay_s=0.1)
    other = jury_start(
        registry,
        store,
        delay_s=0.1,
        config=JuryConfig(consensus_threshold=2.0, max_discussion_rounds=1, final_judgment_method="majority_vote"),
    )
    assert second == first and other != first
    registry.wait(first, timeout=60)
    registry.wait(other, timeout=60)
    assert len(store.list_runs(kind="jury.run")) == 2
    again = jury_start(registry, store, delay_s=0.0)  # the first has ended: a new run
    assert again not in (first, other)
    registry.wait(again, timeout=60)


def test_concurrent_identical_starts_start_one_run(registry: RunRegistry, store: Store) -> None:
    ids: list[str] = []
    threads = [threading.Thread(target=lambda: ids.append(jury_start(registry, store, delay_s=0.1))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1
    registry.wait(ids[0], timeout=60)
    assert len(store.list_runs(kind="jury.run")) == 1


def test_cancel_stores_cancelled_with_every_completed_event(registry: RunRegistry, store: Store) -> None:
    run_id = jury_start(registry, store, delay_s=0.2)
    wait_for(lambda: sum(e.type == "juror_evaluation" for e in store.events(run_id)) >= 2)
    assert registry.cancel(run_id)
    with pytest.raises(RunCancelled):
        registry.wait(run_id, timeout=30)
    run = store.get_run(run_id)
    assert run is not None and run.status == "cancelled" and run.error == "cancelled: cancelled by the user"
    types = [e.type for e in store.events(run_id)]
    assert types[0] == "run_started" and types[-1] == "run_cancelled"
    assert 2 <= types.count("juror_evaluation") <= 3 and "final_judgment" not in types
    assert [e.seq for e in store.events(run_id)] == list(range(len(types)))  # nothing lost in between
    assert not registry.is_live(run_id) and not registry.cancel(run_id)
    assert (store.progress(run_id) or {}).get("ended") is True


def test_a_start_that_fails_before_its_run_exists_says_why(registry: RunRegistry) -> None:
    async def broken() -> None:
        raise ValueError("no such panel")

    with pytest.raises(RegistryError, match="no such panel"):
        registry.start("jury.run", {"x": 1}, broken)


def test_an_abandoned_conversation_is_closed_as_interrupted(registry: RunRegistry, store: Store) -> None:
    registry.idle_s, registry.session_grace_s = 600, 5
    gone = store.create_run("handraise.conversation", {"a": 1})
    idle = store.create_run("handraise.conversation", {"a": 2})
    used = store.create_run("handraise.conversation", {"a": 3})
    session = {"alive": True}
    registry.track(gone.id, alive=lambda: session["alive"])
    registry.track(idle.id)
    registry.track(used.id, alive=lambda: True)
    now = time.monotonic()
    session["alive"] = False
    assert registry.reap_idle(now) == []  # the session may come back: a grace period first
    assert registry.reap_idle(now + 6) == [gone.id]
    assert registry.touch(used.id, now + 300)  # a turn: its idle clock starts again
    assert registry.reap_idle(now + 599) == []
    assert registry.reap_idle(now + 601) == [idle.id]  # no turn for 10 min
    assert store.get_run(gone.id).status == "interrupted"  # type: ignore[union-attr]
    assert "browser session ended" in (store.get_run(gone.id).error or "")  # type: ignore[union-attr]
    assert store.get_run(idle.id).status == "interrupted"  # type: ignore[union-attr]
    assert not registry.touch(gone.id) and registry.closed_reason(gone.id) == "its browser session ended"
    registry.release(used.id, summary={"turns": 0})
    assert store.get_run(used.id).status == "finished"  # type: ignore[union-attr]


@pytest.mark.model
def test_a_local_generation_stops_at_its_next_token(
    registry: RunRegistry, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real bundled model streams; the run is cancelled at the first piece and no further piece comes."""
    from engine.events import async_run_context
    from models.backends.llamacpp import LlamaCppModel
    from models.catalog import load_catalog

    model = LlamaCppModel(load_catalog().get("gemma3-270m"), call_log=store)
    pieces: list[str] = []
    cancelled_at: list[int] = []

    async def entry() -> None:
        async with async_run_context(store, "models.prompt", {"prompt": "story"}) as run:
            async for chunk in model.stream(
                "Write a very long story about a lighthouse keeper.", max_tokens=400, temperature=0.0
            ):
                if chunk.text:
                    pieces.append(chunk.text)
                    if not cancelled_at:
                        cancelled_at.append(len(pieces))
                        registry.cancel(run.run_id)

    run_id = registry.start("models.prompt", {"prompt": "story"}, entry)
    with pytest.raises(asyncio.CancelledError):
        registry.wait(run_id, timeout=300)
    assert cancelled_at == [1] and len(pieces) <= 2  # at most the token already on its way
    assert store.get_run(run_id).status == "cancelled"  # type: ignore[union-attr]

    # A non-streamed generation stops too: the run is cancelled as llama.cpp samples its first token, and no
    # second token is sampled (had the generation run to its end, nothing after it would notice the cancel
    # and the run would be `finished`).
    import llama_cpp

    sampled: list[int] = []
    real_sample = llama_cpp.Llama.sample

    def counting_sample(self: Any, *args: Any, **kwargs: Any) -> int:
        sampled.append(1)
        if len(sampled) == 1:
            control_of_essay[0].cancel()
        return real_sample(self, *args, **kwargs)

    monkeypatch.setattr(llama_cpp.Llama, "sample", counting_sample)
    control_of_essay: list[Any] = []

    async def generate() -> None:
        async with async_run_context(store, "models.prompt", {"prompt": "essay"}):
            control_of_essay.append(runctx.current())
            await model.complete(
                "Write a very long essay about the sea, the ships and the storms.", max_tokens=1500, temperature=0.0
            )

    essay = registry.start("models.prompt", {"prompt": "essay"}, generate)
    with pytest.raises(asyncio.CancelledError):
        registry.wait(essay, timeout=300)
    assert len(sampled) == 1
    assert store.get_run(essay).status == "cancelled"  # type: ignore[union-attr]


def test_the_progress_line_reads_counts_step_and_eta() -> None:
    from dashboard.watch import eta_text

    assert eta_text(None) == "starting…"
    assert eta_text({"done": 0, "total": 10, "step": "phase 1", "elapsed_s": 0.2, "eta_s": None}) == (
        "0 / 10 · phase 1 · 0 s elapsed · ETA after the first step"
    )
    assert eta_text({"done": 4, "total": 10, "step": "discussion round 1", "elapsed_s": 8.0, "eta_s": 12.4}) == (
        "4 / 10 · discussion round 1 · 8 s elapsed · about 12 s left"
    )
    recording = {"done": 0, "total": 264, "items": 7, "items_total": 24, "calls": 21, "step": "judged h07"}
    # #38 (5): the recording comes first and is what is counted until the first cell (it read "0 / 264")
    assert eta_text({**recording, "elapsed_s": 14.0, "eta_s": 170.0}) == (
        "recording: 7 / 24 items · then 264 cells · 21 calls · judged h07 · 14 s elapsed · about 3 min left"
    )
    assert eta_text({**recording, "items": 0, "calls": 0, "elapsed_s": 5.0, "eta_s": None}) == (
        "recording: 0 / 24 items · then 264 cells · 0 calls · judged h07 · 5 s elapsed · ETA after the first item"
    )
    assert eta_text({**recording, "done": 12, "items": 24, "elapsed_s": 50.0, "eta_s": 9.0}).startswith(
        "12 / 264 · 24 / 24 items recorded"
    )


def test_the_progress_bar_moves_with_the_time_while_a_recording_precedes_every_unit() -> None:
    from dashboard.watch import progress_fraction

    assert progress_fraction({"done": 0, "total": 264, "elapsed_s": 30.0, "eta_s": 90.0}) == 0.25
    assert progress_fraction({"done": 66, "total": 264, "elapsed_s": 1.0, "eta_s": None}) == 0.25
    # before the recording has a pace, the bar moves with the items it records
    assert progress_fraction({"done": 0, "total": 264, "items": 6, "items_total": 24, "eta_s": None}) == 0.25
    assert progress_fraction(None) == 0.0


def test_only_the_newest_ended_runs_keep_their_return_value(tmp_path: Path) -> None:
    """An ended run's return value (a page may show it) is kept for the newest `keep_ended` runs only; the
    older ones are read from the store, so a long-lived dashboard does not hold every result in memory."""
    from engine.events import async_run_context

    store = Store(f"sqlite:///{tmp_path / 'keep.db'}")
    loop = BackgroundLoop()
    registry = RunRegistry(loop, store, reap_every_s=None, keep_ended=2)

    def entry(i: int) -> Any:
        async def run() -> int:
            async with async_run_context(store, "keep.test", {"i": i}):
                return i

        return run

    ids = [registry.start("keep.test", {"i": i}, entry(i)) for i in range(4)]
    for run_id in ids[-1:]:
        registry.wait(run_id, timeout=10)
    deadline = time.monotonic() + 10
    while sum(registry.get(r) is not None for r in ids) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [registry.get(r) is not None for r in ids] == [False, False, True, True]
    assert all(store.get_run(r).status == "finished" for r in ids)  # type: ignore[union-attr]
    loop.stop()


class _LookedTooLate(threading.Event):
    """The interleaving seen under concurrent writers (issue 26): the starter's wait for the run times out,
    and before it looks at the entry point's future the loop has stored the run and ended the entry point
    (the starter's thread was waiting for the CPU). `then` does that, once, right after the timeout."""

    def __init__(self, then: Any) -> None:
        super().__init__()
        self.then = then

    def wait(self, timeout: float | None = None) -> bool:
        signaled = super().wait(timeout)
        if not signaled and self.then is not None:
            then, self.then = self.then, None
            then()
        return signaled


def test_a_run_stored_and_ended_between_two_looks_is_not_called_missing(
    registry: RunRegistry, loop: BackgroundLoop, store: Store
) -> None:
    import concurrent.futures

    from engine.events import run_context

    control = runctx.RunControl()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def store_and_end() -> None:
        with runctx.controlled(control), run_context(store, "director.check", {"text": "x"}) as run:
            run.summary = {"status": "PASS"}
        future.set_result(None)

    control.attached = _LookedTooLate(store_and_end)
    registry._wait_attached(control, future, "director.check")  # no RegistryError: the run exists
    stored = store.get_run(control.run_id or "")
    assert stored is not None and stored.status == "finished"
    # An entry point that really stored nothing is still told apart.
    empty: concurrent.futures.Future[Any] = concurrent.futures.Future()
    empty.set_result(None)
    with pytest.raises(RegistryError, match="ended without storing a run"):
        registry._wait_attached(runctx.RunControl(), empty, "director.check")
