"""Run control: progress reaches the controlling RunControl from tasks, and a cancel stops the next call
with RunCancelled, which run_context stores as `cancelled` with the events emitted before it."""

from __future__ import annotations

import asyncio
from typing import Any

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


# -- the ETA ---------------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(ticks: list[tuple[float, dict[str, int]]], probes: list[float], **start: int) -> dict[float, float | None]:
    """Feed `ticks` (time, report) to a Progress on a fake clock and read its ETA at each probe time."""
    clock = Clock()
    p = runctx.Progress(started=0.0, clock=clock)
    p.done, p.total, p.items_total = 0, start.get("total"), start.get("items_total")
    events = sorted([(t, 0, r) for t, r in ticks] + [(t, 1, None) for t in probes], key=lambda e: (e[0], e[1]))
    out: dict[float, float | None] = {}
    for t, is_probe, report in events:
        clock.now = t
        if is_probe:
            out[t] = p.eta_s
        else:
            assert report is not None
            p.done += report.get("advance", 0)
            p.items += report.get("items", 0)
            p.tick(t)
    return out


def test_a_model_sweeps_eta_converges_to_the_time_left_instead_of_growing_with_the_elapsed() -> None:
    """A model sweep as the runner reports it: 3 groups of 20 cases recorded one after the other (1.5 s a
    case, 8 s to load the model first), each group's 88 cells decided in a burst at the end of its recording.
    The old estimator (elapsed / cells done × cells left) said 'ETA after the first step' for the whole first
    recording and then the elapsed time, growing; this one follows the recording's own pace."""
    ticks: list[tuple[float, dict[str, int]]] = []
    t = 8.0
    for _group in range(3):
        for _case in range(20):
            t += 1.5
            ticks.append((t, {"items": 1}))
        for _cell in range(88):
            t += 0.002
            ticks.append((t, {"advance": 1}))
    end = t
    probes = [x / 4 for x in range(int(end * 4))]
    eta = replay(ticks, probes, total=264, items_total=60)
    first_case_done = 8.0 + 1.5
    for at, estimate in eta.items():
        if at < first_case_done:
            assert estimate is None  # nothing recorded yet: no pace to go by
        elif at >= first_case_done + 1.5:  # from the second case on: the recording's pace, excluding the warm-up
            assert estimate is not None and abs(estimate - (end - at)) <= 1.0, (at, estimate, end - at)
    # between two ticks the estimate counts down: it never grows with the elapsed time
    window = [eta[x] for x in probes if 40.0 <= x <= 42.0]
    assert all(a is not None and b is not None and b <= a for a, b in zip(window, window[1:], strict=False))


def test_the_eta_of_units_in_bursts_counts_down_to_the_next_burst() -> None:
    """Two halves of 132 units that each finish in one burst after 60 s (no items reported): the ETA at the
    first burst is the time to the second, and it counts down, where the old one equalled the elapsed time."""
    ticks = [(60.0 + i * 0.001, {"advance": 1}) for i in range(132)] + [
        (120.0 + i * 0.001, {"advance": 1}) for i in range(132)
    ]
    eta = replay(ticks, [61.0, 75.0, 90.0, 110.0, 119.0], total=264)
    for at in (61.0, 75.0, 90.0, 110.0, 119.0):
        estimate = eta[at]
        assert estimate is not None and abs(estimate - (120.13 - at)) <= 1.0, (at, estimate)


def test_a_noisy_steady_runs_eta_error_shrinks_as_it_goes() -> None:
    """Units of random length (0.5–1.5 s): the error of the estimate, relative to the run's length, shrinks
    towards the end."""
    import random

    rng = random.Random(7)
    t, ticks = 3.0, []
    for _ in range(100):
        t += rng.uniform(0.5, 1.5)
        ticks.append((t, {"advance": 1}))
    end = t
    probes = [end * f for f in (0.25, 0.5, 0.75, 0.9, 0.99)]
    eta = replay(ticks, probes, total=100)
    errors = [abs((eta[p] or 0.0) - (end - p)) for p in probes]
    assert errors[-1] <= 1.0 and errors[-2] <= 0.1 * end and max(errors) <= 0.25 * end


def test_a_resumed_run_paces_only_the_units_it_runs() -> None:
    clock = Clock()
    ctrl = runctx.RunControl()
    ctrl.progress = runctx.Progress(started=0.0, clock=clock)
    ctrl.report(total=100, done=90)  # 90 cells finished by an earlier run
    clock.now = 10.0
    ctrl.report(advance=1)
    assert ctrl.progress.eta_s == pytest.approx(90.0)  # 10 s a cell, 9 left


def test_an_experiment_reports_its_recordings_items_and_calls_before_any_cell(tmp_path) -> None:
    """The hand-raise sweep records 24 cases (one batched call each) before its first cell: the progress
    counts them and has an ETA while no cell is done."""
    from engine.experiments import run_experiment
    from tests.engine.test_experiments import handraise_definition, scripted_judge

    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    definition = handraise_definition(tmp_path, "threshold: [0.4, 0.6]\nmode: [focus, brainstorm]\n")
    seen: list[dict[str, Any]] = []
    ctrl = runctx.RunControl(on_progress=lambda p: seen.append(p.as_dict()))
    with runctx.controlled(ctrl):
        asyncio.run(run_experiment(definition, store, scripted_judge(store)))
    before_cells = [s for s in seen if s["done"] == 0]
    assert before_cells[0]["items_total"] == 24 and before_cells[-1]["items"] == 24
    assert [s["calls"] for s in before_cells if s.get("items")] == list(range(1, 25))
    assert all(s["eta_s"] is not None for s in before_cells if 2 <= int(s.get("items") or 0) < 24)
    assert seen[-1]["done"] == seen[-1]["total"] == 4 and seen[-1]["eta_s"] == 0.0


def test_the_eta_never_drops_below_the_units_known_to_remain() -> None:
    """#38 (5): a duo of 8 turns whose first two are quick (2 s) and whose third runs long (retries): while it is in
    flight, the estimate never falls below the five turns after it at the quickest pace seen (it read "about 2 s
    left" with 22 s to go); it appears only once this run has a pace."""
    ticks = [(2.0, {"advance": 1}), (4.0, {"advance": 1}), (30.0, {"advance": 1})]
    eta = replay(ticks, [1.0, 5.0, 8.0, 20.0, 29.0], total=8)
    assert eta[1.0] is None  # no turn done yet: no pace of this run to go by
    for at in (5.0, 8.0, 20.0, 29.0):
        estimate = eta[at]
        assert estimate is not None and estimate >= 5 * 2.0 - 1e-9, (at, estimate)  # five more turns, ≥ 2 s each


def test_a_jury_that_never_discusses_counts_no_round_it_will_not_run() -> None:
    """#38 (5): phase 1 and the final judgment are the steps; a round joins the total only when it starts."""
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, progress_emit

    seats = [JurorSeat(juror_id=f"j{i}", model_id="mock", role_name=f"r{i}") for i in range(3)]
    ctrl = runctx.RunControl()
    with runctx.controlled(ctrl):
        emit = progress_emit(lambda *a, **k: None, Jury(seats, {}))
        assert ctrl.progress.total == 4
        for _ in seats:
            emit("juror_evaluation")
        emit("juror_statement", round=1)
        assert ctrl.progress.total == 7 and ctrl.progress.done == 4
        emit("juror_statement", round=1)
        emit("discussion_ended")
        emit("final_judgment")
    assert ctrl.progress.done == ctrl.progress.total == 6


def test_a_unit_count_reported_as_it_goes_has_a_pace() -> None:
    """#38 (5): `done=` reported as a run goes (the skip simulation) paces the ETA; only `done=` given with the
    total is an earlier run's work (resumed). It had no ETA until the end."""
    clock = Clock()
    ctrl = runctx.RunControl()
    ctrl.progress = runctx.Progress(started=0.0, clock=clock)
    ctrl.report(total=100)
    for t, done in ((1.0, 10), (2.0, 20)):
        clock.now = t
        ctrl.report(done=done)
    assert ctrl.progress.eta_s == pytest.approx(8.0)  # 0.1 s a unit, 80 left
