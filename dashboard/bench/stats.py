"""`judgelab bench --only 'stats.*'`: what an interval on every figure costs (engine/stats.py).

- `stats.bootstrap_f1`: F1 of 10,000 items with 1,000 resamples (target ≤ 50 ms). Items with equal columns
  resample alike, so F1's draw is a multinomial over its four outcome patterns, not over 10,000 items.
- `stats.paired`: two runs of 1,000 items compared: exact McNemar with the paired score and exact intervals of
  the accuracy difference, and the paired bootstrap of F1 (target ≤ 100 ms for both together).
- `stats.bootstrap_auc`: AUC of 10,000 distinct scores with 1,000 resamples (no target; the one metric whose
  units cannot be merged: the figure says what the worst case costs).
"""

from __future__ import annotations

import numpy as np

from dashboard.bench.harness import BenchResult, Progress, benchmark, timed_samples
from engine import stats
from engine.experiments.evidence import binary_outcomes, table_evidence


@benchmark("stats.bootstrap_f1")
def bench_bootstrap_f1(repeat: int, progress: Progress) -> BenchResult:

    rng = np.random.default_rng(0)
    predicted, actual = rng.random(10_000) < 0.5, rng.random(10_000) < 0.4
    samples = timed_samples(repeat, lambda: stats.bootstrap(stats.w_f1(predicted, actual), resamples=1000))
    median = float(np.median(samples))
    return BenchResult.from_samples(
        "stats.bootstrap_f1",
        "F1 of 10,000 items, its 95 % bootstrap interval from 1,000 resamples",
        samples,
        target="≤ 0.05 s",
        met=median <= 0.05,
    )


@benchmark("stats.paired")
def bench_paired(repeat: int, progress: Progress) -> BenchResult:

    rng = np.random.default_rng(1)
    gold = rng.random(1000) < 0.4
    a, b = rng.random(1000) < 0.5, rng.random(1000) < 0.55

    def both() -> None:
        stats.compare_correct(a == gold, b == gold)
        stats.paired_bootstrap(stats.w_f1(a, gold), stats.w_f1(b, gold))

    samples = timed_samples(repeat, both)
    median = float(np.median(samples))
    return BenchResult.from_samples(
        "stats.paired",
        "two runs of 1,000 items: exact McNemar + paired score interval of accuracy, paired bootstrap of F1 "
        "(2,000 resamples)",
        samples,
        target="≤ 0.1 s",
        met=median <= 0.1,
    )


@benchmark("stats.bootstrap_auc")
def bench_bootstrap_auc(repeat: int, progress: Progress) -> BenchResult:

    rng = np.random.default_rng(2)
    actual = rng.random(10_000) < 0.4
    scores = rng.random(10_000) + 0.2 * actual
    samples = timed_samples(max(1, repeat // 2), lambda: stats.bootstrap(stats.w_auc(scores, actual), resamples=1000))
    return BenchResult.from_samples(
        "stats.bootstrap_auc",
        "AUC of 10,000 distinct scores, 1,000 resamples (the worst case: no two items merge)",
        samples,
    )


@benchmark("stats.experiment_ties")
def bench_experiment_ties(repeat: int, progress: Progress) -> BenchResult:
    """A 1,000-cell hand-raise table (24 dialogues × 3 participants, as the shipped benchmark): every cell's
    F1 interval and its paired, Holm-adjusted test against the best."""

    rng = np.random.default_rng(3)
    gold = rng.random(72) < 0.35
    clusters = np.repeat(np.arange(24), 3).tolist()
    outcomes, f1s = [], []
    for _ in range(1000):
        flips = rng.random(72) < rng.uniform(0.02, 0.4)
        predicted = gold ^ flips
        outcomes.append(binary_outcomes(predicted.tolist(), gold.tolist(), clusters))
        tp, fp, fn = (predicted & gold).sum(), (predicted & ~gold).sum(), (~predicted & gold).sum()
        f1s.append(float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else None)
    samples = timed_samples(repeat, lambda: table_evidence(outcomes, f1s, "f1"))
    evidence = table_evidence(outcomes, f1s, "f1")
    median = float(np.median(samples))
    return BenchResult.from_samples(
        "stats.experiment_ties",
        "1,000 hand-raise cells: each cell's F1 interval and the ties with the best (1,000 paired resamples)",
        samples,
        metrics={"tied_with_best": sum(evidence.tied.values()), "cells": len(evidence.tied)},
        target="≤ 2 s",
        met=median <= 2.0,
    )
