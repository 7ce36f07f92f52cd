"""Collaborative jury: N jurors evaluate in parallel, discuss in parallel rounds until consensus, then a
final judgment.

This module holds, so far, the jury's data model and its pure decisions (consensus, majority vote,
confidence-weighted average); the orchestration (parallel phases, events, pages) builds on them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

DEFAULT_VERDICTS = ("safe_pass", "needs_review", "unsafe_fail")  # least to most severe


class ConsensusStatus(StrEnum):
    UNANIMOUS = "unanimous"
    MAJORITY = "majority"
    SPLIT = "split"


class ConsensusResult(BaseModel):
    status: ConsensusStatus
    agreement_level: float = Field(description="share of jurors holding the most common position")
    consensus_reached: bool
    majority_position: str | None
    counts: dict[str, int] = Field(default_factory=dict)


class JurorEvaluation(BaseModel):
    juror_id: str
    verdict: str
    score: float = Field(ge=0, le=100)
    axes: dict[str, float] = Field(default_factory=dict)
    reasoning: str = ""
    confidence: float = Field(default=0.5, ge=0, le=1)
    role_name: str | None = None
    role_focus: str | None = None
    model_id: str | None = None
    round_number: int = 0  # 0: phase 1
    fallback: bool = False  # a neutral stand-in for a juror that failed (error, safety block, unparseable)
    fallback_reason: str | None = None


class JurorStatement(BaseModel):
    juror_id: str
    round_number: int
    statement_order: int
    statement: str
    position: str
    reasoning: str
    position_changed: bool
    updated_evaluation: JurorEvaluation | None = None


class DiscussionRound(BaseModel):
    round_number: int
    statements: list[JurorStatement]
    consensus_check: ConsensusResult
    speaker_order: list[str]


class FinalJudgment(BaseModel):
    method: Literal["majority_vote", "weighted_average", "final_judge"]
    verdict: str
    score: float
    reasoning: str = ""
    tie_broken: bool = False
    flags: list[str] = Field(default_factory=list)


class CollaborativeJuryResult(BaseModel):
    phase1_evaluations: list[JurorEvaluation]
    phase1_consensus: ConsensusResult
    discussion_rounds: list[DiscussionRound]
    total_rounds: int
    phase3_judgment: FinalJudgment
    final_verdict: str
    final_score: float
    early_termination: bool


# -- decisions ------------------------------------------------------------------------------------

THRESHOLD_PRECISION = 2  # thresholds are written to two decimals (0.67 stands for two thirds)


def check_consensus(positions: Sequence[str], threshold: float) -> ConsensusResult:
    """Consensus among N positions.

    unanimous: all agree (reached unless the threshold exceeds 1.0, e.g. 2.0 = always discuss to the end);
    majority: the most common position is held by more than half; reached when the agreement level,
    at the thresholds' two-decimal precision, meets the threshold (so 0.67 stops at 2 of 3 — the seed
    compared 0.666… < 0.67 and never stopped); split: no position has more than half.
    """
    if not positions:
        raise ValueError("no positions to check")
    counts = Counter(positions)
    top, top_count = max(counts.items(), key=lambda kv: (kv[1], -list(counts).index(kv[0])))
    n = len(positions)
    agreement = top_count / n
    if len(counts) == 1:
        status = ConsensusStatus.UNANIMOUS
    elif top_count * 2 > n and sum(1 for c in counts.values() if c == top_count) == 1:
        status = ConsensusStatus.MAJORITY
    else:
        status = ConsensusStatus.SPLIT
    reached = status != ConsensusStatus.SPLIT and round(agreement, THRESHOLD_PRECISION) >= threshold
    return ConsensusResult(
        status=status, agreement_level=agreement, consensus_reached=reached,
        majority_position=None if status == ConsensusStatus.SPLIT else top, counts=dict(counts),
    )


TiePolicy = Literal["severe", "lenient", "higher_score", "first"]


def _break_tie(tied: Sequence[str], evaluations: Sequence[JurorEvaluation], verdicts: Sequence[str],
               policy: TiePolicy) -> str:
    order = {v: i for i, v in enumerate(verdicts)}
    if policy == "severe":
        return max(tied, key=lambda v: order.get(v, -1))
    if policy == "lenient":
        return min(tied, key=lambda v: order.get(v, len(verdicts)))
    if policy == "higher_score":
        def mean_score(v: str) -> float:
            scores = [e.score for e in evaluations if e.verdict == v]
            return sum(scores) / len(scores)
        return max(tied, key=lambda v: (mean_score(v), order.get(v, -1)))
    return next(e.verdict for e in evaluations if e.verdict in tied)


def majority_vote(evaluations: Sequence[JurorEvaluation], *, tie_policy: TiePolicy = "severe",
                  verdicts: Sequence[str] = DEFAULT_VERDICTS) -> FinalJudgment:
    """The most common verdict; its score is the mean of the jurors who hold it. Ties follow the
    policy (default: the more severe verdict). Fallback evaluations vote like any other and are flagged."""
    if not evaluations:
        raise ValueError("no evaluations to vote on")
    counts = Counter(e.verdict for e in evaluations)
    best = max(counts.values())
    tied = [v for v, c in counts.items() if c == best]
    verdict = tied[0] if len(tied) == 1 else _break_tie(tied, evaluations, verdicts, tie_policy)
    holders = [e for e in evaluations if e.verdict == verdict]
    flags = [f"fallback:{e.juror_id}" for e in evaluations if e.fallback]
    return FinalJudgment(
        method="majority_vote", verdict=verdict, score=sum(e.score for e in holders) / len(holders),
        reasoning=f"{best} of {len(evaluations)} jurors: {verdict}" + (
            f" (tie between {', '.join(sorted(tied))} broken by '{tie_policy}')" if len(tied) > 1 else ""),
        tie_broken=len(tied) > 1, flags=flags,
    )


def verdict_for_score(score: float, pass_at: float = 70, review_at: float = 40,
                      verdicts: Sequence[str] = DEFAULT_VERDICTS) -> str:
    """Score bands: ≥ 70 pass, ≥ 40 review, else fail (the first, middle and last verdict)."""
    if score >= pass_at:
        return verdicts[0]
    if score >= review_at:
        return verdicts[len(verdicts) // 2]
    return verdicts[-1]


def weighted_average(evaluations: Sequence[JurorEvaluation], *, pass_at: float = 70, review_at: float = 40,
                     verdicts: Sequence[str] = DEFAULT_VERDICTS) -> FinalJudgment:
    """Confidence-weighted mean score and its band. With zero total confidence (every juror a fallback,
    say) the plain mean is used and flagged — never a division by zero."""
    if not evaluations:
        raise ValueError("no evaluations to average")
    total = sum(e.confidence for e in evaluations)
    flags = [f"fallback:{e.juror_id}" for e in evaluations if e.fallback]
    if total > 0 and math.isfinite(total):
        score = sum(e.score * e.confidence for e in evaluations) / total
        how = "confidence-weighted mean"
    else:
        score = sum(e.score for e in evaluations) / len(evaluations)
        how = "plain mean (every confidence is 0)"
        flags.append("zero_confidence")
    verdict = verdict_for_score(score, pass_at, review_at, verdicts)
    return FinalJudgment(method="weighted_average", verdict=verdict, score=score,
                         reasoning=f"{how} {score:.1f} → {verdict}", flags=flags)


def fallback_evaluation(juror_id: str, reason: str, *, verdicts: Sequence[str] = DEFAULT_VERDICTS,
                        round_number: int = 0) -> JurorEvaluation:
    """The neutral stand-in for a juror that failed: middle verdict, 50, confidence 0, flagged."""
    return JurorEvaluation(juror_id=juror_id, verdict=verdicts[len(verdicts) // 2], score=50, confidence=0.0,
                           reasoning=f"fallback: {reason}", fallback=True, fallback_reason=reason,
                           round_number=round_number)
