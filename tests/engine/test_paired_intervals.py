"""Paired intervals on tiny n are never narrower than the test supports (issue 35, point 7). On 2–5 items a
paired bootstrap read [−1, −1] while exact McNemar's p was 0.06–0.5. Now paired correctness gets the hull of
Newcombe's paired score interval and the exact McNemar interval (never zero-width, holding the estimate,
excluding 0 only when p < 0.05), and a paired bootstrap of another statistic below `MIN_PAIRED` items — or one
whose every resample gives the same difference — gives no interval and says why, wherever it is shown."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import stats
from engine.experiments.evidence import binary_outcomes, table_evidence
from engine.outcomes import comparison_text


def _table(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[bool], list[bool]]:
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return a, b


def _excludes_zero(interval: stats.Interval) -> bool:
    return interval.low > 0 or interval.high < 0


def test_newcombes_interval_against_the_published_value() -> None:
    """Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables, ch. 8 (Cavo et al. 2012): the
    table (59, 6 / 16, 80) gives −0.0621 (−0.1186 to −0.0046) for first − second; B − A is its mirror."""
    a, b = _table(59, 6, 16, 80)
    interval = stats.paired_score_interval(a, b)
    assert interval is not None
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.0046, 0.1186)
    comp = stats.compare_correct(a, b)
    assert comp.difference == pytest.approx(10 / 161) and comp.p_value == pytest.approx(0.0525, abs=1e-4)
    assert comp.interval is not None and comp.interval.low < 0 < comp.interval.high  # p 0.052: 0 stays inside


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_every_item_flipped_on_a_few_items_is_not_certainty(n: int) -> None:
    a, b = [True] * n, [False] * n
    comp = stats.compare_correct(a, b)
    assert comp.difference == -1.0 and comp.p_value == pytest.approx(2 / 2**n)
    assert comp.interval is not None and comp.interval.low == -1.0 and comp.interval.high > 0  # 0 inside: p ≥ 0.06
    assert comp.interval.as_list() != [-1.0, -1.0] and "(-1.00 to +" in comp.interval_text()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_every_table_up_to_twelve_items_agrees_with_mcnemar() -> None:
    """Every 2×2 paired table of 1..12 items: the interval holds the estimate, is never zero-width, and excludes
    0 exactly when exact McNemar's p < 0.05 (so never when p ≥ 0.5)."""
    started = time.perf_counter()
    tables = 0
    for n in range(1, 13):
        for both, only_a, only_b in itertools.product(range(n + 1), repeat=3):
            neither = n - both - only_a - only_b
            if neither < 0:
                continue
            comp = stats.compare_correct(*_table(both, only_a, only_b, neither))
            interval, p = comp.interval, comp.p_value
            assert interval is not None and p is not None and comp.difference is not None
            assert interval.low <= comp.difference <= interval.high and interval.width > 0
            assert _excludes_zero(interval) == (p < 0.05), (n, both, only_a, only_b, interval, p)
            tables += 1
    assert tables == 1819
    assert time.perf_counter() - started < 120  # ~3 s here


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=12),
    clustered=st.lists(st.integers(0, 3), min_size=12, max_size=12) | st.none(),
)
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_random_paired_outcomes(pairs: list[tuple[bool, bool]], clustered: list[int] | None) -> None:
    """Random paired correctness of 1..12 items, with or without cases: the interval holds the estimate, has
    width, and never excludes 0 when p ≥ 0.05 (the brief asked: never when p ≥ 0.5)."""
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    clusters = None if clustered is None else clustered[: len(pairs)]
    comp = stats.compare_correct(a, b, clusters=clusters)
    assert comp.interval is not None and comp.p_value is not None and comp.difference is not None
    assert comp.interval.low <= comp.difference <= comp.interval.high and comp.interval.width > 0
    assert -1.0 <= comp.interval.low and comp.interval.high <= 1.0
    if comp.p_value >= 0.05:
        assert not _excludes_zero(comp.interval)


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=12),
)
def test_a_bootstrap_of_another_statistic_on_few_items_says_so(rows: list[tuple[bool, bool, bool]]) -> None:
    """Paired F1 on 1..12 items: below MIN_PAIRED no interval and no p, with the reason; at or above it an
    interval that holds the estimate and has width, or none with a reason (never a zero-width claim)."""
    gold = [g for g, _, _ in rows]
    comp = stats.paired_bootstrap(stats.w_f1([x for _, x, _ in rows], gold), stats.w_f1([y for _, _, y in rows], gold))
    if comp.difference is None:
        return  # F1 undefined on this sample (no positive at all): nothing to compare
    if len(rows) < stats.MIN_PAIRED:
        assert comp.interval is None and comp.p_value is None
        assert comp.reason == f"too few items: {len(rows)} paired items; a paired bootstrap needs 10"
        assert comp.to_dict()["difference_ci_reason"] == comp.reason
    elif comp.interval is None:
        assert comp.reason  # undefined in most resamples, or the same difference in every one
    else:
        assert comp.interval.width > 0 and comp.interval.low <= comp.difference <= comp.interval.high


def test_a_bootstrap_whose_difference_never_varies_gives_no_interval() -> None:
    gold = [True, False] * 10
    same = [True, True, False, False] * 5
    comp = stats.paired_bootstrap(stats.w_f1(same, gold), stats.w_f1(same, gold))
    assert comp.difference == 0 and comp.interval is None and comp.p_value is None
    assert comp.reason is not None and comp.reason.startswith("no interval: the difference is the same")


def test_the_reason_is_shown_as_text_where_the_interval_would_be() -> None:
    gold = [True, False, True, True]
    comp = stats.paired_bootstrap(
        stats.w_f1([True, True, False, False], gold), stats.w_f1([True, False, True, True], gold), clusters="abcd"
    )
    line = comparison_text("f1", comp)
    assert "(too few items: 4 paired cases; a paired bootstrap needs 10)" in line
    assert "None" not in line and "nan" not in line
    stored = comp.to_dict()
    assert stored["difference_ci"] is None and stats.interval_text(stored) == f" ({comp.reason})"
    # The Models page's scorecard column and the experiment CLI read the stored dict the same way.
    from pages.models import versus_text

    shown = versus_text({**stored, "best_model": "m", "best_method": "x"})
    assert "too few items: 4 paired cases" in shown and "None" not in shown and ", p" not in shown


def test_experiment_ties_on_a_few_items_call_no_cell_worse() -> None:
    """F1 on 4 dialogues: a paired bootstrap cannot tell a worse cell from chance, and the tie line says so."""
    gold = [True, True, False, True, True, False]
    clusters = [0, 0, 1, 2, 3, 3]
    cells = [
        binary_outcomes(predicted, gold, clusters)
        for predicted in (
            [True, True, False, True, True, False],
            [False, False, True, False, False, True],
            [True, False, False, True, False, False],
        )
    ]
    evidence = table_evidence(cells, [1.0, 0.0, 0.67], "f1")
    assert evidence.best == 0 and evidence.method == "paired bootstrap"
    assert evidence.tied == {0: True, 1: True, 2: True}  # before: cell 1 (F1 0 against 1) was called worse
    assert evidence.note.startswith("too few items: 4 paired; a paired bootstrap needs 10")
    assert "too few items: 4 paired" in evidence.summary([{"cell": i} for i in range(3)])["text"]


def test_it_stays_fast() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random(1000) < 0.6, rng.random(1000) < 0.7
    started = time.perf_counter()
    for _ in range(20):
        stats.compare_correct(a, b)
    assert (time.perf_counter() - started) / 20 < 0.1
