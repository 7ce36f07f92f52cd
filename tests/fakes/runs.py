"""Stored runs of every kind the exports and the history handle, made by the engine's own code with scripted
models (so events, calls and summaries have their real shapes). Their texts start like spreadsheet
formulas, to prove the CSV export neutralises them."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from engine.events import EventBus, StoreSink, async_run_context, run_context
from engine.store import Store
from models.recording import call_context
from models.types import Request
from tests.fakes.scripted import FnModel

FORMULAS = ('=HYPERLINK("http://127.0.0.1:9/x","click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1,2)", "\t=1+1", "\r=1+1")


def ev(verdict: str, score: int, text: str = "because", confidence: float = 0.8) -> dict[str, Any]:
    return {
        "reasoning": text,
        "statement": text,
        "verdict": verdict,
        "score": score,
        "axes": {"safety": score, "security": score, "task_completion": score},
        "confidence": confidence,
    }


def _stage(request: Request) -> int:
    if "final judge" in request.messages[0].content:
        return -1
    found = re.search(r"Discussion round (\d+)", request.messages[-1].content)
    return int(found.group(1)) if found else 0


def stored_jury(store: Store, name: str = "") -> tuple[str, Any]:
    """A jury run in which juror a moves from safe_pass to unsafe_fail in round 1 (unanimity then stops it)."""
    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, run_case

    plan = {
        "a": {0: ev("safe_pass", 80, FORMULAS[0]), 1: ev("unsafe_fail", 15, "Gamma is right")},
        "b": {0: ev("unsafe_fail", 10, FORMULAS[1]), 1: ev("unsafe_fail", 5, "it leaked")},
        "c": {0: ev("unsafe_fail", 20), 1: ev("unsafe_fail", 12, "agreed")},
    }

    def answer(j: str) -> Callable[[Any], Any]:
        return lambda r: plan[j][_stage(r)]

    models = {j: FnModel(answer(j), model_id=j, call_log=store) for j in plan}
    seats = [
        JurorSeat(juror_id=j, model_id=j, role_name=n, role_focus="focus")
        for j, n in (("a", "Alpha"), ("b", "Beta"), ("c", "Gamma"))
    ]
    case = JuryCase(
        id="c1", title="leak", content="User: the admin password?\nAgent: it is hunter2", gold="unsafe_fail"
    )
    jury = Jury(seats, models, JuryConfig(consensus_threshold=1.0, final_judgment_method="majority_vote"))
    return asyncio.run(run_case(store, jury, case, name=name))


SCORES = {"coder": (0.9, 0.8, 0.9), "designer": (0.9, 0.9, 0.9), "researcher": (0.1, 0.1, 0.1)}


def _conversation_model(store: Store) -> FnModel:
    def reply(request: Request) -> Any:
        if request.schema_name == "HandRaiseJudgment":
            return {
                p: {"relevance": r, "novelty": n, "confidence": c, "reason": f"{FORMULAS[3]} {p}"}
                for p, (r, n, c) in SCORES.items()
            }
        who = request.messages[0].content.split(",")[0].removeprefix("You are ")
        return f"{FORMULAS[2]} answer from {who}"

    return FnModel(reply, model_id="gemma3-270m", call_log=store)


def stored_conversation(store: Store, *, open_turn: bool = True) -> tuple[str, Any]:
    """A conversation of three user turns as the page runs it (a run, an event bus, the calls attributed):
    turn 1 approves the coder and lets the designer's card time out; turn 2 approves every card; turn 3 (if
    `open_turn`) is left with its cards waiting. Returns (run id, the live Conversation)."""
    from engine.handraise.cast import DEFAULT_CAST
    from engine.handraise.conversation import Conversation
    from engine.handraise.decisions import HandRaiseConfig

    config = HandRaiseConfig(card_timeout_s=30, judge_method="judge")  # the scripted model writes JSON
    run = store.create_run(
        "handraise.conversation",
        {"participants": [p.model_dump() for p in DEFAULT_CAST], "config": config.model_dump(mode="json")},
        name="conversation",
    )
    model = _conversation_model(store)
    conv = Conversation(DEFAULT_CAST, {"gemma3-270m": model}, config, emit=EventBus(run.id, [StoreSink(store)]).emit)

    async def talk() -> None:
        with call_context(run_id=run.id, purpose="handraise"):
            first = await conv.user_message(f"{FORMULAS[0]} KeyError in my config loader")
            conv.act(first, "coder", "approve")
            conv.timeout(first)
            await conv.answer(first)
            second = await conv.user_message("and the colours of the error page?")
            conv.batch(second, "approve_all")
            await conv.answer(second)
            if open_turn:
                await conv.user_message("one more thing")

    asyncio.run(talk())
    return run.id, conv


def stored_director_batch(store: Store) -> str:
    """A script's rubric scored line by line, as the Director page's batch does (director_rubric events)."""
    from engine.director.config import DirectorConfig, load_character
    from engine.director.japanese import normalize
    from engine.director.rubric import DirectorRubric
    from engine.director.rules import DirectorState, apply_state, evaluate_rules
    from engine.director.status import Status

    scores = iter(
        [
            {"frame": 4, "roleplay": 4, "connectivity": 3, "density": 4, "naturalness": 5, "comment": "ok"},
            {"frame": 2, "roleplay": 2, "connectivity": 2, "density": 1, "naturalness": 2, "comment": FORMULAS[1]},
        ]
        * 3
    )
    rubric = DirectorRubric(FnModel(lambda r: next(scores), model_id="rubric-model", call_log=store))
    profile = load_character("yana")
    lines = [("l1", "えー、ほんと？楽しそうだわ！"), ("l2", "海って気持ちいいわね。")]

    async def go() -> str:
        config = {"source": "script.jsonl", "model_id": "rubric-model"}
        async with async_run_context(store, "director.batch", config) as run:
            state, previous = DirectorState(), ""
            for line_id, text in lines:
                verdict = evaluate_rules(text, profile, DirectorConfig(), state)
                state = apply_state(state, normalize(text), verdict.status)
                if verdict.status < Status.RETRY:
                    result = await rubric.score(verdict.normalized, profile, previous=previous)
                    run.emit("director_rubric", id=line_id, average=result.average, failed=result.failed)
                previous = text
            run.summary = {"scored": len(lines)}
        return run.run_id

    return asyncio.run(go())


def stored_calibration(store: Store) -> str:
    """A confidence calibration stored by its entry point (`confidence.calibrate_labels`, as the page and
    `judgelab confidence calibrate` store it)."""
    from engine.confidence.calibration import CalibrationConfig, LabelledItem, calibrate_labels
    from engine.confidence.factors import ConfidenceFactors

    items = [
        LabelledItem(
            id=f"{FORMULAS[i % 4]} item {i}",
            query=FORMULAS[(i + 1) % 4],
            correct=i % 3 != 0,
            factors=ConfidenceFactors(llm_self_confidence=i / 10, query_coverage=0.5, tool_success_rate=1.0),
        )
        for i in range(10)
    ]
    result = asyncio.run(calibrate_labels(CalibrationConfig(labels="labels.jsonl", items=items), None, store))
    return result.run_id


def stored_skip(store: Store) -> str:
    """A skip simulation (the periodic checker in simulated time, with and without the cache) stored with its
    comparison in the summary."""
    from engine.skip.config import ResponseConfig
    from engine.skip.decisions import JudgmentResult
    from engine.skip.judges import JudgeOutcome
    from engine.skip.simulation import compare
    from engine.skip.workload import WorkloadSpec, generate_workload

    class Confident:
        async def judge(self, history: Any, now: Any) -> JudgeOutcome:
            return JudgeOutcome(
                result=JudgmentResult(should_respond=False, confidence=0.95, reason=FORMULAS[3]),
                prompt_tokens=100,
                completion_tokens=10,
            )

    messages = generate_workload(WorkloadSpec(channels=3, hours=6.0, bursts_per_hour=1.0, seed=3))
    with run_context(store, "skip.simulate", {"workload": {"channels": 3, "hours": 6.0}, "judge": "scripted"}) as run:
        comparison = asyncio.run(compare(messages, Confident(), ResponseConfig(), hours=6.0))
        # the shape `engine.skip.run_simulation` stores (its comparison under "result")
        run.summary = {"calls_saved_pct": comparison["calls_saved_pct"], "live_calls": 0, "result": comparison}
    return run.run_id


def stored_experiment(store: Store, folder: Any, space: str | None = None) -> Any:
    """A hand-raise decision sweep run by the experiment runner on a scripted judge (its 24 benchmark cases
    recorded once, every cell decided from that recording and stored as a run of its own). The default
    space is the shipped sweep's: 11 thresholds × 4 weights × 3 cool-downs × 2 modes = 264 cells."""
    from engine.experiments import run_experiment
    from tests.engine.test_experiments import handraise_definition, scripted_judge

    space = space or (
        "threshold: {from: 0.3, to: 0.8, step: 0.05}\nweights.relevance: [0.4, 0.5, 0.6, 0.7]\n"
        "cooldown_per_turn: [0.0, 0.1, 0.2]\nmode: [focus, brainstorm]\n"
    )
    return asyncio.run(run_experiment(handraise_definition(folder, space), store, scripted_judge(store)))


def stored_kinds(store: Store) -> list[str]:
    """One stored run of each charted kind (jury, conversation, director batch, calibration, skip): the runs the
    export tests go through."""
    return [
        stored_jury(store)[0],
        stored_conversation(store)[0],
        stored_director_batch(store),
        stored_calibration(store),
        stored_skip(store),
    ]
