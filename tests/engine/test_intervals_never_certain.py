"""#38 (2): intervals that never claim certainty. A proportion gets Wilson's interval everywhere, at 0 and 1 too; a
bootstrap that collapses to one value falls back to an analytic interval or gives none; no reported interval on
n ≥ 1 items has zero width, and each holds its point estimate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import stats
from engine.diagnostics import hanley_mcneil

flags = st.lists(st.booleans(), min_size=1, max_size=40)


def _honest(estimate: float | None, interval: stats.Interval | None, *, required: bool = False) -> None:
    if interval is None:
        assert not required, "a proportion on n ≥ 1 items always has an interval"
        return
    assert interval.width > 0, interval
    assert estimate is not None and interval.low - 1e-12 <= estimate <= interval.high + 1e-12, (estimate, interval)


def test_thirteen_of_thirteen_is_not_one_to_one() -> None:
    """The issue's case: recall 13 of 13 read "1–1" (a percentile bootstrap collapses at 1); Wilson says 0.77–1."""
    said = gold = [True] * 13
    recall, ci = stats.bootstrap(stats.w_recall(said, gold), clusters=list(range(13)))
    assert recall == 1 and ci is not None and ci.method == "wilson" and 0.76 < ci.low < 0.78 and ci.high == 1
    top1, ci = stats.bootstrap(stats.w_mean([True] * 10))
    assert top1 == 1 and ci is not None and round(ci.low, 2) == 0.72
    f1, ci = stats.bootstrap(stats.w_f1(said, gold))
    assert f1 == 1 and ci is not None and ci.low < 0.8 and "wilson" in ci.method
    auc, ci = stats.bootstrap(stats.w_auc([0.1, 0.2, 0.8, 0.9, 0.95], [False, False, True, True, True]))
    assert auc == 1 and ci is not None and ci.width > 0.3
    hm = hanley_mcneil(1.0, 8, 5)
    assert hm is not None and hm.width > 0.3 and hm.high == 1


@settings(max_examples=120, deadline=None)
@given(flags, flags, st.integers(min_value=1, max_value=6))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_no_interval_claims_certainty(predicted: list[bool], actual: list[bool], cluster_size: int) -> None:
    n = min(len(predicted), len(actual))
    p, a = predicted[:n], actual[:n]
    clusters = [i // cluster_size for i in range(n)]
    scores = [0.9 if x else 0.2 for x in p]
    for groups in (None, clusters):
        right = [x == y for x, y in zip(p, a, strict=True)]
        estimate, ci = stats.bootstrap(stats.w_mean(right), clusters=groups)
        _honest(estimate, ci, required=True)
        for make in (stats.w_precision, stats.w_recall):
            estimate, ci = stats.bootstrap(make(p, a), clusters=groups)
            _honest(estimate, ci, required=estimate is not None)
        others = (stats.w_f1(p, a), stats.w_auc(scores, a), stats.w_ece(scores, right), stats.w_brier(scores, a))
        for statistic in others:
            estimate, ci = stats.bootstrap(statistic, clusters=groups, resamples=300)
            _honest(estimate, ci)
    rate, ci = stats.proportion(p)
    _honest(rate, ci, required=True)


@settings(max_examples=80, deadline=None)
@given(flags, flags)
def test_no_comparison_claims_certainty(a: list[bool], b: list[bool]) -> None:
    n = min(len(a), len(b))
    comparison = stats.compare_correct(a[:n], b[:n])
    _honest(comparison.difference, comparison.interval, required=True)
    boot = stats.paired_bootstrap(stats.w_f1(a[:n], b[:n]), stats.w_f1(b[:n], a[:n]), resamples=300)
    assert boot.interval is not None or boot.reason or boot.difference is None
    _honest(boot.difference, boot.interval)


def test_a_biased_statistics_interval_is_widened_to_hold_its_estimate() -> None:
    """ECE's bootstrap runs above its estimate on a well-calibrated sample: the interval still holds it."""
    rng = np.random.default_rng(1)
    conf = rng.uniform(size=30)
    right = rng.uniform(size=30) < conf
    estimate, ci = stats.bootstrap(stats.w_ece(conf, right))
    assert ci is not None and estimate is not None and ci.contains(estimate)
