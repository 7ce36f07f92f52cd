"""The jury's charts in a run's report: each juror's score per round, the round timeline, the verdicts; a case-set
evaluation's rates."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.charts.base import metric_bars
from dashboard.mechanisms.jury import charts
from engine.exports import RunRecord
from engine.jury.view import JuryView


def jury(record: RunRecord) -> list[tuple[str, go.Figure]]:

    view = JuryView.fold(record.pairs())
    if not view.phase1 or (view.identical_seats and not view.rounds):
        return []  # one judgment repeated: per-juror charts would draw it as three jurors agreeing (as on the page)
    labels = view.rubric.get("verdicts") or ["safe_pass", "needs_review", "unsafe_fail"]
    out = [("Score trajectory per juror", charts.jury_trajectory(view.trajectory()))]
    timeline = view.timeline()
    if timeline:
        out.append(("Round timeline", charts.jury_timeline(timeline)))
    out.append(("Verdict distribution", charts.jury_verdicts(view.verdicts(), [*labels, "failed"])))
    return out


def jury_eval(record: RunRecord) -> list[tuple[str, go.Figure]]:
    if record.run.kind != "jury.eval":
        return []
    return metric_bars(
        record.run.summary, ("phase1_accuracy", "accuracy", "outcome_changed_rate"), "Case-set evaluation"
    )
