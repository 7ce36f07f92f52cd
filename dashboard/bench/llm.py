"""`judgelab bench --only 'llm.*'`: the bundled model's structured judgment (latency, tokens/s) and how much faster
a recorded call re-plays, identically."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from models.catalog import BUNDLED_MODEL_ID, load_catalog
from models.errors import ModelError
from models.probe import PROBE_MESSAGES, ProbeJudgment
from models.registry import ModelHub
from models.types import Message


@benchmark("llm.judgment")
def bench_llm_judgment(repeat: int, progress: Progress) -> BenchResult:
    """Structured judgment latency and tokens/s of the bundled model."""

    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        model = hub.get(BUNDLED_MODEL_ID)

        async def once() -> Any:
            return await model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=128)

        started = time.perf_counter()
        asyncio.run(once())  # load + first call, reported apart
        first = time.perf_counter() - started
        latencies, speeds, tokens = [], [], []
        for _ in range(repeat):
            completion = asyncio.run(once())
            latencies.append(completion.latency_s)
            speeds.append(completion.tokens_per_s)
            tokens.append(completion.usage.completion_tokens)
        return BenchResult.from_samples(
            "llm.judgment",
            "structured judgment (ProbeJudgment) with the bundled Gemma 3 270M",
            latencies,
            metrics={
                "threads": os.cpu_count(),
                "load_and_first_call_s": round(first, 3),
                "completion_tokens_median": statistics.median(tokens),
                "tokens_per_s_median": round(statistics.median(speeds), 1),
                "tokens_per_s_min": round(min(speeds), 1),
                "tokens_per_s_max": round(max(speeds), 1),
            },
        )


@benchmark("llm.replay")
def bench_replay(repeat: int, progress: Progress) -> BenchResult:
    """Record → replay: how much faster a recorded run re-plays, and that it re-plays identically."""

    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        live, replay = hub.get(BUNDLED_MODEL_ID), hub.get(BUNDLED_MODEL_ID, replay=True)
        prompts = [
            [Message(role="user", content=f'Chat message: "{text}"\nShould the assistant reply? JSON only.')]
            for text in ("Anyone up for lunch?", "The build is broken again, help!", "lol")
        ]

        async def outcome(model: Any, prompt: list[Message]) -> tuple[Any, ...]:
            """What a call gave: its answer, or its typed failure (the bundled base model writes invalid JSON
            now and then, e.g. `confidence: 1e15`; a failed call is recorded and replays as the same failure)."""
            started = time.perf_counter()
            try:
                c = await model.complete(prompt, schema=ProbeJudgment, max_tokens=96)
            except ModelError as exc:
                return ("failed", type(exc).__name__, exc.message), time.perf_counter() - started
            return ("answered", c.text, c.parsed, c.usage), c.latency_s

        async def calls(model: Any) -> list[tuple[Any, ...]]:
            return [await outcome(model, p) for p in prompts]

        recorded = asyncio.run(calls(live))
        live_latency = statistics.median(latency for _, latency in recorded)
        samples = []
        identical = True
        for _ in range(max(repeat, 20)):
            started = time.perf_counter()
            replayed = asyncio.run(calls(replay))
            samples.append((time.perf_counter() - started) / len(prompts))
            identical &= [a for a, _ in recorded] == [b for b, _ in replayed]
        speedup = live_latency / statistics.median(samples)
        return BenchResult.from_samples(
            "llm.replay",
            "replay of a recorded structured call (per call, SQLite store)",
            samples,
            metrics={
                "live_call_median_s": round(live_latency, 4),
                "replay_speedup_x": round(speedup, 1),
                "replays_identical": identical,
                "recorded_failures": sum(a[0] == "failed" for a, _ in recorded),
            },
            target="replays identical to the recorded calls",
            met=identical,
        )
