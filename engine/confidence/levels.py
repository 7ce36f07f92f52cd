"""Intervention levels: a score's level, with the reason and the suggested action, for one score
(`decide_level`, `decide_action`) and for an array of them (`levels_of`).

Both read one table, `level_floors`: the levels from the most to the least autonomous, each with the lowest score
that reaches it; a score below every floor is ESCALATE. The scalar and the vectorised decisions cannot drift
apart, and the reason's bounds ("≥ 0.7 and < 0.9") are read off the same table.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from pydantic import BaseModel

from engine.confidence.score import ConfidenceScore
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings, LevelThresholds


class InterventionLevel(StrEnum):
    SILENT = "SILENT"
    NOTIFY = "NOTIFY"
    CONFIRM = "CONFIRM"
    ESCALATE = "ESCALATE"


LEVEL_NAMES = tuple(level.value for level in InterventionLevel)  # SILENT, NOTIFY, CONFIRM, ESCALATE

SUGGESTED_ACTIONS = {
    InterventionLevel.SILENT: "proceed",
    InterventionLevel.NOTIFY: "proceed with status",
    InterventionLevel.CONFIRM: "ask confirmation",
    InterventionLevel.ESCALATE: "request clarification",
}


class ActionDecision(BaseModel):
    level: InterventionLevel
    score: float
    reason: str
    suggested_action: str


def level_floors(thresholds: LevelThresholds) -> list[tuple[InterventionLevel, float]]:
    """(level, the lowest score that reaches it), most autonomous first; below the last floor: ESCALATE."""
    return [
        (InterventionLevel.SILENT, thresholds.silent),
        (InterventionLevel.NOTIFY, thresholds.notify),
        (InterventionLevel.CONFIRM, thresholds.confirm),
    ]


def decide_level(score: float, thresholds: LevelThresholds = DEFAULT_SETTINGS.thresholds) -> InterventionLevel:
    return next((level for level, floor in level_floors(thresholds) if score >= floor), InterventionLevel.ESCALATE)


def level_bounds(level: InterventionLevel, thresholds: LevelThresholds) -> str:
    """The scores a level covers, in words: "≥ 0.7 and < 0.9", "< 0.4"."""
    floors = level_floors(thresholds)
    at = [lvl for lvl, _ in floors].index(level) if level != InterventionLevel.ESCALATE else len(floors)
    lower = f"≥ {floors[at][1]:g}" if at < len(floors) else ""
    upper = f"< {floors[at - 1][1]:g}" if at > 0 else ""
    return " and ".join(part for part in (lower, upper) if part)


def decide_action(score: ConfidenceScore | float, settings: ConfidenceSettings = DEFAULT_SETTINGS) -> ActionDecision:
    """Map a score to an intervention level with the reason and the suggested action."""
    value = score.score if isinstance(score, ConfidenceScore) else float(score)
    level = decide_level(value, settings.thresholds)
    reason = f"confidence {value:.3f} {level_bounds(level, settings.thresholds)} → {level.value}"
    if isinstance(score, ConfidenceScore) and score.penalties:
        reason += f" (after {len(score.penalties)} penalt{'y' if len(score.penalties) == 1 else 'ies'})"
    return ActionDecision(level=level, score=value, reason=reason, suggested_action=SUGGESTED_ACTIONS[level])


def levels_of(scores: np.ndarray, thresholds: LevelThresholds = DEFAULT_SETTINGS.thresholds) -> np.ndarray:
    """Level names for an array of scores (`decide_level` of each)."""
    floors = level_floors(thresholds)
    return np.select(
        [scores >= floor for _, floor in floors],
        [level.value for level, _ in floors],
        default=InterventionLevel.ESCALATE.value,
    )
