"""#38 attack findings: stored data of the wrong shape is said, never a crash; Holm keeps a p of 0; no '-0.00',
'nan' or 'None' reaches a person; repeated item keys never pair the wrong items."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import stats
from engine.comparison import compare_items, stored_text, with_holm
from engine.events import run_context
from engine.experiments.evidence import binary_outcomes, cell_diff, table_evidence
from engine.exports import load_run, tables
from engine.history import figure_text
from engine.labels import labelable_items
from engine.labels.corrected import corrected_rates
from engine.outcomes import NoItems, item_outcomes
from engine.store import Store


def test_holm_keeps_a_p_of_zero_and_ignores_a_nan() -> None:
    sure = stats.Comparison(0.6, 0.98, 0.38, stats.Interval(0.3, 0.4, "x", 10_000), 0.0, "exact McNemar", 10_000)
    odd = stats.Comparison(0.5, 0.5, 0.0, None, float("nan"), "t", 10)
    out = with_holm({"accuracy": sure, "share x": odd})
    assert out["accuracy"].p_holm == 0.0 and out["share x"].p_holm is None


def test_a_run_with_malformed_items_opens_exports_and_is_said_not_compared(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'bad.db'}")
    try:
        with run_context(store, "jury.eval", {"cases": "x"}) as run:
            run.emit(
                "jury_eval_item",
                id="c1",
                gold="safe_pass",
                final_verdict="safe_pass",
                correct=True,
                final_positions=["a", "b"],
            )
        stored = store.get_run(run.run_id)
        assert stored is not None
        with pytest.raises(NoItems, match="malformed"):
            item_outcomes(store, stored)
        assert labelable_items(store, stored) == [] and corrected_rates(store, stored) == []
        assert "headline" in tables(load_run(store, run.run_id))
    finally:
        store.dispose()


def test_repeated_keys_keep_their_places_and_bad_cells_leave_the_evidence_out() -> None:
    same = binary_outcomes([True, False, True], [True, True, True], [0, 1, 2], ["a", "a", "a"])
    diff = cell_diff(same, same)
    assert diff["comparisons"]["accuracy"].difference == 0 and not diff["changes"]
    broken = {**same, "pred": "1é0"}
    evidence = table_evidence([same, broken], [0.67, 0.5], "accuracy")
    assert "malformed" in evidence.note and not evidence.intervals


def test_nothing_unreadable_reaches_a_person() -> None:
    assert figure_text(float("nan")) == "—" and figure_text(float("inf")) == "—"
    shown = stored_text({"difference": -0.00001, "difference_ci": [-0.0004, 0.0002], "p_value": float("nan")})
    assert not re.search(r"-0\.0+(?![0-9])", shown) and "nan" not in shown and shown.startswith("0.0000 (")
    assert stored_text({"difference": float("nan")}) == "" and stored_text(
        {"difference": 0.1, "difference_ci": ["a", 1]}
    )
    assert compare_items([], []) == {}
