"""The skip-cache simulator: deterministic workloads, workload files, recorded judges, the saving and
the delay bound, the sweep's Pareto front."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from engine.skip.config import ResponseConfig
from engine.skip.decisions import JudgmentResult
from engine.skip.judges import JudgeOutcome
from engine.skip.recording import RecordedJudge, state_key
from engine.skip.simulation import bound_text, compare, delay_bound, simulate
from engine.skip.sweep import pareto_front
from engine.skip.workload import EPOCH, WorkloadError, WorkloadSpec, dump_workload, generate_workload, load_workload


class HashJudge:
    """A deterministic stand-in judge for simulator mechanics: the verdict is a hash of the state.
    (The real judges — ModelJudge with a model, RecordedJudge with recorded Gemma judgments — are tested
    in test_skip_cache.py and by the CLI and page tests.)"""

    def __init__(self) -> None:
        self.calls = 0

    async def judge(self, history, now) -> JudgeOutcome:
        self.calls += 1
        r = random.Random(state_key(history))
        question = any(ch in history[-1].text for ch in "？?") or "困" in history[-1].text
        return JudgeOutcome(
            result=JudgmentResult(
                should_respond=question and r.random() < 0.7,
                reason="r",
                confidence=r.choice([0.95, 0.9, 0.8, 0.75, 0.6, 0.4]),
            ),
            prompt_tokens=400,
            completion_tokens=40,
            cost=0.0004,
        )


def test_generated_workload_is_deterministic_and_shaped() -> None:
    spec = WorkloadSpec(channels=10, hours=6, seed=3)
    a, b = generate_workload(spec), generate_workload(spec)
    assert a == b and a != generate_workload(spec.model_copy(update={"seed": 4}))
    assert all(x.at <= y.at for x, y in zip(a, a[1:], strict=False))
    assert {m.channel_id for m in a} <= {f"C{i:03d}" for i in range(10)}
    assert len({m.id for m in a}) == len(a)


@pytest.mark.parametrize("hours", [2.0, 4.0, 12.0, 30.0])
def test_a_workload_shorter_than_its_busy_block_keeps_the_bursts_its_rate_asks_for(hours: float) -> None:
    """Half the bursts go to the 09:00–18:00 block; a workload that ends before it (or a partial last day) once
    dropped them silently: 12 channels × 4 h at 1 burst an hour held 61 messages where ~144 were asked for."""
    spec = WorkloadSpec(channels=40, hours=hours, bursts_per_hour=1.0, seed=11)
    bursts = {m.id.rsplit("-", 1)[0] for m in generate_workload(spec)}
    expected = spec.channels * spec.hours * spec.bursts_per_hour
    assert 0.85 * expected <= len(bursts) <= 1.15 * expected, (len(bursts), expected)
    assert all((m.at - EPOCH).total_seconds() < hours * 3600 for m in generate_workload(spec))


def test_the_default_workload_is_as_recorded() -> None:
    """The recorded judgments of the default workload (data/recordings) replay only on the very same messages."""
    messages = generate_workload(WorkloadSpec())
    assert len(messages) == 846 and messages[0].id == "C042-3-0" and messages[-1].id == "C042-1-2"


def test_workload_file_round_trip_and_errors(tmp_path: Path) -> None:
    messages = generate_workload(WorkloadSpec(channels=5, hours=8, seed=1))
    assert messages
    path = tmp_path / "w.jsonl"
    dump_workload(messages, path)
    assert load_workload(path) == messages
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"t": 0, "channel": "C", "id": "a"}\n{"t": -1, "channel": "C", "id": "b"}\nnope\n'
        '{"t": 5, "id": "c"}\n{"t": 6, "channel": "C", "id": "a"}\n',
        encoding="utf-8",
    )
    with pytest.raises(WorkloadError) as info:
        load_workload(bad)
    assert [p.split(": ", 1)[0] for p in info.value.problems] == [f"{bad}:{n}" for n in (2, 3, 4, 5)]
    assert "duplicate id a" in info.value.problems[-1]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_default_workload_saves_over_90_percent_within_the_delay_bound() -> None:
    messages = generate_workload(WorkloadSpec())
    result = asyncio.run(compare(messages, HashJudge(), ResponseConfig(), hours=24))
    assert result["calls_saved_pct"] >= 90
    # the interval resamples channels (each channel's calls hang together through its cache window)
    low, high = result["calls_saved_pct_ci"]
    assert low <= result["calls_saved_pct"] <= high <= 100 and high - low > 0
    one_scope = messages[:1]  # one conversation says nothing about the next: no interval
    assert asyncio.run(compare(one_scope, HashJudge(), ResponseConfig(), hours=24))["calls_saved_pct_ci"] is None
    with_cache = result["with_cache"]
    assert with_cache["delay_max_s"] <= 300 + 60
    assert with_cache["never_judged"] == 0
    assert result["tokens_saved"] == (result["without_cache"]["judge_calls"] - with_cache["judge_calls"]) * 440


def test_delay_bound_is_not_applicable_when_nothing_was_judged() -> None:
    """A run where every judgment failed has no first judgment: the bound is n/a, never "within"."""
    messages = generate_workload(WorkloadSpec(channels=4, hours=3, bursts_per_hour=1.0, seed=5))
    assert messages
    result = asyncio.run(compare(messages, RecordedJudge({}), ResponseConfig(), hours=3))
    b = result["with_cache"]
    assert b["judge_calls"] == 0 and b["failures"] > 0 and b["delay_max_s"] is None
    assert result["delay_bound_met"] is None and result["delay_bound_s"] == 360
    assert bound_text(None) == "n/a (nothing was judged)"
    judged = asyncio.run(compare(messages, HashJudge(), ResponseConfig(), hours=3))
    assert judged["delay_bound_met"] is True and bound_text(True) == "within bound"
    assert delay_bound({"delay_max_s": 361.0}) == (360, False) and bound_text(False) == "over bound"


def test_recorded_judge_replays_a_live_run_identically(tmp_path: Path) -> None:
    messages = generate_workload(WorkloadSpec(channels=5, hours=4, seed=9))
    live = RecordedJudge({}, HashJudge())
    first = asyncio.run(simulate(messages, live, with_cache=True, hours=4)).summary()
    path = tmp_path / "rec.jsonl"
    live.dump(path)
    replayed = RecordedJudge.load(path)
    second = asyncio.run(simulate(messages, replayed, with_cache=True, hours=4)).summary()
    assert first == second
    assert live.live_calls == len(live.records) == len(path.read_text().splitlines())
    # a state never recorded is a typed miss: nothing is cached and it counts as a failure
    empty = asyncio.run(simulate(messages, RecordedJudge({}), with_cache=True, hours=4)).summary()
    assert empty["judge_calls"] == 0 and empty["failures"] > 0
    row = json.loads(path.read_text().splitlines()[0])
    assert {"state", "should_respond", "reason", "confidence", "prompt_tokens"} <= set(row)


def test_each_state_is_judged_live_once_even_without_cache() -> None:
    messages = generate_workload(WorkloadSpec(channels=3, hours=3, seed=2))
    inner = HashJudge()
    judge = RecordedJudge({}, inner)
    result = asyncio.run(simulate(messages, judge, with_cache=False, hours=3)).summary()
    assert inner.calls == len(judge.records) < result["judge_calls"]


def test_pareto_front() -> None:
    points = [(100, 50), (80, 60), (120, 40), (110, 55), (80, 70)]
    assert pareto_front(points) == [0, 1, 2]


def test_judge_quality_against_the_generator_labels() -> None:
    from engine.skip.quality import generated_labels, judge_quality

    messages = generate_workload(WorkloadSpec(channels=6, hours=6, bursts_per_hour=1.0, seed=3))
    labels = generated_labels(messages)
    assert labels and set(labels) <= {m.id for m in messages}
    assert all(labels[m.id] == labels[m.id.rsplit("-", 1)[0] + "-0"] for m in messages)  # a burst shares one label

    def recorded(flip: bool, confidence: float) -> RecordedJudge:
        return RecordedJudge(
            {
                f"{m.channel_id}:top|{m.id}": JudgeOutcome(
                    result=JudgmentResult(should_respond=labels[m.id] != flip, reason="", confidence=confidence)
                )
                for m in messages
            }
        )

    right = judge_quality(recorded(False, 0.9), labels)
    assert right["auc"] == 1.0 and right["accuracy"] == 1.0 and right["share_confidence_ge_0_7"] == 1.0
    assert right["auc_ci"][1] == 1.0 > right["auc_ci"][0] > 0.5
    assert right["accuracy_ci"][1] == 1.0 > right["accuracy_ci"][0] > 0.9
    wrong = judge_quality(recorded(True, 0.6), labels)
    assert wrong["auc"] == 0.0 and wrong["accuracy"] == 0.0 and wrong["share_confidence_ge_0_7"] == 0.0


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_second_judge_records_the_very_states_of_a_recording_and_resumes(tmp_path: Path) -> None:
    """`record_alongside`: the shipped recording drives both simulations, so the other judge is asked about
    exactly its states (each once); a partial output is resumed with no repeated call."""
    from engine.skip.recording import record_alongside

    shipped = Path(__file__).parents[2] / "data" / "recordings" / "skipcache-default.jsonl"
    states = set(RecordedJudge.load(shipped).records)
    messages = generate_workload(WorkloadSpec())
    out = tmp_path / "other.jsonl"
    judge = HashJudge()
    judged, calls = asyncio.run(record_alongside(messages, shipped, judge, out, hours=24.0, write_every=50))
    assert judged == calls == judge.calls == len(states)
    assert set(RecordedJudge.load(out).records) == states  # the same states, judged by the other judge
    # cut the recording short (an interrupted run): the rest is asked for, and nothing twice
    kept = out.read_text(encoding="utf-8").splitlines()[:100]
    out.write_text("\n".join(kept) + "\n", encoding="utf-8")
    again = HashJudge()
    judged, calls = asyncio.run(record_alongside(messages, shipped, again, out, hours=24.0))
    assert judged == len(states) and calls == again.calls == len(states) - 100
    first = {k: v.result for k, v in RecordedJudge.load(out).records.items()}
    assert all(r is not None for r in first.values())


def test_a_simulation_that_never_awaits_a_model_still_lets_the_loop_serve_others() -> None:
    """The dashboard runs simulations on its one background loop: a judge that never awaits (a recording, a
    stand-in) must not hold the loop for the whole simulation, or every other coroutine waits behind it."""
    messages = generate_workload(WorkloadSpec(channels=6, hours=6, seed=2))
    ticks: list[int] = []

    async def ticker() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    async def both() -> None:
        other = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        ticks.clear()
        await simulate(messages, HashJudge(), ResponseConfig(), hours=6)
        other.cancel()

    asyncio.run(both())
    assert len(ticks) >= 40  # the other coroutine ran between checks, about once per 2 % of them
