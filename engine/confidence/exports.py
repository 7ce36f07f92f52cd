"""The confidence mechanism's export tables (a calibration's items),
named by its `MechanismSpec` (spec.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.exports.record import RunRecord, flat
from engine.mechanism import ExportTable


def calibration_items(record: RunRecord) -> list[dict[str, Any]]:
    rows = [flat(p) for _, p in record.pairs("calibration_item")]
    summary = record.run.summary
    result = summary.get("result")
    items = result.get("items") if isinstance(result, Mapping) else summary.get("items")
    if not rows and "calibrat" in record.run.kind and isinstance(items, list):
        rows = [flat(i) for i in items if isinstance(i, Mapping)]
    return rows


TABLES = (
    ExportTable("confidence_factors", "each computed confidence factor", events=("confidence_factor",)),
    ExportTable("confidence_scores", "the score, breakdown and level", events=("confidence_scored",)),
    ExportTable(
        "confidence_eval_items", "one line per labelled answer of `confidence eval`", events=("confidence_eval_item",)
    ),
    ExportTable("calibration_items", "each labelled item with its score and level", calibration_items),
)
