"""The score of a plan of steps: its step scores combined by mean, min or later-weighted mean, with the origin's
critical-step rule. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from engine.confidence.score import ConfidenceScore

AggregationMethod = Literal["mean", "min", "weighted"]


class ConfidenceAggregator:
    """Combine step scores of a plan: mean, min (the bottleneck), or weighted 1..n (later steps count more).

    With `critical_check`, a plan any of whose steps is below `critical_threshold` gets
    mean × `critical_factor` — the origin's rule, whatever the method.
    """

    METHODS: tuple[str, ...] = ("mean", "min", "weighted")

    def __init__(
        self, critical_check: bool = False, critical_threshold: float = 0.3, critical_factor: float = 0.7
    ) -> None:
        self.critical_check = critical_check
        self.critical_threshold = critical_threshold
        self.critical_factor = critical_factor

    def aggregate(self, scores: Sequence[ConfidenceScore | float], method: str = "mean") -> float:
        if method not in self.METHODS:
            raise ValueError(f"unknown aggregation method '{method}' — use one of {', '.join(self.METHODS)}")
        values = [s.score if isinstance(s, ConfidenceScore) else float(s) for s in scores]
        if not values:
            return 0.0
        mean = sum(values) / len(values)
        if self.critical_check and any(v < self.critical_threshold for v in values):
            return mean * self.critical_factor
        if method == "mean":
            return mean
        if method == "min":
            return min(values)
        weights = range(1, len(values) + 1)
        return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
