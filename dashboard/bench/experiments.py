"""`judgelab bench --only 'experiment.*_decisions' --only experiment.executors`: experiment cells re-decided from
one recording with no model call, and the Ray executor against the local one on replayed calls.
(`experiment.cancel` and `experiment.refuse_huge`: `experiment_bounds`.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from engine.config import DATA_DIR
from engine.experiments import Experiment, expand, run_experiment
from engine.experiments.adapters import mechanism
from engine.experiments.execution import HubModels, decide_many, record_group
from engine.experiments.ray_executor import RayExecutor, ensure_ray
from engine.experiments.results import comparable_rows


def _experiment(**fields: Any) -> Any:

    return Experiment.model_validate({"name": "bench", **fields})


def _decision_bench(
    name: str, definition: Any, record_definition: Any, repeat: int, progress: Progress, target_s: float, what: str
) -> BenchResult:
    """Record once (live, timed apart), then time re-deciding every cell from the recording (the target), and
    the whole experiment run on replayed calls with every cell stored; new model calls are counted."""

    with temp_store() as store:
        mech = mechanism(definition.mechanism)
        cells = expand(definition, mech.decision)
        if progress:
            progress(f"  recording the case set once on the bundled model ({record_definition.mechanism})")
        started = time.perf_counter()
        first = asyncio.run(run_experiment(record_definition, store))
        recording_s = time.perf_counter() - started
        recorded_calls = store.call_count(live_only=True)
        cases = mech.load_cases(definition)

        async def replayed() -> Any:
            return await record_group(
                mech,
                definition,
                cases,
                cells[0].call_params,
                HubModels("replay").build(store),
                store,
                first.experiment_id,
                cells[0].group,
            )

        recording = asyncio.run(replayed()).recording
        decisions = [c.decision_params for c in cells]
        calls_before = store.call_count()
        samples = []
        for _ in range(max(3, repeat)):
            started = time.perf_counter()
            rows = decide_many(definition.mechanism, definition, recording, decisions)
            samples.append(time.perf_counter() - started)
        decide_calls = store.call_count() - calls_before
        live_before = store.call_count(live_only=True)
        started = time.perf_counter()
        full = asyncio.run(run_experiment(definition, store))
        full_s = time.perf_counter() - started
        new_calls = store.call_count(live_only=True) - live_before
        cell_calls = sum(store.call_count(r["run_id"]) for r in full.rows[:50])
        metric = mech.default_metric
        result = BenchResult.from_samples(
            name,
            f"{len(cells)} {what} cells re-decided from one recording, no model",
            samples,
            target=f"≤ {target_s} s with 0 new calls",
            metrics={
                "cells": len(cells),
                "cases": len(cases),
                "calls_while_deciding": decide_calls,
                "recording_live_calls": recorded_calls,
                "recording_s": round(recording_s, 2),
                "full_run_with_storage_s": round(full_s, 2),
                "full_run_new_calls": new_calls,
                "calls_in_first_50_cell_runs": cell_calls,
                f"best_{metric}": (full.best or {}).get(metric),
                "distinct_metric_values": len({r.get(metric) for r in rows}),
            },
        )
        result.met = (result.median or 99) <= target_s and decide_calls == 0 and new_calls == 0
        return result


@benchmark("experiment.handraise_decisions")
def bench_experiment_handraise(repeat: int, progress: Progress) -> BenchResult:
    """1 000 hand-raise cells (threshold × relevance weight × cooldown × mode × brainstorm level) over the
    24-item benchmark, re-decided from one recorded judgment per item."""

    cases = str(DATA_DIR / "benchmarks" / "handraise.jsonl")
    space = {
        "threshold": {"from": 0.3, "to": 0.75, "step": 0.05},
        "weights.relevance": [0.3, 0.4, 0.5, 0.6, 0.7],
        "cooldown_per_turn": [0.0, 0.05, 0.1, 0.15, 0.2],
        "mode": ["focus", "brainstorm"],
        "brainstorm_auto_allow": [0.3, 0.5],
    }
    definition = _experiment(mechanism="handraise", cases=cases, space=space, calls="replay_fallthrough")
    return _decision_bench(
        "experiment.handraise_decisions",
        definition,
        _experiment(mechanism="handraise", cases=cases),
        repeat,
        progress,
        2.0,
        "hand-raise",
    )


@benchmark("experiment.jury_decisions")
def bench_experiment_jury(repeat: int, progress: Progress) -> BenchResult:
    """100 jury cells (consensus threshold × stagnation rounds × final method) over the 14 benchmark cases,
    each recorded once at the widest setting (threshold 2.0, 3 rounds) by the bundled model's likelihood jurors."""

    cases = str(DATA_DIR / "benchmarks" / "jury.jsonl")
    base = {"panel": "local", "judge": "likelihood"}
    space = {
        "consensus_threshold": [0.34, 0.5, 0.6, 0.67, 0.7, 0.75, 0.8, 0.9, 1.0, 2.0],
        "stagnation_rounds": [1, 2, 3, 4, 5],
        "final_judgment_method": ["majority_vote", "weighted_average"],
    }
    definition = _experiment(mechanism="jury", cases=cases, base=base, space=space)
    return _decision_bench(
        "experiment.jury_decisions",
        definition,
        _experiment(mechanism="jury", cases=cases, base=base),
        repeat,
        progress,
        2.0,
        "jury",
    )


@benchmark("experiment.executors")
def bench_experiment_executors(repeat: int, progress: Progress) -> BenchResult:
    """Ray against local on replayed calls with 0.5 s injected per call: 16 cells (one recorded judgment each)
    at equal concurrency; throughput against concurrency 1, 2, 4, 8 (per-model limit 4); Ray's start-up apart."""

    delay, cells = 0.5, 16

    cases = str(DATA_DIR / "benchmarks" / "handraise.jsonl")
    with temp_store() as store:
        if progress:
            progress("  recording one judgment on the bundled model")
        asyncio.run(run_experiment(_experiment(mechanism="handraise", cases=cases, limit=1), store))

        def definition(concurrency: int) -> Any:
            return _experiment(
                mechanism="handraise",
                cases=cases,
                limit=1,
                repeats=cells,
                calls="replay",
                delay_s=delay,
                concurrency=concurrency,
                per_model_concurrency={"gemma3-270m": 4},
            )

        import ray  # heavy: ray

        ray_executor = RayExecutor(max_concurrency=8, keep_actors=True)

        def timed(executor: str, concurrency: int) -> tuple[float, Any]:
            chosen: Any = ray_executor if executor == "ray" else "local"
            started = time.perf_counter()
            out = asyncio.run(run_experiment(definition(concurrency), store, executor=chosen))
            return time.perf_counter() - started, out

        started = time.perf_counter()
        ensure_ray()
        ray_init_s = time.perf_counter() - started
        first_ray_s, _ = timed("ray", 1)  # actor start, imports on the worker: start-up, not throughput
        throughput: dict[str, dict[int, float]] = {"local": {}, "ray": {}}
        tables: dict[str, Any] = {}
        for executor in ("local", "ray"):
            for c in (1, 2, 4, 8):
                wall, out = timed(executor, c)
                throughput[executor][c] = round(cells / wall, 3)
                tables[executor] = out
        ratios = []
        for _ in range(max(1, repeat)):
            local_s, _ = timed("local", 4)
            ray_s, _ = timed("ray", 4)
            ratios.append(local_s / ray_s)
        asyncio.run(ray_executor.shutdown())
        ray.shutdown()
        same = comparable_rows(tables["local"].rows) == comparable_rows(tables["ray"].rows)
        new_calls = sum(t.new_calls for t in tables.values())
        result = BenchResult.from_samples(
            "experiment.executors",
            f"Ray ÷ local throughput, {cells} cells, replayed calls with {delay} s injected, concurrency 4",
            ratios,
            unit="×",
            target="Ray ≥ 0.9× local at equal concurrency; same table",
            metrics={
                "ray_init_s": round(ray_init_s, 2),
                "ray_first_experiment_s (actor start-up)": round(first_ray_s, 2),
                "cells_per_s_local_c1_2_4_8": throughput["local"],
                "cells_per_s_ray_c1_2_4_8": throughput["ray"],
                "ideal_cells_per_s_c1_2_4_8": {c: min(c, 4) / delay for c in (1, 2, 4, 8)},
                # near linear up to the per-model limit (4), flat after it: each share of the ideal ≈ 1
                "local_share_of_ideal_c1_2_4_8": {
                    c: round(throughput["local"][c] / (min(c, 4) / delay), 3) for c in (1, 2, 4, 8)
                },
                "same_table": same,
                "new_calls": new_calls,
            },
        )
        result.met = (result.median or 0) >= 0.9 and same and new_calls == 0
        return result
