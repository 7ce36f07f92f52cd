"""The skip mechanism's export tables (a simulation with and without the cache),
named by its `MechanismSpec` (spec.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.exports.record import RunRecord, flat
from engine.mechanism import ExportTable


def simulation(record: RunRecord) -> list[dict[str, Any]]:
    """A skip simulation's figures, one row with the cache and one without (when the run stored both)."""
    if not record.run.kind.startswith("skip."):
        return []
    summary = record.run.summary
    # `run_simulation` keeps the comparison under "result" (older runs: "comparison", or the summary itself)
    nested = next((summary[k] for k in ("result", "comparison") if isinstance(summary.get(k), Mapping)), None)
    source: Mapping[str, Any] = nested if nested is not None else summary
    rows = [
        {"setting": name.replace("_", " "), **flat(source[name])}
        for name in ("without_cache", "with_cache")
        if isinstance(source.get(name), Mapping)
    ]
    if not rows:
        rows = [{"setting": "summary", **{k: v for k, v in summary.items() if not isinstance(v, Mapping | list)}}]
    return rows


TABLES = (
    ExportTable("simulation", "a skip simulation with and without the cache", simulation),
    ExportTable(
        "simulation_events",
        "judgments, cache hits and replies of a simulation",
        events=("judgment", "judgment_failed", "cache_hit", "reply"),
    ),
)
