"""The jury's results and its pure rules: consensus (threshold, quorum), the discussion's stop rules
(consensus, stagnation, last round), the final methods that need no model call (majority vote with its tie
policy, confidence-weighted average) and the fallback of a failed juror. No model, no I/O: a recording can be
re-decided with these same functions."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_VERDICTS = ("safe_pass", "needs_review", "unsafe_fail")  # least to most severe


NO_VERDICT = "no_verdict"  # the final result of a panel left with too few working jurors
IDENTICAL_SEATS_TEXT = (
    "identical by construction: every seat is the same model judging by the same role-blind prompt, so their "
    "verdicts are one judgment repeated, not agreement"
)


class ConsensusStatus(StrEnum):
    UNANIMOUS = "unanimous"
    MAJORITY = "majority"
    SPLIT = "split"
    NO_QUORUM = "no_quorum"  # fewer working jurors than the quorum: no consensus is possible


class ConsensusResult(BaseModel):
    status: ConsensusStatus
    agreement_level: float = Field(description="share of the working jurors holding the most common position")
    consensus_reached: bool
    majority_position: str | None
    counts: dict[str, int] = Field(default_factory=dict)
    failed: int = Field(0, description="seats whose juror failed (a fallback): they do not vote")


class JurorSeat(BaseModel):
    """A juror: a catalog model and the role it plays (name, focus prompt)."""

    model_config = ConfigDict(extra="forbid")

    juror_id: str
    model_id: str
    role_name: str
    role_focus: str = ""
    # How this seat judges: "" as the jury's config says (JURY_JUDGE); "likelihood" or "generate" whatever the
    # config; "neighbours": the LLM-free juror (engine.jury.neighbours), whose model is an embedder (use-m3).
    judge: Literal["", "likelihood", "generate", "neighbours"] = ""


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
    # The call that produced it: seconds since the run started, and its record in llm_calls.
    started_s: float | None = None
    ended_s: float | None = None
    call_id: int | None = None
    flags: list[str] = Field(default_factory=list)  # failed (invalid:…, truncated) or repaired fields
    # What stands behind the verdict in machine terms, shown small below the reasoning: a likelihood juror's
    # features, map and what it heard. Text, never markup; "" for a generating juror (and in old recordings).
    detail: str = ""
    # A seat that judges by a distribution (likelihood, neighbours): its calibrated probability of each verdict,
    # which the stack reads and a learned round updates. {} for a generating juror (and in old recordings).
    distribution: dict[str, float] = Field(default_factory=dict)


class JurorStatement(BaseModel):
    juror_id: str
    round_number: int
    statement_order: int
    statement: str
    position: str
    reasoning: str
    position_changed: bool
    updated_evaluation: JurorEvaluation | None = None
    detail: str = ""  # the statement's machine detail (a likelihood juror's features, map, what it heard)


class DiscussionRound(BaseModel):
    round_number: int
    statements: list[JurorStatement]
    consensus_check: ConsensusResult
    speaker_order: list[str]


FinalMethodName = Literal["majority_vote", "weighted_average", "final_judge", "stack", "auto"]


class FinalJudgment(BaseModel):
    method: FinalMethodName
    verdict: str = Field(description=f"a rubric label, or '{NO_VERDICT}' when too few jurors worked")
    score: float | None = Field(description="None with no verdict")
    reasoning: str = ""
    tie_broken: bool = False
    flags: list[str] = Field(default_factory=list)
    detail: str = ""  # a likelihood final judge's features, map and what it heard


class CollaborativeJuryResult(BaseModel):
    phase1_evaluations: list[JurorEvaluation]
    phase1_consensus: ConsensusResult
    discussion_rounds: list[DiscussionRound]
    total_rounds: int
    phase3_judgment: FinalJudgment
    final_verdict: str
    final_score: int | None = Field(
        ge=0,
        le=100,
        description="the seed's `final_score: int` (0–100): the final judgment's score rounded once, "
        "half up; None only when too few jurors worked for a verdict",
    )
    early_termination: bool
    # Beyond the seed: why the discussion ended, what it cost, and which case and panel it was.
    termination_reason: str = ""
    case_id: str = ""
    jurors: list[JurorSeat] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    wall_s: float = 0.0
    # Every seat the same model judging by the same role-blind prompt: their verdicts are one judgment copied,
    # identical by construction, so their κ and α say nothing about agreement.
    identical_seats: bool = False

    @field_validator("final_score", mode="before")
    @classmethod
    def _rounded_once(cls, value: object) -> object:
        """A score as the final judgment gives it (a float: a weighted average, a stack's expectation) becomes the
        seed's integer here, and a run stored before (a float) reads the same way: half up, 57.5 → 58."""
        if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
            raise ValueError(f"final_score must be a number 0–100 or None, not {type(value).__name__}")
        if isinstance(value, float):
            if not (math.isfinite(value) and 0.0 <= value <= 100.0):
                raise ValueError(f"final_score {value!r} is outside 0–100")  # refused before rounding, not clamped
            return int(Decimal(repr(float(value))).quantize(Decimal(1), rounding=ROUND_HALF_UP))  # a NumPy float too
        return value

    def final_evaluations(self) -> list[JurorEvaluation]:
        """Each juror's latest evaluation: its last statement's, else its phase-1 one."""
        latest = {e.juror_id: e for e in self.phase1_evaluations}
        for rnd in self.discussion_rounds:
            for st in rnd.statements:
                if st.updated_evaluation is not None:
                    latest[st.juror_id] = st.updated_evaluation
        return [latest[e.juror_id] for e in self.phase1_evaluations]


# -- decisions ------------------------------------------------------------------------------------

THRESHOLD_PRECISION = 2  # thresholds are written to two decimals (0.67 stands for two thirds)


def check_consensus(positions: Sequence[str], threshold: float) -> ConsensusResult:
    """Consensus among N positions.

    unanimous: all agree (reached unless the threshold exceeds 1.0: at 2.0 agreement never stops the discussion);
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
        status=status,
        agreement_level=agreement,
        consensus_reached=reached,
        majority_position=None if status == ConsensusStatus.SPLIT else top,
        counts=dict(counts),
    )


def quorum(seats: int) -> int:
    """Working jurors a panel needs to reach consensus or a verdict: 2 (one for a one-seat panel)."""
    return min(2, seats)


def working(evaluations: Sequence[JurorEvaluation]) -> list[JurorEvaluation]:
    """The jurors that vote: a fallback stands in for a failed juror and never votes."""
    return [e for e in evaluations if not e.fallback]


def panel_consensus(evaluations: Sequence[JurorEvaluation], threshold: float) -> ConsensusResult:
    """Consensus among the working jurors: the agreement level is the share of working jurors holding the
    most common position (failed seats are neither for nor against). A panel with fewer working jurors
    than its quorum cannot reach consensus (`no_quorum`)."""
    voters = working(evaluations)
    failed = len(evaluations) - len(voters)
    if len(voters) < quorum(len(evaluations)) or not voters:
        return ConsensusResult(
            status=ConsensusStatus.NO_QUORUM,
            agreement_level=0.0,
            consensus_reached=False,
            majority_position=None,
            counts=dict(Counter(e.verdict for e in voters)),
            failed=failed,
        )
    return check_consensus([e.verdict for e in voters], threshold).model_copy(update={"failed": failed})


def failed_fields(flags: Sequence[str]) -> list[str]:
    """The flags of an evaluation that say a field failed (not the JSON repairs): for cards and CLI lines."""
    return [f for f in flags if f.startswith(("invalid:", "truncated", "statement_failed"))]


def failed_seat_flags(evaluations: Sequence[JurorEvaluation]) -> list[str]:
    failed = [e.juror_id for e in evaluations if e.fallback]
    return [f"fallback:{j}" for j in failed] + ([f"failed_seats:{len(failed)}"] if failed else [])


def _no_verdict(method: FinalMethodName, evaluations: Sequence[JurorEvaluation]) -> FinalJudgment | None:
    """The final judgment of a panel without a quorum of working jurors, or None when it has one."""
    voters = working(evaluations)
    if len(voters) >= quorum(len(evaluations)) and voters:
        return None
    return FinalJudgment(
        method=method,
        verdict=NO_VERDICT,
        score=None,
        flags=[*failed_seat_flags(evaluations), "no_verdict"],
        reasoning=f"no verdict: {len(voters)} of {len(evaluations)} jurors working, {quorum(len(evaluations))} needed",
    )


TiePolicy = Literal["severe", "lenient", "higher_score", "first"]


def _break_tie(
    tied: Sequence[str], evaluations: Sequence[JurorEvaluation], verdicts: Sequence[str], policy: TiePolicy
) -> str:
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


def majority_vote(
    evaluations: Sequence[JurorEvaluation],
    *,
    tie_policy: TiePolicy = "severe",
    verdicts: Sequence[str] = DEFAULT_VERDICTS,
) -> FinalJudgment:
    """The most common verdict of the working jurors; its score is the mean of the jurors who hold it.
    Ties follow the policy (default: the more severe verdict). Fallbacks do not vote; they are flagged,
    with the number of failed seats; without a quorum of working jurors the result is no verdict."""
    if not evaluations:
        raise ValueError("no evaluations to vote on")
    if (none := _no_verdict("majority_vote", evaluations)) is not None:
        return none
    voters = working(evaluations)
    counts = Counter(e.verdict for e in voters)
    best = max(counts.values())
    tied = [v for v, c in counts.items() if c == best]
    verdict = tied[0] if len(tied) == 1 else _break_tie(tied, voters, verdicts, tie_policy)
    holders = [e for e in voters if e.verdict == verdict]
    failed = len(evaluations) - len(voters)
    return FinalJudgment(
        method="majority_vote",
        verdict=verdict,
        score=sum(e.score for e in holders) / len(holders),
        reasoning=f"{best} of {len(voters)} working jurors: {verdict}"
        + (f" ({failed} failed, not voting)" if failed else "")
        + (f" (tie between {', '.join(sorted(tied))} broken by '{tie_policy}')" if len(tied) > 1 else ""),
        tie_broken=len(tied) > 1,
        flags=failed_seat_flags(evaluations),
    )


def verdict_for_score(
    score: float, pass_at: float = 70, review_at: float = 40, verdicts: Sequence[str] = DEFAULT_VERDICTS
) -> str:
    """Score bands: ≥ 70 pass, ≥ 40 review, else fail (the first, middle and last verdict)."""
    if score >= pass_at:
        return verdicts[0]
    if score >= review_at:
        return verdicts[len(verdicts) // 2]
    return verdicts[-1]


def weighted_average(
    evaluations: Sequence[JurorEvaluation],
    *,
    pass_at: float = 70,
    review_at: float = 40,
    verdicts: Sequence[str] = DEFAULT_VERDICTS,
) -> FinalJudgment:
    """Confidence-weighted mean score of the working jurors and its band (fallbacks do not count; without
    a quorum of working jurors the result is no verdict). With zero total confidence the plain mean is
    used and flagged — never a division by zero."""
    if not evaluations:
        raise ValueError("no evaluations to average")
    if (none := _no_verdict("weighted_average", evaluations)) is not None:
        return none
    voters = working(evaluations)
    total = sum(e.confidence for e in voters)
    flags = failed_seat_flags(evaluations)
    if total > 0 and math.isfinite(total):
        score = sum(e.score * e.confidence for e in voters) / total
        how = "confidence-weighted mean"
    else:
        score = sum(e.score for e in voters) / len(voters)
        how = "plain mean (every confidence is 0)"
        flags.append("zero_confidence")
    verdict = verdict_for_score(score, pass_at, review_at, verdicts)
    return FinalJudgment(
        method="weighted_average", verdict=verdict, score=score, reasoning=f"{how} {score:.1f} → {verdict}", flags=flags
    )


def fallback_evaluation(
    juror_id: str, reason: str, *, verdicts: Sequence[str] = DEFAULT_VERDICTS, round_number: int = 0
) -> JurorEvaluation:
    """The neutral stand-in for a juror that failed: middle verdict, 50, confidence 0, flagged."""
    return JurorEvaluation(
        juror_id=juror_id,
        verdict=verdicts[len(verdicts) // 2],
        score=50,
        confidence=0.0,
        reasoning=f"fallback: {reason}",
        fallback=True,
        fallback_reason=reason,
        round_number=round_number,
    )


# -- the discussion's stop rules and the final methods without a model call ------------------------

TerminationReason = Literal[
    "phase1_consensus",
    "no_discussion",
    "no_influence",
    "consensus",
    "stagnation",
    "max_rounds",
    "not_collaborative",
]
EARLY_TERMINATIONS: frozenset[str] = frozenset({"phase1_consensus", "no_influence", "consensus", "stagnation"})


def phase1_stop(
    consensus: ConsensusResult, max_discussion_rounds: int, collaborative: bool = True
) -> TerminationReason | None:
    """Why no discussion follows phase 1 (a simple parallel jury: JURY_USE_COLLABORATIVE=false; its consensus was
    reached; no round is allowed), or None."""
    if not collaborative:
        return "not_collaborative"
    if consensus.consensus_reached:
        return "phase1_consensus"
    if max_discussion_rounds == 0:
        return "no_discussion"
    return None


def idle_discussion(weights: Mapping[str, float | None], phase1: Sequence[JurorEvaluation]) -> bool:
    """Whether no discussion round can move anyone: every seat's fitted weight of the others' verdicts
    (`weights`, juror id → weight; None where a round can move the seat: a generating juror, a map that reads
    the round's own features) is 0, and every seat worked in phase 1 (a failed seat scores again in a round and
    may come back with a vote)."""
    return bool(phase1) and all(weights.get(e.juror_id) == 0 for e in phase1) and not any(e.fallback for e in phase1)


def positions_moved(statements: Sequence[JurorStatement]) -> int:
    """How many jurors changed their verdict in a round's statements."""
    return sum(st.position_changed for st in statements)


def stagnant_rounds(previous: int, moved: int) -> int:
    """Rounds in a row without a moved position, after a round in which `moved` positions moved."""
    return 0 if moved else previous + 1


def round_stop(
    consensus: ConsensusResult,
    stagnant: int,
    round_number: int,
    *,
    max_discussion_rounds: int,
    stagnation_rounds: int,
) -> TerminationReason | None:
    """Why the discussion ends after round `round_number` (1-based), or None when it goes on: the round's
    consensus first, then its being the last round, then stagnation (`stagnant` rounds in a row without a
    moved position reach `stagnation_rounds`)."""
    if consensus.consensus_reached:
        return "consensus"
    if round_number >= max_discussion_rounds:
        return "max_rounds"
    if stagnant >= stagnation_rounds:
        return "stagnation"
    return None


def early_termination(reason: str) -> bool:
    """Whether a discussion that ended for `reason` stopped before its last allowed round."""
    return reason in EARLY_TERMINATIONS


def jury_result(
    phase1: list[JurorEvaluation],
    phase1_consensus: ConsensusResult,
    rounds: list[DiscussionRound],
    judgment: FinalJudgment,
    reason: str,
    *,
    case_id: str,
    jurors: list[JurorSeat],
    usage: tuple[int, int, float],
    wall_s: float,
    identical_seats: bool,
) -> CollaborativeJuryResult:
    """The one way a jury's result is put together, live (`runner`) or re-decided from a recording (`redecide`):
    `usage` is (prompt tokens, completion tokens, cost) of the calls it rests on."""
    prompt, completion, cost = usage
    return CollaborativeJuryResult(
        phase1_evaluations=phase1,
        phase1_consensus=phase1_consensus,
        discussion_rounds=rounds,
        total_rounds=len(rounds),
        phase3_judgment=judgment,
        final_verdict=judgment.verdict,
        final_score=judgment.score,
        early_termination=early_termination(reason),
        termination_reason=reason,
        case_id=case_id,
        jurors=jurors,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost=cost,
        wall_s=wall_s,
        identical_seats=identical_seats,
    )


def decide_final(
    evaluations: Sequence[JurorEvaluation],
    method: FinalMethodName,
    *,
    tie_policy: TiePolicy = "severe",
    pass_at: float = 70,
    review_at: float = 40,
    verdicts: Sequence[str] = DEFAULT_VERDICTS,
) -> FinalJudgment:
    """The final judgment of the methods that need no model call (`majority_vote`, `weighted_average`).
    `final_judge` needs a model: ValueError."""
    if method == "weighted_average":
        return weighted_average(evaluations, pass_at=pass_at, review_at=review_at, verdicts=verdicts)
    if method == "majority_vote":
        return majority_vote(evaluations, tie_policy=tie_policy, verdicts=verdicts)
    raise ValueError(f"{method} needs a model call: not decidable without one")
