"""The hand raise's charts in a run's report: will per participant per turn and the approval flow of a conversation, a
judge benchmark's rates."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.charts.base import metric_bars, small
from dashboard.mechanisms.handraise import charts
from engine.exports import RunRecord
from engine.handraise.exports import hands


def conversation(record: RunRecord) -> list[tuple[str, go.Figure]]:
    rows = hands(record)  # the `conversation_hands` export table's builder
    if not rows:
        return []
    threshold = (record.run.config.get("config") or {}).get("threshold")
    will = charts.will_per_turn(rows, float(threshold) if isinstance(threshold, int | float) else None)
    return [
        ("Will per participant per turn", small(will, "Will per participant per turn")),
        ("Approval flow", small(charts.approval_sankey(rows), "Approval flow")),
    ]


def handraise_eval(record: RunRecord) -> list[tuple[str, go.Figure]]:
    if record.run.kind != "handraise.eval":
        return []
    return metric_bars(record.run.summary, ("accuracy", "precision", "recall", "f1", "consistency"), "Judge benchmark")
