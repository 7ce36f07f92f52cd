"""What a cell costs, as the Experiments page and its table read it: cells decided from one recording share
its calls, tokens and $ (said once, with no Pareto front to draw), while each cell keeps its own new calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.experiments import run_experiment
from engine.experiments.analysis import shared_costs, traded_costs
from engine.store import Store
from tests.engine.test_experiments import handraise_definition, scripted_judge


def test_a_decision_sweep_shares_its_recordings_cost_and_has_nothing_to_trade(tmp_path: Path, store: Store) -> None:
    definition = handraise_definition(tmp_path, "threshold: [0.4, 0.5, 0.6]\nmode: [focus, brainstorm]\n")
    rows = asyncio.run(run_experiment(definition, store, scripted_judge(store))).rows
    same = shared_costs(rows)
    assert same["calls"] == 24 and same["tokens"] > 0 and "new_calls" not in same
    assert traded_costs(rows) == []
    assert sorted(r["new_calls"] for r in rows) == [0, 0, 0, 0, 0, 24]  # the first cell paid for the recording


def test_costs_that_differ_between_cells_are_traded_and_a_failed_cell_does_not_count() -> None:
    rows: list[dict[str, Any]] = [
        {"cell": 0, "calls": 10, "tokens": 100, "cost": 0.0, "new_calls": 10},
        {"cell": 1, "calls": 14, "tokens": 100, "cost": 0.0, "new_calls": 0},
        {"cell": 2, "error": "refused"},
    ]
    assert shared_costs(rows) == {"tokens": 100.0, "cost": 0.0}
    assert traded_costs(rows) == ["calls"]
