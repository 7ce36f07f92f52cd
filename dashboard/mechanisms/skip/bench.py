"""`judgelab bench --only skip.simulate`: 24 simulated hours of the default workload through the skip cache, judged by
the recorded Gemma judgments: calls saved, delays, and the judge against the generator's labels."""

from __future__ import annotations

import asyncio
import time

from dashboard.bench.harness import BenchResult, Progress, benchmark
from engine.config import DATA_DIR
from engine.skip.config import ResponseConfig
from engine.skip.quality import generated_labels, judge_quality
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import delay_bound, simulate
from engine.skip.workload import WorkloadSpec, generate_workload


@benchmark("skip.simulate")
def bench_skip(repeat: int, progress: Progress) -> BenchResult:
    """24 simulated hours of the default 50-channel workload, judged by the recorded Gemma judgments."""

    recording = DATA_DIR / "recordings" / "skipcache-default.jsonl"
    if not recording.is_file():
        return BenchResult(
            name="skip.simulate", description="skip cache simulation", skipped=f"no recorded judgments at {recording}"
        )
    spec = WorkloadSpec()
    messages = generate_workload(spec)
    config = ResponseConfig()
    walls, results = [], {}
    for _ in range(max(1, repeat)):
        for with_cache in (True, False):
            judge = RecordedJudge.load(recording)
            started = time.perf_counter()
            result = asyncio.run(simulate(messages, judge, config, with_cache=with_cache, hours=spec.hours))
            if with_cache:
                walls.append(time.perf_counter() - started)
            results[with_cache] = result.summary()
    cached, uncached = results[True], results[False]
    saved = 100 * (1 - cached["judge_calls"] / uncached["judge_calls"]) if uncached["judge_calls"] else 0.0
    bound = config.min_wait_seconds + config.check_interval_seconds
    bench = BenchResult.from_samples(
        "skip.simulate",
        "24 h of the default workload (50 channels) with the cache, recorded Gemma judge",
        walls,
        unit="s wall",
        target="≥ 90 % fewer judge calls; no first judgment later than min_wait + one interval; ≤ 10 s wall",
        metrics={
            "messages": cached["messages"],
            "judge_calls_without_cache": uncached["judge_calls"],
            "judge_calls_with_cache": cached["judge_calls"],
            "calls_saved_pct": round(saved, 2),
            "tokens_without_cache": uncached["tokens"],
            "tokens_with_cache": cached["tokens"],
            "delay_median_s": cached["delay_median_s"],
            "delay_p95_s": cached["delay_p95_s"],
            "delay_max_s": cached["delay_max_s"],
            "delay_bound_s": bound,
            "never_judged": cached["never_judged"],
            "replay_misses": cached["failures"] + uncached["failures"],
            # The judge itself, against the generator's labels: what the saving depends on.
            "judge_vs_labels": judge_quality(RecordedJudge.load(recording), generated_labels(messages)),
        },
    )
    bench.met = (
        saved >= 90
        and delay_bound(cached, config)[1] is True
        and (bench.median or 99) <= 10
        and cached["failures"] == 0
        and uncached["failures"] == 0
    )
    return bench
