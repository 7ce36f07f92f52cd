"""engine/experiments/evidence.py: each cell's interval and the cells tied with the best — checked against the
one-cell bootstrap of engine/stats.py, exact McNemar by hand, and on a real experiment run (the shipped
confidence sweep: 72 cells, no model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from engine import stats
from engine.experiments.evidence import (
    binary_outcomes,
    correct_outcomes,
    score_outcomes,
    split_outcomes,
    table_evidence,
    tie_sentence,
)
from engine.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _cells(seed: int = 0) -> tuple[list[dict], list[float]]:
    """Three hand-raise cells on 30 dialogues × 3 participants: a good one, one a dialogue away from it, and
    one that says "speak" to everyone."""
    rng = np.random.default_rng(seed)
    gold = rng.random(90) < 0.35
    clusters = np.repeat(np.arange(30), 3).tolist()
    good = gold.copy()
    good[:4] = ~good[:4]  # four mistakes
    close = gold.copy()
    close[:6] = ~close[:6]  # six mistakes: two more
    everyone = np.ones(90, dtype=bool)
    outcomes = [binary_outcomes(p.tolist(), gold.tolist(), clusters) for p in (good, close, everyone)]
    f1s = [stats.w_f1(p, gold)(np.ones((1, 90)))[0] for p in (good, close, everyone)]
    return outcomes, [float(f) for f in f1s]


def test_cell_intervals_equal_the_one_cell_cluster_bootstrap() -> None:
    outcomes, f1s = _cells()
    evidence = table_evidence(outcomes, f1s, "f1", resamples=1000, seed=5)
    assert evidence.best == 0 and evidence.method == "paired bootstrap"
    for i, outcome in enumerate(outcomes):
        low, high = evidence.intervals[i]
        assert low <= f1s[i] <= high
        pred = [c == "1" for c in outcome["pred"]]
        gold = [c == "1" for c in outcome["gold"]]
        _, alone = stats.bootstrap(stats.w_f1(pred, gold), clusters=outcome["cluster"], resamples=1000, seed=5)
        assert alone is not None
        # the same clusters resampled the same way (seeded): the same interval within Monte-Carlo error
        assert abs(alone.low - low) < 0.05 and abs(alone.high - high) < 0.05


def test_ties_with_the_best_are_holm_adjusted_paired_tests() -> None:
    outcomes, f1s = _cells()
    evidence = table_evidence(outcomes, f1s, "f1")
    assert evidence.tied == {0: True, 1: True, 2: False}  # two more mistakes tie; "everyone speaks" does not
    assert evidence.p_adjusted[2] < 0.05 < evidence.p_adjusted[1]
    rows = [{"cell": i, "f1": f} for i, f in enumerate(f1s)]
    evidence.annotate(rows)
    assert rows[1]["tied_with_best"] is True and rows[2]["tied_with_best"] is False and "f1_ci" in rows[0]
    summary = evidence.summary(rows, default=1)
    assert summary["tied_with_best"] == 2 and summary["compared"] == 3
    assert summary["default_tied"] is True
    assert "the default settings (cell 1) tie with the best" in summary["text"]


def test_jury_accuracy_ties_use_exact_mcnemar() -> None:
    # 14 cases: the best right on 12, another on 9 with 3 discordant pairs all one way: p = 2 · (1/2)^3 = 0.25
    best = [True] * 12 + [False] * 2
    other = [True] * 9 + [False] * 5
    worst = [False] * 14
    outcomes = [correct_outcomes(best), correct_outcomes(other), correct_outcomes(worst)]
    evidence = table_evidence(outcomes, [12 / 14, 9 / 14, 0.0], "accuracy")
    assert evidence.method == "exact McNemar"
    assert evidence.tied == {0: True, 1: True, 2: False}
    # Holm over two: the raw p of 0.25 doubles to 0.5 (its rank is second, 0.25·1, but Holm keeps it monotone)
    raw_other = stats.mcnemar_exact(best, other)
    assert raw_other == pytest.approx(0.25)
    assert evidence.p_adjusted[1] == pytest.approx(max(raw_other, 2 * stats.mcnemar_exact(best, worst)))
    ungraded = correct_outcomes([True, None, False])
    assert ungraded["right"] == "1-0"


def test_cells_without_outcomes_or_of_another_metric_say_why() -> None:
    outcomes, f1s = _cells()
    assert table_evidence([None, None], [0.5, 0.4], "f1").note.startswith("no per-item outcomes")
    ece = table_evidence(outcomes, f1s, "ece")
    assert not ece.tied and "ece" in ece.note
    assert tie_sentence(ece.summary([{"cell": 0}])).startswith("no per-item outcomes")
    metrics, kept = split_outcomes({"f1": 0.5, "_outcomes": outcomes[0]})
    assert metrics == {"f1": 0.5} and kept == outcomes[0]


def test_scores_give_ece_intervals() -> None:
    """A calibrated score (right as often as it says) against one that always says 0.99."""
    rng = np.random.default_rng(3)
    honest = rng.random(200)
    correct = rng.random(200) < honest
    overconfident = np.full(200, 0.99)
    outcomes = [
        score_outcomes(honest.tolist(), correct.tolist()),
        score_outcomes(overconfident.tolist(), correct.tolist()),
    ]
    ones = np.ones((1, 200))
    eces = [float(stats.w_ece(honest, correct)(ones)[0]), float(stats.w_ece(overconfident, correct)(ones)[0])]
    evidence = table_evidence(outcomes, eces, "ece", minimize=True)
    assert evidence.best == 0 and evidence.tied[1] is False
    assert evidence.intervals[1][0] <= eces[1] <= evidence.intervals[1][1]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_real_sweep_stores_outcomes_and_marks_its_ties(tmp_path: Path) -> None:
    from engine.experiments import load_definition, run_experiment, show_experiment

    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    definition = load_definition(ROOT / "data" / "experiments" / "confidence-decisions.yaml")
    definition = definition.model_copy(update={"metric": "ece"})
    result = asyncio.run(run_experiment(definition, store))
    assert all("ece_ci" in r and "tied_with_best" in r for r in result.rows)
    assert all("_outcomes" not in r for r in result.rows)
    run = store.get_run(result.run_id)
    assert run is not None and run.summary["ties"]["compared"] == 72
    assert 1 <= run.summary["ties"]["tied_with_best"] <= 72 and run.summary["ties"]["text"]
    shown = show_experiment(store, result.experiment_id)
    assert shown["ties"] == run.summary["ties"]
    # the confidence lab's other rates come from the same outcomes (proceed per item): each row's figure sits
    # inside its own interval
    for metric in ("wrong_stopped", "proceed_rate", "proceed_precision", "brier"):
        rows = [dict(r) for r in shown["rows"]]
        other = table_evidence([shown["outcomes"][r["cell"]] for r in rows], [r[metric] for r in rows], metric)
        assert len(other.intervals) == 72, metric
        for i, row in enumerate(rows):
            low, high = other.intervals[i]
            assert low - 1e-4 <= row[metric] <= high + 1e-4, (metric, row["cell"])
    assert [r["tied_with_best"] for r in shown["rows"]] == [r["tied_with_best"] for r in result.rows]
    store.dispose()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_cli_and_the_html_export_show_the_ties(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from dashboard.cli import app
    from engine.experiments import load_definition, run_experiment

    url = f"sqlite:///{tmp_path / 'x.db'}"
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", url)
    store = Store(url)
    definition = load_definition(ROOT / "data" / "experiments" / "confidence-decisions.yaml")
    result = asyncio.run(run_experiment(definition.model_copy(update={"metric": "ece"}), store))
    store.dispose()
    shown = CliRunner().invoke(app, ["experiment", "show", result.experiment_id])
    assert shown.exit_code == 0, shown.output
    assert "cells are not significantly worse than the best" in shown.output and "≈ best" in shown.output
    page = CliRunner().invoke(app, ["experiment", "export", result.experiment_id, "--format", "html"])
    assert page.exit_code == 0 and "<b>ties</b>" in page.output and 'class="tied"' in page.output


def test_two_cells_compared_item_by_item() -> None:
    """Jury cells: the cases that flipped, named, and B − A by exact McNemar; hand-raise cells: decisions named
    dialogue/participant; items that differ in keys are not compared."""
    from engine.experiments.evidence import cell_diff

    a = correct_outcomes([True, True, False, None], ["c1", "c2", "c3", "c4"])
    b = correct_outcomes([True, False, True, None], ["c1", "c2", "c3", "c4"])
    diff = cell_diff(a, b)
    assert [(c["item"], c["change"]) for c in diff["changes"]] == [("c2", "right→wrong"), ("c3", "wrong→right")]
    assert diff["comparison"]["discordant"] == [1, 1] and diff["comparison"]["p_value"] == 1.0
    hand_a = binary_outcomes([True, False], [True, True], [0, 0], ["d1/coder", "d1/designer"])
    hand_b = binary_outcomes([True, True], [True, True], [0, 0], ["d1/coder", "d1/designer"])
    (change,) = cell_diff(hand_a, hand_b)["changes"]
    assert change == {
        "item": "d1/designer",
        "change": "wrong→right",
        "gold": "speaks",
        "cell A": "stays quiet",
        "cell B": "speaks",
    }
    assert "different items" in cell_diff(a, correct_outcomes([True], ["x"]))["error"]


def test_two_confidence_cells_list_only_real_changes_and_compare_every_metric() -> None:
    """#38: scores that moved under the same decision are not changes (25 rows of "goes ahead" / "goes ahead"
    before); a decision that flips is; every metric the outcomes support is compared, Holm-adjusted."""
    from engine.experiments.evidence import cell_diff, score_outcomes

    correct = [i % 3 != 0 for i in range(24)]
    keys = [f"q{i}" for i in range(24)]
    a = score_outcomes([0.8 if c else 0.4 for c in correct], correct, [c for c in correct], keys)
    moved = [0.85 if c else 0.35 for c in correct]
    proceed_b = [c or i == 0 for i, c in enumerate(correct)]  # q0 (a wrong answer) now goes ahead
    b = score_outcomes(moved, correct, proceed_b, keys)
    diff = cell_diff(a, b)
    assert [(c["item"], c["change"]) for c in diff["changes"]] == [("q0", "decision changed")]
    assert diff["changes"][0]["cell A"] == "asks first" and diff["changes"][0]["cell B"] == "goes ahead"
    assert diff["changes"][0]["gold"] == "wrong answer"
    comparisons = diff["comparisons"]
    assert {"auc", "ece", "brier", "proceed_rate", "proceed_precision", "wrong_stopped"} <= set(comparisons)
    assert all(c.p_holm is not None or c.reason for c in comparisons.values())
