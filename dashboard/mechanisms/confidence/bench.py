"""`judgelab bench --only confidence.score`: the default confidence calculation's throughput on one core, the
per-step path against the vectorised table path (which must agree)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from dashboard.bench.harness import BenchResult, Progress, benchmark, one_core
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.score import calculate
from engine.confidence.tables import score_arrays


def _random_factor_columns(n: int, seed: int = 7) -> dict[str, Any]:

    rng = np.random.default_rng(seed)
    executed = rng.integers(0, 4, n)
    return {
        "search_result_count": rng.integers(0, 8, n),
        "search_avg_score": rng.random(n),
        "search_max_score": rng.random(n),
        "search_score_variance": rng.random(n) * 0.5,
        "source_agreement": rng.random(n),
        "source_count": rng.integers(0, 5, n),
        "llm_self_confidence": rng.random(n),
        "tool_success_rate": np.where(rng.random(n) < 0.7, 1.0, rng.random(n)),
        "tool_execution_count": executed,
        "tool_success_count": (executed * rng.random(n)).astype(int),
        "query_coverage": rng.random(n),
        "is_search_step": rng.random(n) < 0.4,
    }


@benchmark("confidence.score")
def bench_confidence(repeat: int, progress: Progress) -> BenchResult:
    """Default calculation throughput on one core: the per-step path and the vectorised table path."""

    undo = one_core()
    try:
        n_table, n_single = 200_000, 20_000
        columns = _random_factor_columns(n_table)
        rows = [
            ConfidenceFactors(**{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in columns.items()})
            for i in range(n_single)
        ]
        table_rates, single_rates = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            score_arrays(columns)
            table_rates.append(n_table / (time.perf_counter() - started))
            started = time.perf_counter()
            for f in rows:
                calculate(f)
            single_rates.append(n_single / (time.perf_counter() - started))
        # The two paths must agree, or the fast one is worthless.
        vector = score_arrays({k: v[:n_single] for k, v in columns.items()})
        mismatches = sum(abs(calculate(f).score - float(s)) > 1e-9 for f, s in zip(rows, vector, strict=True))
    finally:
        undo()
    result = BenchResult.from_samples(
        "confidence.score",
        "confidence scores per second on one core (vectorised table path)",
        table_rates,
        unit="scores/s",
        target="≥ 100 000 scores/s on one core",
        metrics={
            "per_step_scores_per_s_median": round(statistics.median(single_rates)),
            "table_rows": n_table,
            "paths_disagree_on": f"{mismatches} of {n_single} rows",
        },
    )
    result.met = (result.median or 0) >= 100_000 and mismatches == 0
    return result
