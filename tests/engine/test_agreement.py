"""Agreement statistics against a published example and an independent implementation."""

from __future__ import annotations

import random

import pytest

from engine.agreement import fleiss_kappa, krippendorff_alpha

# Fleiss (1971) as tabulated on Wikipedia: 10 subjects, 14 raters, 5 categories; κ = 0.210.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def _units_from_table(table: list[list[int]]) -> list[list[str]]:
    return [[f"c{j}" for j, count in enumerate(row) for _ in range(count)] for row in table]


def test_fleiss_published_example() -> None:
    assert fleiss_kappa(_units_from_table(FLEISS_TABLE)) == pytest.approx(0.2099, abs=1e-4)


def test_perfect_and_undefined_agreement() -> None:
    assert fleiss_kappa([["a", "a"], ["b", "b"]]) == pytest.approx(1.0)
    assert krippendorff_alpha([["a", "a"], ["b", "b"]]) == pytest.approx(1.0)
    # One label everywhere: no variation, so both are undefined, not 1.0.
    assert fleiss_kappa([["a", "a", "a"]] * 4) is None
    assert krippendorff_alpha([["a", "a", "a"]] * 4) is None
    with pytest.raises(ValueError):
        fleiss_kappa([["a", "b"], ["a"]])


@pytest.mark.parametrize("seed", range(12))
def test_krippendorff_matches_reference_implementation(seed: int) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    rng = random.Random(seed)
    raters, items = rng.randint(2, 9), rng.randint(3, 30)
    labels = ["safe_pass", "needs_review", "unsafe_fail"]
    units = [[rng.choice(labels) if rng.random() > 0.1 else None for _ in range(raters)] for _ in range(items)]
    index = {label: i for i, label in enumerate(labels)}
    reliability = [[float("nan") if (v := u[r]) is None else index[v] for u in units] for r in range(raters)]
    try:
        expected = krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")
    except ValueError:  # the reference refuses data with one value only
        expected = None
    ours = krippendorff_alpha(units)
    if expected is None:
        assert ours is None
    else:
        assert ours == pytest.approx(expected, abs=1e-9)
