"""Calibration of confidence scores against labelled outcomes: reliability bins, ECE, risk–coverage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel


def rank_auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The probability that a positive outscores a negative (ties count half): the ROC AUC of a score,
    whatever its scale. None when either side is empty."""
    if not positives or not negatives:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in positives for b in negatives)
    return wins / (len(positives) * len(negatives))


class ReliabilityBin(BaseModel):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class RiskCoveragePoint(BaseModel):
    threshold: float
    coverage: float
    risk: float | None
    kept: int


class CalibrationReport(BaseModel):
    n: int
    accuracy: float
    ece: float
    bins: list[ReliabilityBin]
    risk_coverage: list[RiskCoveragePoint]
    aurc: float


def reliability_bins(scores: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]; the last bin includes 1.0."""
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=bool)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    bins = []
    for b in range(n_bins):
        mask = index == b
        count = int(mask.sum())
        bins.append(
            ReliabilityBin(
                lower=float(edges[b]),
                upper=float(edges[b + 1]),
                count=count,
                mean_confidence=float(s[mask].mean()) if count else None,
                accuracy=float(c[mask].mean()) if count else None,
            )
        )
    return bins


def expected_calibration_error(bins: Sequence[ReliabilityBin]) -> float:
    """ECE = Σ_b (n_b / N) · |accuracy_b − mean confidence_b|."""
    total = sum(b.count for b in bins)
    if total == 0:
        return 0.0
    return float(sum(b.count / total * abs((b.accuracy or 0.0) - (b.mean_confidence or 0.0)) for b in bins if b.count))


def risk_coverage(scores: Sequence[float], correct: Sequence[bool]) -> list[RiskCoveragePoint]:
    """Keep the items whose score is ≥ t, for every distinct score t: the share kept and its error rate."""
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=bool)
    n = len(s)
    points = []
    for t in sorted(set(s.tolist()), reverse=True):
        kept = s >= t
        k = int(kept.sum())
        points.append(RiskCoveragePoint(threshold=t, coverage=k / n, kept=k, risk=float(1 - c[kept].mean())))
    return points


def risk_at(scores: Sequence[float], correct: Sequence[bool], threshold: float) -> RiskCoveragePoint:
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=bool)
    kept = s >= threshold
    k = int(kept.sum())
    return RiskCoveragePoint(
        threshold=threshold,
        coverage=k / len(s) if len(s) else 0.0,
        kept=k,
        risk=float(1 - c[kept].mean()) if k else None,
    )


def area_under_risk_coverage(points: Sequence[RiskCoveragePoint]) -> float:
    """Trapezoid area under risk(coverage), coverage from 0: lower is better."""
    if not points:
        return 0.0
    xs = [0.0] + [p.coverage for p in points]
    ys = [points[0].risk or 0.0] + [p.risk or 0.0 for p in points]
    return float(sum((xs[i + 1] - xs[i]) * (ys[i + 1] + ys[i]) / 2 for i in range(len(xs) - 1)))


def calibrate(scores: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> CalibrationReport:
    if len(scores) != len(correct):
        raise ValueError("scores and labels differ in length")
    if not scores:
        raise ValueError("no labelled items to calibrate on")
    bins = reliability_bins(scores, correct, n_bins)
    points = risk_coverage(scores, correct)
    return CalibrationReport(
        n=len(scores),
        accuracy=float(np.mean(np.asarray(correct, dtype=bool))),
        ece=expected_calibration_error(bins),
        bins=bins,
        risk_coverage=points,
        aurc=area_under_risk_coverage(points),
    )
