"""#38 (3): a judge's rate corrected by the user's labels (PPI++): the corrected interval covers the true rate where
the judge-only interval does not; the label budget that halves it; a stored run's rates with its labels."""

from __future__ import annotations

import numpy as np
import pytest

from engine.labels.corrected import ppi_mean, rate_of

DRAWS = 500


def test_the_corrected_interval_covers_the_truth_where_the_judge_alone_does_not() -> None:
    """500 seeded runs of 400 items, 30 % truly positive; the judge finds 90 % of them but also calls 30 % of the
    rest positive (its rate ≈ 48 %); 40 random items labelled. The judge-only Wilson interval is about the judge,
    not the truth: it almost never covers it. The corrected one covers it in ≥ 93 % of the draws."""
    rng = np.random.default_rng(20261128)
    judge_covers = corrected_covers = 0
    widths = []
    for _ in range(DRAWS):
        truth = rng.random(400) < 0.3
        judge = np.where(truth, rng.random(400) < 0.9, rng.random(400) < 0.3)
        labelled = set(rng.choice(400, size=40, replace=False).tolist())
        predicted = ["unsafe" if j else "safe" for j in judge]
        rate = rate_of("unsafe", predicted, {i: "unsafe" if truth[i] else "safe" for i in labelled})
        true_rate = float(truth.mean())
        assert rate.judge_ci is not None and rate.corrected is not None
        judge_covers += rate.judge_ci.contains(true_rate)
        corrected_covers += rate.corrected.interval.contains(true_rate)
        widths.append(rate.corrected.interval.width)
    assert corrected_covers / DRAWS >= 0.93, corrected_covers
    assert judge_covers / DRAWS < 0.05, judge_covers
    assert float(np.mean(widths)) < 0.3  # and it is an interval worth having


def test_a_judge_that_tracks_the_labels_narrows_the_interval_below_the_labels_alone() -> None:
    rng = np.random.default_rng(3)
    truth = rng.random(1000) < 0.25
    judge = np.where(rng.random(1000) < 0.95, truth, ~truth)  # right 95 % of the time
    labelled = list(range(50))
    est = ppi_mean(judge[50:] * 1.0, judge[:50] * 1.0, truth[:50] * 1.0)
    assert est is not None and est.lam > 0.7
    labels_only = ppi_mean([], judge[:50] * 1.0, truth[:50] * 1.0)  # no unlabelled items: the labels alone
    assert labels_only is not None and labels_only.lam == 0.0
    assert est.interval.width < 0.7 * labels_only.interval.width
    # halving a width takes 4× the labels when they carry all of it; more here, for the judge's own share
    assert 4 * len(labelled) <= (est.labels_to_halve() or 0) < 20 * len(labelled)


def test_a_judge_that_tells_nothing_gets_no_weight_and_nothing_claims_certainty() -> None:
    same = ppi_mean([1.0] * 100, [1.0] * 10, [1.0] * 10)  # every prediction and label alike
    assert same is not None and same.interval.width > 0 and same.interval.contains(same.estimate)
    assert ppi_mean([1.0] * 100, [1.0], [0.0]) is None  # one label: nothing to estimate a variance from
    rng = np.random.default_rng(5)
    noise = ppi_mean((rng.random(200) < 0.5) * 1.0, (rng.random(30) < 0.5) * 1.0, (rng.random(30) < 0.3) * 1.0)
    assert noise is not None and noise.lam < 0.4 and noise.labels_to_halve() is not None


def test_a_run_with_two_labels_says_what_it_needs() -> None:
    rate = rate_of("speak", ["speak", "skip", "speak"], {0: "skip"})
    assert rate.corrected is None and "at least 2" in rate.note
    assert rate.to_dict()["judge_rate"] == pytest.approx(2 / 3, abs=1e-4) and rate.to_dict()["labels_rate"] == 0.0
