"""Calibration against labelled outcomes: one parser (`parse_labels`), one report (reliability, ECE,
risk–coverage, the share and accuracy of each level, with intervals) and the `confidence.calibrate` run kind
(`calibrate_labels`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine import runctx, stats
from engine.confidence.factors import FACTOR_FIELDS, ConfidenceFactors, parse_factors
from engine.confidence.levels import LEVEL_NAMES, levels_of
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings
from engine.confidence.tables import score_arrays
from engine.events import async_run_context
from engine.inputs import Problems, iter_lines, problem_lines
from engine.reliability import calibrate, rank_auc, risk_at

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store


class LabelledItem(BaseModel):
    """One labelled step: its factors and whether acting on it was right."""

    model_config = ConfigDict(extra="forbid")

    id: str
    query: str = ""
    correct: bool
    factors: ConfidenceFactors


class LabelError(ValueError):
    """A labelled set with bad rows; `problems` names each by line. Nothing is imported."""

    def __init__(self, problems: list[str]) -> None:

        self.problems = problems
        super().__init__(problem_lines(problems, "bad rows, nothing imported:"))


def parse_labels(text: str, source: str = "labels") -> list[LabelledItem]:
    """Labelled items from JSONL ({factors, correct, id?, query?} a line); every bad line is named
    (`source:N: why`, a factor by its field) and nothing is imported. An empty text gives no items."""

    items: list[LabelledItem] = []
    problems = Problems()
    for number, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("correct"), bool):
                raise ValueError("needs a boolean 'correct'")
            factors = parse_factors(row.get("factors", {}))
        except ValueError as exc:  # not JSON, no boolean 'correct', or a FactorError naming the field
            problems.append(f"{source}:{number}: {str(exc).splitlines()[0]}")
            continue
        items.append(
            LabelledItem(
                id=str(row.get("id") or f"line-{number}"),
                query=str(row.get("query") or ""),
                correct=row["correct"],
                factors=factors,
            )
        )
    if problems:
        raise LabelError(problems)
    return items


def calibration_report(
    items: Sequence[LabelledItem], settings: ConfidenceSettings = DEFAULT_SETTINGS, bins: int = 10
) -> dict[str, Any]:
    """Scores of the labelled items under `settings`, their reliability bins, ECE, risk–coverage (with each
    level threshold marked), the share of items per level and the accuracy per level."""

    if not items:
        raise ValueError("no labelled items")
    columns = {name: np.asarray([getattr(i.factors, name) for i in items]) for name in FACTOR_FIELDS}
    scores = score_arrays(columns, settings).tolist()
    correct = [i.correct for i in items]
    report = calibrate(scores, correct, bins)
    t = settings.thresholds
    levels = levels_of(np.asarray(scores), t).tolist()
    counts = {lvl: levels.count(lvl) for lvl in LEVEL_NAMES}
    return {
        "items": [
            {"id": i.id, "query": i.query, "score": s, "level": lvl, "correct": c}
            for i, s, lvl, c in zip(items, scores, levels, correct, strict=True)
        ],
        "n": report.n,
        "accuracy": report.accuracy,
        "ece": report.ece,
        "aurc": report.aurc,
        **score_quality(scores, correct, counts["SILENT"] + counts["NOTIFY"]),
        "bins": [b.model_dump() for b in report.bins],
        "risk_coverage": [p.model_dump() for p in report.risk_coverage],
        "thresholds": {
            name: risk_at(scores, correct, value).model_dump()
            for name, value in (("silent", t.silent), ("notify", t.notify), ("confirm", t.confirm))
        },
        "level_shares": {lvl: counts[lvl] / len(levels) for lvl in LEVEL_NAMES},
        "level_counts": counts,
        "accuracy_by_level": {
            lvl: (
                sum(c for c, at in zip(correct, levels, strict=True) if at == lvl) / counts[lvl]
                if counts[lvl]
                else None
            )
            for lvl in LEVEL_NAMES
        },
    }


def score_quality(scores: Sequence[float], correct: Sequence[bool], proceeded: int) -> dict[str, Any]:
    """The figures' 95 % intervals, and two more ways to read the scores: AUC (do right answers score higher?)
    and the Brier score (the score read as P(right)). Wilson for the accuracy and the proceed rate (the share
    acted on without asking: SILENT or NOTIFY, as the experiments count it), a seeded bootstrap over items
    for ECE, AURC, AUC and Brier (engine/stats.py)."""

    n = len(scores)
    s, c = np.asarray(scores, float), np.asarray(correct, bool)
    auc = rank_auc(s[c].tolist(), s[~c].tolist())

    def boot(statistic: stats.Stat) -> list[float] | None:
        interval = stats.bootstrap(statistic)[1]
        return interval.as_list() if interval else None

    accuracy_ci, proceed_ci = stats.wilson(int(c.sum()), n), stats.wilson(proceeded, n)
    return {
        "accuracy_ci": accuracy_ci.as_list() if accuracy_ci else None,
        "ece_ci": boot(stats.w_ece(s, c)),
        "aurc_ci": boot(stats.w_aurc(s, c)),
        "auc": None if auc is None else round(auc, 4),
        "auc_ci": boot(stats.w_auc(s, c)),
        "brier": round(float(np.mean((s - c) ** 2)), 4),
        "brier_ci": boot(stats.w_brier(s, c)),
        "proceed_rate": proceeded / n,
        "proceed_rate_ci": proceed_ci.as_list() if proceed_ci else None,
    }


class CalibrationConfig(BaseModel):
    """`confidence.calibrate`: a labelled set (its items are the input) scored under these settings."""

    model_config = ConfigDict(extra="forbid")

    labels: str = Field("", description="the labelled set's file name")
    items: list[LabelledItem] = Field(min_length=1)
    bins: int = Field(10, ge=2, le=50)
    settings: ConfidenceSettings = Field(default_factory=ConfidenceSettings)


class CalibrationResult(BaseModel):
    run_id: str
    report: dict[str, Any]


async def calibrate_labels(
    config: CalibrationConfig, models: ModelSource | None, store: Store, *, sinks: list[EventSink] | None = None
) -> CalibrationResult:
    """The calibration of the default (or given) scores against the labels as a stored run of kind
    `confidence.calibrate`. No model is called (`models` is unused; every entry point takes one)."""

    async with async_run_context(
        store, "confidence.calibrate", config.model_dump(mode="json"), name=config.labels, sinks=sinks
    ) as run:
        runctx.progress(total=len(config.items), step="scoring", unit="items")
        report = calibration_report(config.items, config.settings, config.bins)
        runctx.progress(done=len(config.items), step="calibrated")
        run.emit("confidence_calibrated", **{k: v for k, v in report.items() if k != "items"})
        run.summary = {"n": report["n"], "ece": report["ece"], "aurc": report["aurc"], "result": report}
    return CalibrationResult(run_id=run.run_id, report=report)
