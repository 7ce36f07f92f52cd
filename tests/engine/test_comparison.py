"""#38 (1): one comparison of two runs on their items — every metric both sides share, B − A with its interval and
p, Holm-adjusted; paired on shared items, two-sample (and said so) where the items differ; digits the interval
supports."""

from __future__ import annotations

import random

import pytest

from engine import stats
from engine.comparison import compare_items, compare_proportions, comparison_row, supported_digits
from engine.outcomes import ItemOutcome


def _hands(seed: int, wrong_every: int, n: int = 30, prefix: str = "d") -> list[ItemOutcome]:
    """Wrong on every `wrong_every`-th item (so a run wrong every 2nd is wrong wherever one wrong every 10th is)."""
    rng = random.Random(seed)
    gold_rng = random.Random(7)  # the same gold for every run
    out = []
    for i in range(n):
        gold = gold_rng.random() < 0.4
        right = i % wrong_every != 0
        speaks = gold if right else not gold
        will = min(1.0, max(0.0, (0.7 if speaks else 0.3) + rng.gauss(0, 0.1)))
        out.append(
            ItemOutcome(
                key=f"{prefix}{i}/p",
                label="speaks" if speaks else "stays quiet",
                gold="speaks" if gold else "stays quiet",
                correct=right,
                cluster=f"{prefix}{i}",
                score=will,
                truth=gold,
            )
        )
    return out


def test_paired_runs_compare_every_shared_metric_with_holm() -> None:
    a, b = _hands(1, 2), _hands(2, 10)
    out = compare_items(a, b)
    assert list(out) == ["accuracy", "precision", "recall", "f1", "auc", "ece", "brier", "aurc", "share speaks"]
    for name, comp in out.items():
        assert comp.test in ("exact McNemar", "paired bootstrap"), name
        assert comp.p_value is not None and comp.p_holm is not None and comp.p_holm >= comp.p_value
        assert comp.interval is not None and comp.interval.width > 0
        assert comp.interval.low <= comp.difference <= comp.interval.high  # type: ignore[operator]
    assert out["accuracy"].difference == pytest.approx(sum(bool(x.correct) for x in b) / 30 - 15 / 30)
    assert (out["accuracy"].p_holm or 1) < 0.05  # 0.5 → 0.9 on 30 paired items is more than noise


def test_items_that_differ_get_a_two_sample_test_that_says_so() -> None:
    a, b = _hands(1, 2, prefix="x"), _hands(2, 10, prefix="y")
    out = compare_items(a, b)
    assert out and all(c.test.startswith("two-sample") for c in out.values())
    row = comparison_row("accuracy", out["accuracy"])
    assert row["test"].startswith("two-sample") and "(paired)" not in row["test"]


def test_runs_without_correctness_compare_their_scores_and_levels() -> None:
    """Two confidence.calibrate-like runs: no per-item right/wrong, a score that predicts the answer being right,
    a level per item — AUC, ECE, Brier and each level's share, never an empty comparison."""
    rng = random.Random(3)
    truth = [rng.random() < 0.6 for _ in range(40)]

    def run(noise: float) -> list[ItemOutcome]:
        items = []
        for i, t in enumerate(truth):
            score = min(1.0, max(0.0, (0.75 if t else 0.35) + rng.gauss(0, noise)))
            level = "SILENT" if score > 0.7 else "NOTIFY" if score > 0.5 else "CONFIRM" if score > 0.3 else "ESCALATE"
            items.append(ItemOutcome(key=f"q{i}", label=level, score=score, truth=t))
        return items

    out = compare_items(run(0.3), run(0.1))
    assert {"auc", "ece", "brier", "aurc"} <= set(out) and any(k.startswith("share ") for k in out)
    assert "accuracy" not in out
    row = comparison_row("ece", out["ece"])
    assert row["metric"] == "ece (lower is better)" and row["p (Holm)"] != "—"


def test_two_proportions_on_different_items() -> None:
    comp = compare_proportions([True] * 10 + [False] * 3, [True] * 13)
    assert comp.difference == pytest.approx(3 / 13) and comp.interval is not None
    assert comp.interval.low < 3 / 13 < comp.interval.high <= 1
    from scipy.stats import fisher_exact

    assert comp.p_value == pytest.approx(fisher_exact([[10, 3], [13, 0]]).pvalue)
    same = compare_proportions([True] * 13, [True] * 13)
    assert same.interval is not None and same.interval.width > 0 and same.p_value == 1.0  # 13/13 twice: not certain


def test_figures_carry_the_digits_their_interval_supports() -> None:
    assert supported_digits(stats.Interval(0.05, 0.35, "x", 20)) == 2
    assert supported_digits(stats.Interval(0.810, 0.814, "x", 20000)) == 4
    assert supported_digits(stats.Interval(-40, 12, "x", 20)) == 0
    assert supported_digits(None) == 4
    comp = stats.Comparison(0.17630555555555555, 0.2, 0.0236944, stats.Interval(-0.1, 0.2, "x", 20), 0.7, "t", 20)
    row = comparison_row("rate", comp)
    assert row["A"] == "0.18" and row["B − A"] == "+0.02" and row["95 % interval"] == "-0.10 to +0.20"
    assert (
        comparison_row("d", stats.Comparison(0.5, 0.5, -0.00001, stats.Interval(-0.0004, 0.0002, "x", 9), 1, "t", 9))[
            "B − A"
        ]
        == "0.0000"
    )  # never "-0.0000"


def test_malformed_stored_outcomes_are_said_not_crashed_on() -> None:
    """A cell whose stored outcomes are not of the shape a cell stores (lengths that differ, a bit string that is
    not one, a missing key): the comparison says so; a NaN or infinite stored score is no score."""
    from engine.experiments.evidence import binary_outcomes, cell_diff
    from engine.outcomes import _number

    good = binary_outcomes([True, False], [True, True], [0, 0], ["d/a", "d/b"])
    for bad in (
        {**good, "pred": "1"},  # shorter than the gold
        {**good, "pred": 12},
        {"kind": "scores", "score": [0.5], "correct": "10"},
        {"kind": "binary"},
    ):
        diff = cell_diff(good, bad)
        assert "malformed" in diff.get("error", "") or "different items" in diff.get("error", ""), diff
    assert _number(float("nan")) is None and _number(float("inf")) is None and _number(True) is None
    assert _number(10**400) is None and _number(3) == 3.0
