"""The entry points report progress through `engine.runctx` (a total once, then every unit up to it) and stop
between calls once their run is cancelled, which stores the run as `cancelled` with every event so far."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.runctx import Progress, RunCancelled, RunControl, controlled
from tests.fakes.scripted import FnModel
from tests.fakes.servers import fill_schema


def scripted(store: Any, text: str = "えー、ほんと？楽しそうだわ！") -> FnModel:
    """Structured requests get a valid object (strings 'x', numbers mid-range), free text gets `text`."""
    return FnModel(lambda r: fill_schema(r.json_schema, lambda _p: "x") if r.json_schema else text, call_log=store)


def controlled_run(make: Callable[[], Awaitable[Any]]) -> tuple[Any, list[tuple[int, int | None, str]]]:
    seen: list[tuple[int, int | None, str]] = []

    def record(p: Progress) -> None:
        seen.append((p.done, p.total, p.step))

    async def go() -> Any:
        with controlled(RunControl(on_progress=record)):
            return await make()

    return asyncio.run(go()), seen


def assert_complete(seen: list[tuple[int, int | None, str]], total: int) -> None:
    """One total, counts that never go back, and the last report at done == total."""
    assert seen, "no progress reported"
    assert {t for _, t, _ in seen} == {total}
    dones = [d for d, _, _ in seen]
    assert dones == sorted(dones) and dones[-1] == total


def test_director_entry_points_report_progress(store: Any) -> None:
    from engine.director.batch import ScriptConfig, run_script
    from engine.director.dialogue import DuoConfig, run_duo
    from engine.director.review import CheckConfig, review_line
    from engine.director.scripts import ScriptLine

    model = scripted(store)
    check = CheckConfig(character="yana", text="えー、楽しいわ！")
    result, seen = controlled_run(lambda: review_line(check, None, store))
    assert_complete(seen, 1)
    assert result.review.status.name in ("PASS", "WARN", "RETRY")
    texts = ["えー、楽しいわ！", "まだ未成年じゃないかな。", "海だね。"]
    lines = [ScriptLine(id=f"l{i}", text=t) for i, t in enumerate(texts)]
    result, seen = controlled_run(
        lambda: run_script(ScriptConfig(lines=lines, character="yana", model_id="m"), lambda _id: model, store)
    )
    assert_complete(seen, 3)
    assert [s for _, _, s in seen[1:]] == [f"{r.id}: {r.status}" for r in result.rows]
    assert "l1" not in result.averages and set(result.averages) == {"l0", "l2"}  # RETRY lines are not scored
    result, seen = controlled_run(
        lambda: run_duo(DuoConfig(first="yana", second="ayu", model_id="m", turns=3), lambda _id: model, store)
    )
    assert_complete(seen, 3)
    assert len(result.turns) == 3


def test_a_cancelled_duo_stops_between_calls_and_keeps_its_events(store: Any) -> None:
    from engine.director.dialogue import DuoConfig, run_duo

    ctrl = RunControl()
    calls = []

    def answer(request: Any) -> str:
        calls.append(request)
        if len(calls) == 2:
            ctrl.cancel("enough")  # the third call never starts
        return "えー、ほんと？楽しそうだわ！"

    model = FnModel(answer, call_log=store)

    async def go() -> Any:
        with controlled(ctrl):
            return await run_duo(DuoConfig(first="yana", second="ayu", model_id="m", turns=5), lambda _id: model, store)

    with pytest.raises(RunCancelled):
        asyncio.run(go())
    (run,) = store.list_runs(kind="director.duo")
    assert run.status == "cancelled" and len(calls) == 2
    # Turn 1 (やな) passed; あゆ's first draft (in やな's voice) was rejected and its retry was never sent.
    types = [e.type for e in store.events(run.id)]
    assert types == ["run_started", "director_verdict", "director_turn", "director_verdict", "run_cancelled"]
    assert ctrl.progress.done == 1 and ctrl.progress.total == 5
    assert "enough" in (run.error or "") or "cancel" in (run.error or "")


def test_skip_simulation_reports_the_checks_of_both_runs(store: Any, tmp_path: Path) -> None:
    from engine.skip.recording import RecordedJudge
    from engine.skip.run import SimulationConfig, run_simulation
    from engine.skip.simulation import check_count, simulate
    from engine.skip.sweep import TRADEOFF_DEFAULT_SKIP, TRADEOFF_HIGH_SKIP
    from engine.skip.workload import WorkloadSpec, generate_workload
    from tests.engine.test_skip_simulation import HashJudge

    spec = WorkloadSpec(channels=3, hours=2, bursts_per_hour=1.0, seed=2)
    judge = RecordedJudge({}, HashJudge())
    asyncio.run(simulate(generate_workload(spec), judge, with_cache=False, hours=spec.hours))
    judge.dump(tmp_path / "rec.jsonl")
    config = SimulationConfig(workload=spec, recording=str(tmp_path / "rec.jsonl"))
    report, seen = controlled_run(lambda: run_simulation(config, None, store))
    checks = check_count(report.messages, config.response, spec.hours)
    # both simulations, then the trade-off sweep's settings, each about one simulation's checks (#38: counted)
    assert_complete(seen, (2 + len(TRADEOFF_HIGH_SKIP) * len(TRADEOFF_DEFAULT_SKIP)) * checks)
    assert report.comparison["without_cache"]["checks"] == report.comparison["with_cache"]["checks"] == checks
    assert report.detail.timeline and store.get_run(report.run_id).summary["result"] == report.comparison
    # the trade-off grid is swept in the same run, from the judgments it made, and stored with it
    assert len(report.sweep) == len(TRADEOFF_HIGH_SKIP) * len(TRADEOFF_DEFAULT_SKIP)
    assert store.get_run(report.run_id).summary["sweep"] == report.sweep and report.live_calls == 0
    assert any(r["pareto"] for r in report.sweep)


@pytest.mark.model  # the packaged embedder
def test_confidence_entry_points_report_progress(store: Any) -> None:
    from engine.confidence.calibration import CalibrationConfig, LabelledItem, calibrate_labels
    from engine.confidence.evaluation import EvaluationConfig, evaluate
    from engine.confidence.factors import parse_factors

    model = scripted(store)
    config = EvaluationConfig(model_id="m", query="q?", answer="a.", sampling_k=2)
    result, seen = controlled_run(lambda: evaluate(config, lambda _id: model, store))
    assert_complete(seen, 3)
    assert {r.name for r in result.results} >= {"llm_self_confidence", "query_coverage"}
    items = [
        LabelledItem(id=str(i), correct=i % 2 == 0, factors=parse_factors({"llm_self_confidence": i / 10}))
        for i in range(10)
    ]
    result, seen = controlled_run(lambda: calibrate_labels(CalibrationConfig(items=items), None, store))
    assert_complete(seen, 10)
    assert result.report["n"] == 10


def test_a_conversation_turn_reports_progress_and_its_run_closes_once(store: Any) -> None:
    from engine.handraise.cast import DEFAULT_CAST
    from engine.handraise.conversation import (
        ConversationConfig,
        close_conversation,
        conversation_turn,
        decide_all,
        open_conversation,
    )
    from engine.handraise.decisions import HandRaiseConfig

    model = scripted(store, "Use dict.get with a default.")
    config = ConversationConfig(participants=DEFAULT_CAST, config=HandRaiseConfig(judge_method="judge", threshold=0.3))
    session = open_conversation(config, lambda _id: model, store)
    turn, seen = controlled_run(
        lambda: conversation_turn(session, "KeyError in my config?", decide=decide_all(session, "approve_all"))
    )
    assert_complete(seen, 2)
    assert turn.answered and len(turn.answers) == 3
    summary = close_conversation(session)
    assert close_conversation(session) == summary  # a second close changes nothing
    run = store.get_run(session.run_id)
    assert run.status == "finished" and run.config == config.model_dump(mode="json")
    types = [e.type for e in store.events(session.run_id)]
    assert types[0] == "run_started" and types[-1] == "run_finished" and types.count("run_finished") == 1
    assert summary["answers"] == 3 and summary["result"][0]["answers"] == turn.answers


def test_the_jury_reports_progress_to_its_end(store: Any) -> None:
    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, run_case
    from tests.engine.test_jury_run import ev
    from tests.engine.test_jury_run import scripted as jury_models

    seats = [JurorSeat(juror_id=j, model_id=j, role_name=f"Role {j}") for j in "abc"]
    plan = {j: {0: ev("unsafe_fail", 10), 1: ev("unsafe_fail", 10, "same")} for j in "abc"}
    jury = Jury(
        seats,
        jury_models(plan),
        JuryConfig(consensus_threshold=1.0, final_judgment_method="majority_vote", max_discussion_rounds=3),
    )
    (_, result), seen = controlled_run(lambda: run_case(store, jury, JuryCase(id="c", content="Agent: hi")))
    # #38: the total counts the steps that run — phase 1 and the final judgment; a round would join it once it
    # starts, and here phase 1 reaches consensus: 3 evaluations + the final judgment, from the first report on.
    assert {t for _, t, _ in seen} == {4}
    dones = [d for d, _, _ in seen]
    assert dones == sorted(dones) and seen[-1][0] == 4
    assert result.termination_reason == "phase1_consensus" and seen[-1][2] == "final judgment"
