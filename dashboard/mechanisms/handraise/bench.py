"""`judgelab bench --only 'handraise.judge' --only 'handraise.likelihood' --only 'handraise.whatif'`: the will
judgment of the default cast (one batched judge call; likelihood scoring) and the what-if re-decision of recorded
judgments without a model. (`handraise.answers` and `handraise.conversation_turn`: `handraise_answers`.)"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.decisions import Components, HandRaiseConfig, TurnRecord, redecide
from engine.handraise.judge import WillJudge
from models.backends.llamacpp import default_threads
from models.catalog import load_catalog
from models.registry import ModelHub


@benchmark("handraise.judge")
def bench_handraise_judge(repeat: int, progress: Progress) -> BenchResult:
    """Will judgment of 3 participants with the bundled Gemma: one batched call vs. one call per model."""

    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        turns = [Turn("user", "My Python script crashes with a KeyError when it reads the config. How do I fix it?")]
        batched = WillJudge(DEFAULT_CAST, hub.get, HandRaiseConfig(judge_method="judge"))
        single = WillJudge(DEFAULT_CAST, hub.get, HandRaiseConfig(judge_method="judge"))
        asyncio.run(batched.judge(turns))  # load the model; reported apart from the samples

        def timed(coro_fn: Callable[[], Any]) -> tuple[float, Any]:
            started = time.perf_counter()
            out = asyncio.run(coro_fn())
            return time.perf_counter() - started, out

        walls, tokens, per_model = [], [], []
        for _ in range(max(1, repeat)):
            wall, (_, facts) = timed(lambda: batched.judge(turns))
            walls.append(wall)
            tokens.append(facts.completion_tokens)

            async def one_by_one() -> None:
                for p in DEFAULT_CAST:
                    await single.judge(turns, candidates=[p.id])

            per_model.append(timed(one_by_one)[0])
        result = BenchResult.from_samples(
            "handraise.judge",
            "will judgment of 3 participants with the bundled Gemma, one batched call",
            walls,
            target="median ≤ 1.5 s",
            metrics={
                "per_model_calls_median_s": round(statistics.median(per_model), 3),
                "completion_tokens_median": statistics.median(tokens),
            },
        )
        result.met = (result.median or 99) <= 1.5
        return result


@benchmark("handraise.likelihood")
def bench_handraise_likelihood(repeat: int, progress: Progress) -> BenchResult:
    """Will judgment of 3 participants by likelihood (PMI scoring + fitted maps + embedding novelty) with the
    default scorers — the bundled Gemma and SmolLM2, whose likelihoods are averaged — on the configured threads;
    the first judgment (model loads, content-free baselines, embedder) is reported apart from the samples.
    Consecutive samples judge different messages. Gemma alone is measured too, on the same messages."""

    messages = [
        "My Python script crashes with a KeyError when it reads the config. How do I fix it?",
        "Which font pairs well with a geometric sans for headings?",
        "Is a p-value of 0.04 with 12 users enough to ship the change?",
        "The login page loads slowly and the button is hard to find on mobile.",
        "Thanks everyone, that was helpful!",
    ]
    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        judge = WillJudge(DEFAULT_CAST, hub.get, HandRaiseConfig(judge_method="likelihood"))
        alone = WillJudge(DEFAULT_CAST, hub.get, HandRaiseConfig(judge_method="likelihood", likelihood_ensemble=[]))
        started = time.perf_counter()
        components, _ = asyncio.run(judge.judge([Turn("user", "Hello, who can help me today?")]))
        first = time.perf_counter() - started
        scorers = next((f.split(":", 1)[1] for f in components[0].flags if f.startswith("ensemble:")), None)
        asyncio.run(alone.judge([Turn("user", "Hello, who can help me today?")]))
        walls, calls, alone_walls = [], [], []
        for i in range(max(len(messages), repeat)):
            started = time.perf_counter()
            _, facts = asyncio.run(judge.judge([Turn("user", messages[i % len(messages)])]))
            walls.append(time.perf_counter() - started)
            calls.append(facts.calls)
            started = time.perf_counter()
            asyncio.run(alone.judge([Turn("user", messages[i % len(messages)])]))
            alone_walls.append(time.perf_counter() - started)
        # A window of three turns (a question, a participant's answer, the user's next message): the last
        # message is scored on its own too, so it costs more calls than a single message.
        coder = DEFAULT_CAST[0].id
        window_walls, window_calls = [], []
        for i in range(len(messages)):
            turns = [
                Turn("user", messages[i]),
                Turn(coder, "Let me look at that first."),
                Turn("user", messages[(i + 1) % len(messages)]),
            ]
            started = time.perf_counter()
            _, facts = asyncio.run(judge.judge(turns))
            window_walls.append(time.perf_counter() - started)
            window_calls.append(facts.calls)
        result = BenchResult.from_samples(
            "handraise.likelihood",
            f"will judgment of 3 participants by likelihood ({scorers or 'gemma3-270m alone'})",
            walls,
            target="median ≤ 1.0 s",
            metrics={
                "scorers": scorers or "gemma3-270m (the ensemble could not run)",
                "first_judgment_s": round(first, 3),
                "threads": default_threads(),
                "gemma_alone_median_s": round(statistics.median(alone_walls), 4),
                "scoring_calls_per_judgment": statistics.median(calls),
                "three_turn_window_median_s": round(statistics.median(window_walls), 4),
                "three_turn_window_scoring_calls": statistics.median(window_calls),
            },
        )
        result.met = (result.median or 99) <= 1.0
        return result


@benchmark("handraise.whatif")
def bench_handraise_whatif(repeat: int, progress: Progress) -> BenchResult:
    """Re-deciding 10 000 recorded judgments under new settings, without a model."""

    rng = random.Random(7)
    turns = [
        TurnRecord(
            turn=t,
            components=[
                Components(model=m, relevance=rng.random(), novelty=rng.random(), confidence=rng.random())
                for m in ("a", "b", "c", "d")
            ],
            user_actions={m: rng.choice(["approve", "skip"]) for m in ("a", "b", "c", "d")},
        )
        for t in range(2500)
    ]
    config = HandRaiseConfig(threshold=0.45, cooldown_per_turn=0.15)
    samples = []
    for _ in range(max(3, repeat)):
        started = time.perf_counter()
        out = redecide(turns, config)
        samples.append(time.perf_counter() - started)
    hands = sum(len(o.hands) for o in out)
    result = BenchResult.from_samples(
        "handraise.whatif",
        f"what-if re-decision of {hands} recorded judgments",
        [s * 1000 for s in samples],
        unit="ms",
        target="≤ 200 ms",
        metrics={"judgments": hands},
    )
    result.met = (result.median or 1e9) <= 200
    return result
