"""The confidence lab's charts in a run's report: the gauge, how the score is built, the factor breakdown."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.mechanisms.confidence import charts
from engine.confidence.settings import LevelThresholds
from engine.exports import RunRecord


def confidence(record: RunRecord) -> list[tuple[str, go.Figure]]:

    scored = record.pairs("confidence_scored")
    if not scored:
        return []
    p = scored[-1][1]
    score, level = p.get("score") or {}, (p.get("decision") or {}).get("level", "")
    settings = record.run.config.get("settings") or {}
    thresholds = {**LevelThresholds().model_dump(), **(settings.get("thresholds") or {})}
    return [
        ("Confidence", charts.confidence_gauge(float(score.get("score", 0.0)), thresholds, str(level))),
        (
            "How the score is built",
            charts.penalty_waterfall(
                float(score.get("base", 0.0)),
                score.get("penalties") or [],
                float(score.get("score", 0.0)),
                score.get("breakdown") or {},
            ),
        ),
        ("Factor breakdown", charts.breakdown_bars(score.get("breakdown") or {})),
    ]
