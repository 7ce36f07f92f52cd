"""engine/stats.py: intervals checked against published values, coverage checked by simulation, determinism,
and the vectorised metrics against scikit-learn and engine/reliability.py on the observed sample."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, f1_score, precision_score, recall_score, roc_auc_score

from engine import stats
from engine.agreement import fleiss_kappa
from engine.reliability import expected_calibration_error, reliability_bins

# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Statistics in Medicine 17,
# Table I, method 3 (the Wilson score interval without continuity correction), 95 %.
NEWCOMBE = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
]


@pytest.mark.parametrize(("k", "n", "low", "high"), NEWCOMBE)
def test_wilson_matches_the_published_table(k: int, n: int, low: float, high: float) -> None:
    interval = stats.wilson(k, n)
    assert interval is not None
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    assert interval.method == "wilson" and interval.n == n


def test_wilson_edges() -> None:
    assert stats.wilson(0, 0) is None
    full = stats.wilson(8, 8)
    assert full is not None and full.high == pytest.approx(1.0) and full.low < 1.0  # never a zero-width 1.0
    with pytest.raises(ValueError, match="0..5"):
        stats.wilson(6, 5)
    rate, interval = stats.proportion([True, False, True, True])
    assert rate == 0.75 and interval is not None and interval.contains(0.75)
    assert stats.fmt(0.5, stats.wilson(7, 14)) == "0.50 (0.27–0.73)"
    assert stats.fmt(None, None) == "—"


def _rng_data(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    actual = rng.random(n) < 0.4
    scores = rng.random(n) + 0.35 * actual
    return scores, actual


def test_weighted_metrics_equal_reference_implementations_on_the_sample() -> None:
    scores, actual = _rng_data(3, 40)
    predicted = scores > 0.6
    ones = np.ones((1, scores.size))
    assert stats.w_auc(scores, actual)(ones)[0] == pytest.approx(roc_auc_score(actual, scores))
    assert stats.w_f1(predicted, actual)(ones)[0] == pytest.approx(f1_score(actual, predicted))
    assert stats.w_precision(predicted, actual)(ones)[0] == pytest.approx(precision_score(actual, predicted))
    assert stats.w_recall(predicted, actual)(ones)[0] == pytest.approx(recall_score(actual, predicted))
    probs = np.clip(scores / scores.max(), 0, 1)
    assert stats.w_brier(probs, actual)(ones)[0] == pytest.approx(brier_score_loss(actual, probs))
    ece = expected_calibration_error(reliability_bins(probs.tolist(), actual.tolist()))
    assert stats.w_ece(probs, actual)(ones)[0] == pytest.approx(ece)


def test_weighted_metrics_equal_the_metric_on_the_expanded_resample() -> None:
    """A row of multiplicities means the same as the items repeated that many times."""
    scores, actual = _rng_data(5, 25)
    weights = stats.resample_weights(25, resamples=20, seed=9)
    auc = stats.w_auc(scores, actual)(weights)
    for row, w in enumerate(weights):
        idx = np.repeat(np.arange(25), w.astype(int))
        if actual[idx].all() or not actual[idx].any():
            assert np.isnan(auc[row])
        else:
            assert auc[row] == pytest.approx(roc_auc_score(actual[idx], scores[idx]))


def test_the_same_seed_gives_the_same_interval_and_another_seed_another() -> None:
    scores, actual = _rng_data(7, 30)
    first = stats.bootstrap(stats.w_auc(scores, actual), seed=11)
    again = stats.bootstrap(stats.w_auc(scores, actual), seed=11)
    other = stats.bootstrap(stats.w_auc(scores, actual), seed=12)
    assert first == again
    assert first[1] != other[1]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_bootstrap_coverage_is_near_nominal_at_n_50() -> None:
    """400 simulated samples of 50 items from a known distribution: the 95 % percentile interval of the mean
    must contain the true mean 92–98 % of the time (±3 points of nominal)."""
    rng = np.random.default_rng(2026)
    hits = 0
    trials = 400
    for trial in range(trials):
        sample = rng.normal(0.3, 1.0, 50)
        _, interval = stats.bootstrap(stats.w_mean(sample), resamples=1000, seed=trial)
        assert interval is not None
        hits += interval.contains(0.3)
    assert 0.92 <= hits / trials <= 0.98, hits / trials


def test_cluster_bootstrap_moves_cases_together_and_widens_the_interval() -> None:
    """Items that share a case are copies of one outcome: resampling cases gives the honest, wider interval."""
    rng = np.random.default_rng(1)
    per_case = rng.random(12) < 0.5
    correct = np.repeat(per_case, 3)
    cases = np.repeat(np.arange(12), 3).tolist()
    weights = stats.resample_weights(36, resamples=50, seed=4, clusters=cases)
    assert (weights.reshape(50, 12, 3) == weights.reshape(50, 12, 3)[:, :, :1]).all()
    _, by_item = stats.bootstrap(stats.w_mean(correct))
    _, by_case = stats.bootstrap(stats.w_mean(correct), clusters=cases)
    assert by_item is not None and by_case is not None
    assert by_case.width > by_item.width and by_case.n == 12
    with pytest.raises(ValueError, match="cluster keys"):
        stats.resample_weights(36, clusters=cases[:-1])


def test_looped_statistics_for_kappa() -> None:
    units = [["pass", "pass", "fail"], ["fail", "fail", "fail"], ["pass", "pass", "pass"], ["pass", "fail", "fail"]]
    units = units * 4
    kappa = stats.looped(lambda idx: fleiss_kappa([units[i] for i in idx]), len(units))
    value, interval = stats.bootstrap(kappa, resamples=300)
    assert value == pytest.approx(fleiss_kappa(units))
    assert value is not None and interval is not None and interval.low < value < interval.high


def test_mcnemar_exact_against_the_binomial() -> None:
    # 1 vs 7 discordant pairs: two-sided exact p = 2 · P(X ≤ 1 | n=8, ½) = 2 · 9/256
    a = [True] * 1 + [False] * 7 + [True] * 10
    b = [False] * 1 + [True] * 7 + [True] * 10
    assert stats.mcnemar_exact(a, b) == pytest.approx(18 / 256)
    assert stats.mcnemar_exact(a, a) == 1.0
    comp = stats.compare_correct(a, b)
    assert comp.discordant == (1, 7)
    assert comp.difference == pytest.approx(6 / 18)
    assert comp.interval is not None and comp.interval.contains(6 / 18)
    assert comp.to_dict()["test"] == "exact McNemar"
    with pytest.raises(ValueError, match="length"):
        stats.compare_correct(a, b[:-1])


def test_paired_bootstrap_detects_a_real_difference_and_not_a_null_one() -> None:
    scores, actual = _rng_data(8, 60)
    noise = np.random.default_rng(9).normal(0, 0.02, 60)
    better = stats.paired_bootstrap(stats.w_auc(scores * 0, actual), stats.w_auc(scores, actual))
    assert better.difference is not None and better.difference > 0.2
    assert better.p_value is not None and better.p_value < 0.01
    same = stats.paired_bootstrap(stats.w_auc(scores, actual), stats.w_auc(scores + noise, actual))
    assert same.p_value is not None and same.p_value > 0.05
    assert same.interval is not None and same.interval.contains(0.0)


def test_holm_adjustment_and_ties_with_the_best() -> None:
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([]) == []
    worse = stats.Comparison(0.9, 0.5, -0.4, None, 0.001, "exact McNemar", 30)
    close = stats.Comparison(0.9, 0.85, -0.05, None, 0.5, "exact McNemar", 30)
    marginal = stats.Comparison(0.9, 0.8, -0.1, None, 0.03, "exact McNemar", 30)  # 0.03 · 3 > 0.05 after Holm
    tied = stats.tied_with_best({"worse": worse, "close": close, "marginal": marginal})
    assert tied["worse"][0] is False
    assert tied["close"][0] is True
    assert tied["marginal"][0] is True and tied["marginal"][1] == pytest.approx(0.06)


def test_weighted_aurc_equals_the_risk_coverage_area_of_each_resample() -> None:
    """Scores with ties (rounded to 0.1), resampled: the vectorised area equals engine/reliability.py's on the
    expanded sample, including resamples that drop the top-scoring items."""
    from engine.reliability import area_under_risk_coverage, risk_coverage

    rng = np.random.default_rng(0)
    for trial in range(60):
        n = int(rng.integers(3, 30))
        scores, correct = np.round(rng.random(n), 1), rng.random(n) < 0.6
        weights = stats.resample_weights(n, 5, seed=trial)
        areas = stats.w_aurc(scores, correct)(weights)
        for row, w in enumerate(weights):
            idx = np.repeat(np.arange(n), w.astype(int))
            expected = area_under_risk_coverage(risk_coverage(scores[idx].tolist(), correct[idx].tolist()))
            assert areas[row] == pytest.approx(expected, abs=1e-12)
