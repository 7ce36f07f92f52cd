"""A stacked panel's half of a `Jury` (engine.jury.runner): the stack map that decides, the learned rounds in which a
seat hears the others as distributions (no model call), and the stacked final judgment with its selective cut and
minority veto. The numbers are engine.jury.stack's; this is what a run does with them, event by event."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine import judgemaps
from engine.diagnostics import share
from engine.jury.config import JuryConfig, Rubric
from engine.jury.decisions import (
    ConsensusResult,
    DiscussionRound,
    FinalJudgment,
    JurorEvaluation,
    JurorSeat,
    JurorStatement,
    failed_seat_flags,
    majority_vote,
    panel_consensus,
    positions_moved,
)
from engine.jury.likelihood import VERDICT_READS
from engine.jury.stack import (
    JURY_STACK,
    round_update,
    round_weight,
    selective_cut,
    stack_features,
    stack_id,
    stack_problem,
    stack_seats,
    would_move,
)
from engine.likelihood import label_scores

if TYPE_CHECKING:
    from engine.jury.runner import _CaseRun

UNMOVABLE_TEXT = (
    "No discussion round was run: no seat is unsure enough that hearing the others would change its verdict "
    "(each seat's own reading outweighs the others' at the fitted round weight). Straight to the final judgment."
)


def _event_evaluation(e: JurorEvaluation) -> dict[str, Any]:
    return {
        "juror": e.juror_id,
        "roleName": e.role_name,
        "modelId": e.model_id,
        "verdict": e.verdict,
        "score": e.score,
        "axes": e.axes,
        "reasoning": e.reasoning,
        "confidence": e.confidence,
        "fallback": e.fallback,
        "fallbackReason": e.fallback_reason,
        "startedS": e.started_s,
        "endedS": e.ended_s,
        "callId": e.call_id,
        "flags": e.flags,
        "detail": e.detail,
        "distribution": e.distribution,
    }


def send_statement(one: _CaseRun, statement: JurorStatement, before: JurorEvaluation) -> None:
    """A round's `juror_statement` event: what the juror said, whether it moved, and its updated evaluation."""
    updated = statement.updated_evaluation
    assert updated is not None
    one.send(
        "juror_statement",
        round=statement.round_number,
        juror=statement.juror_id,
        statementOrder=statement.statement_order,
        statement=statement.statement,
        detail=statement.detail,
        positionChanged=statement.position_changed,
        previousVerdict=before.verdict,
        newVerdict=updated.verdict,
        newScore=updated.score,
        previousScore=before.score,
        evaluation=_event_evaluation(updated),
    )


def _event_consensus(c: ConsensusResult) -> dict[str, Any]:
    return {
        "consensusStatus": c.status.value,
        "agreementLevel": round(c.agreement_level, 4),
        "consensusReached": c.consensus_reached,
        "majorityPosition": c.majority_position,
        "counts": c.counts,
        "failedSeats": c.failed,
    }


class StackedPanel:
    """The stacked half of a `Jury`: its seats and config are the jury's."""

    seats: list[JurorSeat]
    config: JuryConfig

    if TYPE_CHECKING:  # LikelihoodSeats' (engine.jury.likelihood_seats), the other half of the Jury

        def by_distribution(self, seat: JurorSeat) -> bool: ...

    def stack_map(self, rubric: Rubric) -> Any:
        """The fitted stack map of this panel (engine.jury.stack), or None: every seat judges by a distribution
        (likelihood or neighbours), and a usable stack fitted for exactly these seats' models, in this order, with
        the rubric's labels exists (`data/calibration/jury.stack.<models joined by +>.json`)."""
        return self._stack(rubric)[0]

    def stack_trouble(self, rubric: Rubric) -> str:
        """Why this panel's stack cannot be used though one is fitted for its seats ('' when it can, or when none
        is fitted for them): a damaged map, one that reads other seats or other labels."""
        return self._stack(rubric)[1]

    def _stack(self, rubric: Rubric) -> tuple[Any, str]:
        if not self.seats or not all(self.by_distribution(s) for s in self.seats):
            return None, ""
        keys = [s.model_id for s in self.seats]
        if len(set(keys)) != len(keys):
            return None, ""
        try:
            cal = judgemaps.load_calibration(JURY_STACK, stack_id(keys), check=stack_problem)
        except ValueError as exc:
            return None, str(exc)
        if cal is None:
            return None, ""
        if not all(v in cal.maps for v in rubric.verdicts):
            return None, f"the stack map {cal.version} has no map for the labels {', '.join(rubric.verdicts)}"
        if stack_seats(cal, rubric.verdicts) != keys:
            read = ", ".join(stack_seats(cal, rubric.verdicts))[:120]
            return None, f"the stack map {cal.version} reads the seats {read}, not this panel's"
        return cal, ""

    async def _learned_discussion(
        self, one: _CaseRun, phase1: list[JurorEvaluation], stack: Any
    ) -> tuple[list[DiscussionRound], str]:
        """The rounds of a stacked panel (engine.jury.stack): each working seat hears the others' current readings
        as distributions, weighted by the fitted round weight; a seat moves when it is unsure and the others are
        sure. No model call: the update is what the split taught. No round is run when none can move anyone."""
        cfg = self.config
        verdicts = one.rubric.verdicts
        w = round_weight(stack)
        seats = {s.juror_id: s for s in self.seats}
        start = {e.juror_id: [e.distribution.get(v, 0.0) for v in verdicts] for e in phase1 if not e.fallback}
        movers = would_move(start, w) if len(start) >= 2 else []
        if not movers and cfg.skip_idle_rounds:
            one.send("discussion_skipped", reason="no_influence", weights=dict.fromkeys(seats, w), text=UNMOVABLE_TEXT)
            one.send("discussion_ended", reason="no_influence", totalRounds=0)
            return [], "no_influence"
        # The rounds are computed first (no model call), and only those up to the last one that moves someone are
        # run: a round that cannot move anyone is never spent.
        planned: list[dict[str, list[float]]] = []
        current = dict(start)
        for _ in range(cfg.max_discussion_rounds):
            current = {j: round_update(start[j], [current[k] for k in current if k != j], w) for j in current}
            planned.append(current)
        positions = [start, *planned]
        moving = [r for r in range(1, len(positions)) if _verdicts(positions[r]) != _verdicts(positions[r - 1])]
        last = moving[-1] if moving else 0
        rounds: list[DiscussionRound] = []
        stop: str | None = None
        current = dict(start)
        for round_number in range(1, last + 1):
            one.send("round_started", round=round_number, speakerOrder=one.order)
            nxt = planned[round_number - 1]
            statements = [
                self._learned_statement(one, index, seats[jid], one.latest[jid], nxt[jid], current, w, round_number)
                for index, jid in enumerate(one.order)
                if jid in nxt  # a failed seat has no reading to update: it keeps its fallback
            ]
            for st in statements:
                assert st.updated_evaluation is not None
                one.latest[st.juror_id] = st.updated_evaluation
            current = nxt
            consensus = panel_consensus([one.latest[j] for j in one.order], cfg.consensus_threshold)
            rounds.append(
                DiscussionRound(
                    round_number=round_number, statements=statements, consensus_check=consensus, speaker_order=one.order
                )
            )
            moved = positions_moved(statements)
            one.send("round_completed", round=round_number, moved=moved, **_event_consensus(consensus))
            if consensus.consensus_reached:
                stop = "consensus"
                break
        if stop is None:
            # Nobody would move in a further round (or the limit is reached): the seed's stagnation stop, reached
            # without spending the rounds that would show it.
            stop = "max_rounds" if last == cfg.max_discussion_rounds else "stagnation"
        one.send("discussion_ended", reason=stop or "max_rounds", totalRounds=len(rounds))
        return rounds, stop or "max_rounds"

    def _learned_statement(
        self,
        one: _CaseRun,
        index: int,
        seat: JurorSeat,
        before: JurorEvaluation,
        after: list[float],
        heard: dict[str, list[float]],
        w: float,
        round_number: int,
    ) -> JurorStatement:
        """A seat's statement in a learned round: its new position and, in words, why it moved or stayed."""
        verdicts = one.rubric.verdicts
        best = max(range(len(after)), key=lambda i: after[i])
        new, old = verdicts[best], before.verdict
        others = [one.latest[j] for j in heard if j != seat.juror_id]
        text = _move_text(new, old, before.distribution.get(old, before.confidence), after[best], others)
        probs = after
        score = round(sum(p * v for p, v in zip(probs, _label_scores(len(probs)), strict=True)), 1)
        updated = before.model_copy(
            update={
                "verdict": new,
                "score": score,
                "axes": dict.fromkeys(one.rubric.axes, score),
                "confidence": round(after[best], 4),
                "reasoning": text,
                "round_number": round_number,
                "call_id": None,
                "started_s": round(time.perf_counter() - one.t0, 4),
                "ended_s": round(time.perf_counter() - one.t0, 4),
                "distribution": dict(zip(verdicts, (round(float(p), 6) for p in probs), strict=True)),
                "detail": f"learned round: own phase-1 reading + {w:g} × mean of the others' log-probabilities; "
                + " · ".join(f"{v} {p:.2f}" for v, p in zip(verdicts, probs, strict=True)),
            }
        )
        statement = JurorStatement(
            juror_id=seat.juror_id,
            round_number=round_number,
            statement_order=index,
            statement=text,
            position=new,
            reasoning=text,
            position_changed=new != old,
            updated_evaluation=updated,
            detail=updated.detail,
        )
        send_statement(one, statement, before)
        return statement

    def vote_instead(self, latest: list[JurorEvaluation], rubric: Rubric, why: str) -> FinalJudgment:
        """The documented fallback of a stacked final judgment that cannot be made: the majority vote, flagged
        `stack_unavailable`, its reasoning saying why first."""
        vote = majority_vote(latest, tie_policy=self.config.tie_policy, verdicts=rubric.verdicts)
        return vote.model_copy(
            update={"flags": [*vote.flags, "stack_unavailable"], "reasoning": f"{why}; {vote.reasoning}"}
        )

    def _veto(self, phase1: list[JurorEvaluation], verdicts: list[str], p: float) -> tuple[str, str, str] | None:
        """The minority veto of a stacked safe_pass: (verdict, flag, reasoning), or None when no seat vetoes. On the
        phase-1 readings, as it was measured (minority_veto_cross_validated): a round's position is partly the
        others' echo, and a veto is one seat's own evidence."""
        vetoes = [
            e for e in phase1 if not e.fallback and e.verdict == verdicts[-1] and e.confidence >= self.config.veto_at
        ]
        if not vetoes:
            return None
        v = vetoes[0]
        verdict = verdicts[(len(verdicts) - 1) // 2]
        return (
            verdict,
            f"minority_veto:{v.juror_id}",
            f"{_said(verdict)}: minority veto — {v.role_name or v.juror_id} reads it as {_said(v.verdict)} "
            f"({v.confidence:.0%} sure), so the panel's {_said(verdicts[0])} ({p:.0%}) is not published without a "
            "human look.",
        )

    def _stack_final(
        self, phase1: list[JurorEvaluation], latest: list[JurorEvaluation], rubric: Rubric, stack: Any
    ) -> FinalJudgment:
        """The stacked final judgment over the seats' phase-1 readings (the independent evidence: the rounds'
        positions are each other's echoes, and the stack was fitted on independent readings), then the minority
        veto (optional) and the selective cut."""
        verdicts = rubric.verdicts
        failed = [e.juror_id for e in phase1 if e.fallback]
        if failed:
            # A failed seat leaves the stack without one of its inputs: the documented fallback is the vote.
            return self.vote_instead(
                latest, rubric, f"the stack needs every seat's reading and {', '.join(failed)} failed"
            )
        keys = stack_seats(stack, verdicts)
        by_model = {str(e.model_id): [e.distribution.get(v, 0.0) for v in verdicts] for e in phase1}
        try:
            probs = stack.distribution(verdicts, stack_features(keys, by_model, verdicts))
        except (ValueError, KeyError) as exc:
            return self.vote_instead(latest, rubric, f"the stack map {stack.version} cannot be applied ({exc})")
        best = max(range(len(probs)), key=lambda i: probs[i])
        verdict = verdicts[best]
        flags = ["stack", f"calibration:{stack.version}", f"stacked:{verdict}", *judgemaps.map_flags(stack)]
        weights = _seat_weights(stack, keys, verdicts)
        reasoning = (
            f"Reads as {_said(verdict)} ({probs[best]:.0%} sure), weighing the seats as the labelled cases taught: "
            + ", ".join(f"{_seat_name(phase1, k)} {by_model[k][verdicts.index(verdict)]:.0%}" for k in keys)
            + f" for {_said(verdict)}."
        )
        if self.config.minority_veto and verdict == verdicts[0] and len(verdicts) >= 3:
            veto = self._veto(phase1, verdicts, probs[best])
            if veto is not None:
                verdict, flag, reasoning = veto
                flags.append(flag)
        rate = self.config.selective_error or None  # None or 0: always decide
        cut = selective_cut(stack, rate) if rate is not None else None
        if cut is not None and probs[best] < cut and len(verdicts) >= 3:
            # Not decided, whatever the reading: a doubtful reading at low confidence is no decision either.
            flags.append("selective:not_sure")
            need = (
                f"below the {cut:.0%} it needs to decide with at most {rate:.0%} errors among the cases it decides"
                if math.isfinite(cut)
                else f"and on the labelled cases no cut kept the errors among decided cases at or under {rate:.0%}, "
                "so at this rate the panel decides nothing"
            )
            reasoning = (
                f"not sure: the panel's best reading is {_said(verdicts[best])} at {probs[best]:.0%}, {need}; a human "
                "should look."
            )
            verdict = verdicts[(len(verdicts) - 1) // 2]
        score = round(sum(p * v for p, v in zip(probs, _label_scores(len(probs)), strict=True)), 1)
        return FinalJudgment(
            method="stack",
            verdict=verdict,
            score=score,
            reasoning=reasoning,
            flags=flags + failed_seat_flags(latest),
            detail="stack: "
            + " · ".join(f"{v} {p:.2f}" for v, p in zip(verdicts, probs, strict=True))
            + "; seat weights (how far its readings move the stack; its own held-out accuracy) "
            + ", ".join(f"{k} {w:.2f}{_alone(stack, k)}" for k, w in weights.items())
            + (f"; selective cut {cut:.2f} for ≤{rate:.0%} error" if cut is not None and math.isfinite(cut) else "")
            + (f"; selective: no cut reaches ≤{rate:.0%} error" if cut is not None and not math.isfinite(cut) else "")
            + f"; map {stack.version}",
        )


def _alone(stack: Any, key: str) -> str:
    """A seat's own cross-validated accuracy as the stack map stores it (' (0.51)'), '' when it holds none."""
    figures = stack.metrics.get("seats_cross_validated")
    value = share(figures.get(key)) if isinstance(figures, dict) else None
    return f" ({value:.2f})" if value is not None else ""


def _said(verdict: str) -> str:
    """A verdict as a card says it: the default labels in words (safe, doubtful, unsafe), another rubric's label as
    it is."""
    return VERDICT_READS.get(verdict, verdict.replace("_", " "))


def _verdicts(positions: dict[str, list[float]]) -> dict[str, int]:
    return {k: max(range(len(p)), key=lambda i: p[i]) for k, p in positions.items()}


def _label_scores(n: int) -> list[float]:
    return list(label_scores(n))


def _reason_clause(text: str, limit: int = 200) -> str:
    """The part of a seat's sentence after its lead ("Reads as unsafe (62% sure): …"), shortened at a word, with a
    quotation it cut into closed."""
    _, _, rest = text.partition(": ")
    rest = (rest or text).strip().rstrip(".")
    if len(rest) <= limit:
        return rest
    cut = rest[:limit].rsplit(" ", 1)[0].rstrip(" ,;")
    if cut.count("“") > cut.count("”"):
        cut += "”"
    return cut + " …"


def _seat_name(evaluations: Sequence[JurorEvaluation], model_id: str) -> str:
    for e in evaluations:
        if e.model_id == model_id:
            return e.role_name or e.juror_id
    return model_id


def _seat_weights(stack: Any, keys: Sequence[str], verdicts: Sequence[str]) -> dict[str, float]:
    """How much each seat moves the stack: the spread of its coefficients across the verdicts' maps."""
    out = {}
    for k in keys:
        total = 0.0
        for v in verdicts:
            m = stack.maps[v]
            total += sum(abs(c) for f, c in zip(m.features, m.coef, strict=True) if f.rsplit(":", 1)[0] == k)
        out[k] = round(total / len(verdicts), 2)
    return out


def _move_text(new: str, old: str, own: float, now: float, others: Sequence[JurorEvaluation]) -> str:
    """Why a seat moved or stayed, in words: the surest seat that reads it the new way and how sure this one was, or
    who agrees and whose readings were not sure enough to move it."""
    said_new, said_old = _said(new), _said(old)
    backers = sorted((o for o in others if o.verdict == new), key=lambda o: -o.confidence)
    if new != old and backers:
        lead = backers[0]
        why = _reason_clause(lead.reasoning)
        return (
            f"Moved to {said_new}: {lead.role_name or lead.juror_id} reads it as {said_new} ({lead.confidence:.0%} sure"
            + (f": {why}" if why else "")
            + f") and I was only {own:.0%} sure it was {said_old}; now {now:.0%} {said_new}."
        )
    if new != old:
        return (
            f"Moved to {said_new}: the others' readings together outweigh my {own:.0%} for {said_old}; now "
            f"{now:.0%} {said_new}."
        )
    if all(o.verdict == old for o in others):
        return f"Stays {said_old} ({now:.0%} sure): the others read it the same way."
    agree = [o.role_name or o.juror_id for o in others if o.verdict == old]
    apart = [
        f"{o.role_name or o.juror_id}'s {_said(o.verdict)} ({o.confidence:.0%})" for o in others if o.verdict != old
    ]
    return (
        f"Stays {said_old} ({now:.0%} sure): "
        + (f"{' and '.join(agree)} {'agrees' if len(agree) == 1 else 'agree'}; " if agree else "")
        + f"{' and '.join(apart)} {'is' if len(apart) == 1 else 'are'} not sure enough to move me."
    )
