"""The jury run: phase 1 in parallel, parallel discussion rounds until a stop rule ends them, the final
judgment — every step an event (`JuryView` folds them). A model failure becomes a flagged fallback juror,
never a raise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from engine import runctx
from engine.events import async_run_context
from engine.jury.config import JuryCase, JuryConfig, Rubric
from engine.jury.decisions import (
    NO_VERDICT,
    CollaborativeJuryResult,
    ConsensusResult,
    DiscussionRound,
    FinalJudgment,
    JurorEvaluation,
    JurorSeat,
    JurorStatement,
    decide_final,
    failed_seat_flags,
    fallback_evaluation,
    idle_discussion,
    jury_result,
    majority_vote,
    panel_consensus,
    phase1_stop,
    positions_moved,
    round_stop,
    stagnant_rounds,
)
from engine.jury.likelihood_seats import LikelihoodSeats
from engine.jury.prompts import evaluation_messages, final_messages, output_schemas, statement_messages
from engine.jury.stacked import StackedPanel, _event_consensus, _event_evaluation, send_statement
from models.errors import ModelError
from models.recording import call_context
from models.source import ModelLookup, model_source

if TYPE_CHECKING:
    from engine.events import Emit, EventSink
    from engine.store import Store

PARALLEL_JURY_TEXT = (
    "Independent votes, no discussion (the collaborative jury is off): each juror judged once, and the final "
    "judgment reads their verdicts."
)
IDLE_DISCUSSION_TEXT = (
    "No discussion round was run: every juror's fitted map gives the others' verdicts weight 0, so a round "
    "cannot move anyone. Straight to the final judgment."
)


@dataclass
class _CaseRun:
    """One case's run through a jury: what its phases share."""

    case: JuryCase
    rubric: Rubric
    emit: Emit | None
    order: list[str]
    identical: bool
    evaluation_schema: type[BaseModel]
    statement_schema: type[BaseModel]
    final_schema: type[BaseModel]
    t0: float = field(default_factory=time.perf_counter)
    latest: dict[str, JurorEvaluation] = field(default_factory=dict)  # each juror's standing evaluation

    @classmethod
    def start(cls, jury: Jury, case: JuryCase, emit: Emit | None) -> _CaseRun:
        rubric = case.rubric or Rubric()
        schemas = output_schemas(tuple(rubric.verdicts), tuple(rubric.axes))
        order = [s.juror_id for s in jury.seats]
        return cls(case, rubric, emit, order, jury.identical_seats(rubric), *schemas)

    def send(self, type_: str, **payload: object) -> None:
        if self.emit is not None:
            self.emit(type_, submissionId=self.case.id, **payload)


class Jury(StackedPanel, LikelihoodSeats):  # the stacked half first: its stack_map is the real one
    """A panel of jurors (seat + model each) that judges cases. `models` looks model ids up (a ModelHub's
    `get`, or a mapping of id → ChatModel); the final judge's model is looked up the same way when needed."""

    def __init__(self, seats: Sequence[JurorSeat], models: ModelLookup, config: JuryConfig | None = None) -> None:
        if not seats:
            raise ValueError("a jury needs at least one juror")
        super().__init__()
        self.seats = list(seats)
        self.model = model_source(models)
        self.config = config or JuryConfig()
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}

    async def _gather(self, coros: Sequence[Any]) -> list[Any]:
        if self.config.parallel:
            return list(await asyncio.gather(*coros))
        done: list[Any] = []
        try:
            for c in coros:
                done.append(await c)
        finally:  # a raise (a cancelled run) leaves the later seats' coroutines unstarted: close them
            for c in coros[len(done) + 1 :]:
                c.close()
        return done

    async def _ask(
        self, seat: JurorSeat, messages: list[dict[str, str]], schema: type[BaseModel], t0: float, stage: str
    ) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
        """(parsed answer, failure reason, call facts). Any model failure becomes a reason, never a raise."""

        started = time.perf_counter() - t0
        facts: dict[str, Any] = {"started_s": round(started, 4)}
        try:
            with call_context(purpose=f"jury.{stage}:{seat.juror_id}"):
                completion = await self.model(seat.model_id).complete(
                    messages, schema=schema, temperature=self.config.temperature, max_tokens=self.config.max_tokens
                )
        except ModelError as exc:
            # A failed field (invalid:<path>, truncated) travels with the fallback, so its card says which.
            facts.update(ended_s=round(time.perf_counter() - t0, 4), flags=list(getattr(exc, "flags", [])))
            return None, f"{type(exc).__name__}: {exc.message}", facts
        except KeyError as exc:  # the model is not in the catalog
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"unknown model: {exc.args[0]}", facts
        facts.update(ended_s=round(time.perf_counter() - t0, 4), call_id=completion.call_id, flags=completion.flags)
        self.usage["prompt_tokens"] += completion.usage.prompt_tokens
        self.usage["completion_tokens"] += completion.usage.completion_tokens
        self.usage["cost"] += completion.cost
        return completion.parsed, None, facts

    def _evaluation(
        self,
        seat: JurorSeat,
        parsed: dict[str, Any] | None,
        reason: str | None,
        facts: dict[str, Any],
        rubric: Rubric,
        round_number: int,
        reasoning_key: str,
    ) -> JurorEvaluation:
        if parsed is None:
            e = fallback_evaluation(
                seat.juror_id, reason or "no answer", verdicts=rubric.verdicts, round_number=round_number
            )
        else:
            e = JurorEvaluation(
                juror_id=seat.juror_id,
                verdict=parsed["verdict"],
                score=float(parsed["score"]),
                axes={k: float(v) for k, v in parsed["axes"].items()},
                reasoning=str(parsed.get(reasoning_key, "")).strip(),
                confidence=float(parsed["confidence"]),
                round_number=round_number,
                detail=str(facts.get("detail", "")),
            )
        return e.model_copy(
            update={
                "role_name": seat.role_name,
                "role_focus": seat.role_focus,
                "model_id": seat.model_id,
                "started_s": facts.get("started_s"),
                "ended_s": facts.get("ended_s"),
                "call_id": facts.get("call_id"),
                "flags": list(facts.get("flags", [])),
                "distribution": dict(facts.get("distribution", {})) if parsed is not None else {},
            }
        )

    async def run(self, case: JuryCase, emit: Emit | None = None) -> CollaborativeJuryResult:
        """Phase 1 (independent, in parallel), the discussion rounds until a stop rule ends them, then the
        final judgment: each step sent as an event through `emit` as it happens."""
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}
        one = _CaseRun.start(self, case, emit)
        one.send(
            "jury_started",
            case={"id": case.id, "title": case.title, "content": case.content, "gold": case.gold},
            rubric=one.rubric.model_dump(),
            config=self.config.model_dump(),
            jurors=[s.model_dump() for s in self.seats],
            identicalSeats=one.identical,
        )
        phase1, phase1_consensus = await self._phase1(one)
        rounds, reason = await self._discussion(one, phase1, phase1_consensus)
        final_evals = [one.latest[j] for j in one.order]
        judgment = await self._final(case, one.rubric, one.final_schema, phase1, rounds, final_evals, one.t0)
        one.send("final_judgment", **judgment.model_dump())
        usage = (self.usage["prompt_tokens"], self.usage["completion_tokens"], self.usage["cost"])
        result = jury_result(
            phase1,
            phase1_consensus,
            rounds,
            judgment,
            reason,
            case_id=case.id,
            jurors=self.seats,
            usage=usage,
            wall_s=round(time.perf_counter() - one.t0, 4),
            identical_seats=one.identical,
        )
        one.send(
            "jury_finished",
            verdict=result.final_verdict,
            score=result.final_score,
            totalRounds=result.total_rounds,
            earlyTermination=result.early_termination,
            terminationReason=reason,
            promptTokens=result.prompt_tokens,
            completionTokens=result.completion_tokens,
            cost=result.cost,
            wallS=result.wall_s,
        )
        return result

    async def _phase1(self, one: _CaseRun) -> tuple[list[JurorEvaluation], ConsensusResult]:
        """Independent evaluations, in parallel; each card is sent as soon as its juror answers."""
        one.send("phase_started", phase=1, speakerOrder=one.order)

        async def evaluate(seat: JurorSeat) -> JurorEvaluation:
            if seat.judge == "neighbours":
                parsed, reason, facts = await self._neighbours_score(seat, one.case, one.rubric, one.t0, "phase1")
            elif self.by_likelihood(seat):
                parsed, reason, facts = await self._score(seat, one.case, one.rubric, [], one.t0, "phase1")
            else:
                messages = evaluation_messages(seat, one.case, one.rubric, len(self.seats))
                parsed, reason, facts = await self._ask(seat, messages, one.evaluation_schema, one.t0, "phase1")
            e = self._evaluation(seat, parsed, reason, facts, one.rubric, 0, "reasoning")
            one.send("juror_evaluation", phase=1, round=0, **_event_evaluation(e))
            return e

        phase1 = await self._gather([evaluate(s) for s in self.seats])
        consensus = panel_consensus(phase1, self.config.consensus_threshold)
        one.send("consensus_check", phase=1, round=0, **_event_consensus(consensus))
        one.latest.update({e.juror_id: e for e in phase1})
        return phase1, consensus

    async def _discussion(
        self, one: _CaseRun, phase1: list[JurorEvaluation], phase1_consensus: ConsensusResult
    ) -> tuple[list[DiscussionRound], str]:
        """Parallel rounds until a stop rule ends them (none when phase 1 already decides, or when no seat's
        map lets the others' verdicts move it): the rounds, and why the discussion ended."""
        cfg = self.config
        rounds: list[DiscussionRound] = []
        stop = phase1_stop(phase1_consensus, cfg.max_discussion_rounds, cfg.use_collaborative)
        if stop == "not_collaborative":
            one.send("discussion_skipped", reason=stop, text=PARALLEL_JURY_TEXT)
            one.send("discussion_ended", reason=stop, totalRounds=0)
            return rounds, stop
        stack = self.stack_map(one.rubric)
        if stop is None and stack is not None:
            return await self._learned_discussion(one, phase1, stack)
        if stop is None and cfg.skip_idle_rounds:
            weights = {s.juror_id: self.others_weight(s, one.rubric) for s in self.seats}
            if idle_discussion(weights, phase1):
                stop = "no_influence"
                one.send("discussion_skipped", reason=stop, weights=weights, text=IDLE_DISCUSSION_TEXT)
                one.send("discussion_ended", reason=stop, totalRounds=0)
        if stop is None:
            still = 0
            for round_number in range(1, cfg.max_discussion_rounds + 1):
                one.send("round_started", round=round_number, speakerOrder=one.order)
                earlier = list(rounds)
                statements = await self._gather(
                    [self._speak(one, i, s, round_number, phase1, earlier) for i, s in enumerate(self.seats)]
                )
                for st in statements:
                    assert st.updated_evaluation is not None
                    one.latest[st.juror_id] = st.updated_evaluation
                consensus = panel_consensus([one.latest[j] for j in one.order], cfg.consensus_threshold)
                rounds.append(
                    DiscussionRound(
                        round_number=round_number,
                        statements=statements,
                        consensus_check=consensus,
                        speaker_order=one.order,
                    )
                )
                moved = positions_moved(statements)
                still = stagnant_rounds(still, moved)
                one.send("round_completed", round=round_number, moved=moved, **_event_consensus(consensus))
                stop = round_stop(
                    consensus,
                    still,
                    round_number,
                    max_discussion_rounds=cfg.max_discussion_rounds,
                    stagnation_rounds=cfg.stagnation_rounds,
                )
                if stop is not None:
                    break
            one.send("discussion_ended", reason=stop or "max_rounds", totalRounds=len(rounds))
        return rounds, stop or "max_rounds"  # the last round always gives a reason; `or` tells the type checker

    def models_needed(self, rubric: Rubric | None = None) -> set[str]:
        """The catalog models this jury calls: its seats' (a neighbours seat reads with an embedder, not a catalog
        model) and the final judge's where one is asked (final_judge, or auto without a fitted stack)."""
        needed = {s.model_id for s in self.seats if s.judge != "neighbours"}
        method = self.config.final_judgment_method
        rubric = rubric or Rubric()
        if method == "final_judge" or (
            method == "auto" and self.stack_map(rubric) is None and not self.stack_trouble(rubric)
        ):
            needed.add(self.config.final_judge_model)
        return needed

    async def _speak(
        self,
        one: _CaseRun,
        index: int,
        seat: JurorSeat,
        round_number: int,
        phase1: list[JurorEvaluation],
        earlier: list[DiscussionRound],
    ) -> JurorStatement:
        """One juror's statement in a round, having heard the others' standing verdicts."""
        current = one.latest[seat.juror_id]
        stage = f"round{round_number}"
        if seat.judge == "neighbours":  # it reads the case only: hearing the others cannot move it
            parsed, why, facts = await self._neighbours_score(seat, one.case, one.rubric, one.t0, stage)
        elif self.by_likelihood(seat):
            others = [
                (o.role_name or o.juror_id, o.verdict)
                for o in one.latest.values()
                if o.juror_id != seat.juror_id and not o.fallback
            ]
            parsed, why, facts = await self._score(seat, one.case, one.rubric, others, one.t0, stage)
        else:
            n = len(self.seats)
            messages = statement_messages(seat, one.case, one.rubric, n, round_number, phase1, earlier, current)
            parsed, why, facts = await self._ask(seat, messages, one.statement_schema, one.t0, stage)
        updated = self._evaluation(seat, parsed, why, facts, one.rubric, round_number, "statement")
        text = updated.reasoning if parsed is not None else f"(no statement: {why})"
        if parsed is None and not current.fallback:
            # A failed statement is no change of mind: the juror keeps its standing position
            # (flagged), rather than turning into a fallback that would lose its vote.
            updated = current.model_copy(
                update={
                    "round_number": round_number,
                    "started_s": updated.started_s,
                    "ended_s": updated.ended_s,
                    "call_id": None,
                    "flags": [*current.flags, *updated.flags, "statement_failed"],
                }
            )
        statement = JurorStatement(
            juror_id=seat.juror_id,
            round_number=round_number,
            statement_order=index,
            statement=text,
            position=updated.verdict,
            reasoning=updated.reasoning,
            # Neither a failure nor a recovery from one (fallback → a real verdict) is a move.
            position_changed=parsed is not None and not current.fallback and updated.verdict != current.verdict,
            updated_evaluation=updated,
            detail=updated.detail if parsed is not None else "",
        )
        send_statement(one, statement, current)
        return statement

    async def _final(
        self,
        case: JuryCase,
        rubric: Rubric,
        schema: type[BaseModel],
        phase1: list[JurorEvaluation],
        rounds: list[DiscussionRound],
        latest: list[JurorEvaluation],
        t0: float,
    ) -> FinalJudgment:
        cfg = self.config
        if cfg.final_judgment_method in ("auto", "stack"):
            stack = self.stack_map(rubric)
            if stack is not None:
                return self._stack_final(phase1, latest, rubric, stack)
            trouble = self.stack_trouble(rubric)
            if trouble:  # fitted for these seats but unusable: said and flagged, never a silent other judge
                return self.vote_instead(latest, rubric, f"the stack cannot be used: {trouble}")
            if cfg.final_judgment_method == "stack":
                return self.vote_instead(latest, rubric, "no stack is fitted for these seats")
        if cfg.final_judgment_method not in ("final_judge", "auto"):
            return decide_final(
                latest,
                cfg.final_judgment_method,
                tie_policy=cfg.tie_policy,
                pass_at=rubric.pass_at,
                review_at=rubric.review_at,
                verdicts=rubric.verdicts,
            )
        vote = majority_vote(latest, tie_policy=cfg.tie_policy, verdicts=rubric.verdicts)
        if vote.verdict == NO_VERDICT:  # no quorum: a judge's verdict would rest on a failed panel
            return vote.model_copy(update={"method": "final_judge"})
        judge = JurorSeat(juror_id="final-judge", model_id=cfg.final_judge_model, role_name="Final judge")
        if self.by_likelihood(judge):  # the judge scores the labels having heard every working juror's verdict
            parsed, why, facts = await self._score(
                judge,
                case,
                rubric,
                [(e.role_name or e.juror_id, e.verdict) for e in latest if not e.fallback],
                t0,
                "final",
            )
        else:
            parsed, why, facts = await self._ask(
                judge,
                final_messages(case, rubric, {"phase1": phase1, "rounds": rounds, "latest": latest}),
                schema,
                t0,
                "final",
            )
        if parsed is None:
            # The documented fallback: the majority vote decides, and the judgment says why.
            return vote.model_copy(
                update={
                    "flags": [*vote.flags, f"final_judge_failed: {why}"],
                    "reasoning": f"final judge failed ({why}); {vote.reasoning}",
                }
            )
        return FinalJudgment(
            method="final_judge",
            verdict=parsed["verdict"],
            score=float(parsed["score"]),
            reasoning=str(parsed.get("reasoning", "")).strip(),
            flags=failed_seat_flags(latest) + [f"final_judge:{f}" for f in facts.get("flags", [])],
            detail=str(facts.get("detail", "")),
        )


async def run_case(
    store: Store,
    jury: Jury,
    case: JuryCase,
    *,
    sinks: list[EventSink] | None = None,
    name: str = "",
    kind: str = "jury.run",
) -> tuple[str, CollaborativeJuryResult]:
    """Run one case as a stored run: every event and model call is attributed to it; the result is its
    summary. Returns (run id, result)."""

    config = {
        "case": case.model_dump(),
        "jurors": [s.model_dump() for s in jury.seats],
        "jury": jury.config.model_dump(),
    }
    async with async_run_context(store, kind, config, name=name or f"jury {case.id}", sinks=sinks) as run:
        result = await jury.run(case, emit=progress_emit(run.emit, jury))
        run.summary = {
            "verdict": result.final_verdict,
            "score": result.final_score,
            "total_rounds": result.total_rounds,
            "termination_reason": result.termination_reason,
            "result": result.model_dump(mode="json"),
        }
    return run.run_id, result


def progress_emit(emit: Emit, jury: Jury) -> Emit:
    """`emit`, reporting progress on the way (``engine.runctx``): one unit per juror answer and one for the final
    judgment. The total counts only steps that will run: phase 1 and the final judgment at first, and a round's
    answers once that round starts (most cases never discuss: phase 1 decides, or no seat's map lets the others
    move it), so the bar never waits on rounds that do not come."""

    n = len(jury.seats)
    rounds = jury.config.max_discussion_rounds if jury.config.use_collaborative else 0
    runctx.progress(total=n + 1, step="phase 1 — independent evaluations", unit="steps")
    started: set[object] = set()

    def emitting(type_: str, **payload: object) -> object:
        out = emit(type_, **payload)
        control = runctx.current()
        if type_ == "juror_evaluation":
            runctx.progress(advance=1, step="phase 1 — independent evaluations")
        elif type_ == "juror_statement":
            number = payload.get("round")
            if number not in started and control is not None:  # a round that runs: its answers join the total
                started.add(number)
                runctx.progress(total=(control.progress.total or 0) + n)
            runctx.progress(advance=1, step=f"discussion round {number} (at most {rounds})")
        elif type_ == "discussion_ended" and control is not None:
            runctx.progress(total=control.progress.done + 1, step="final judgment")
        elif type_ == "final_judgment":
            runctx.progress(advance=1, step="final judgment")
        return out

    return emitting


def comparable(value: object) -> object:
    """A result (as JSON) without its wall-clock facts — timings, call ids, wall time — so a replay can be
    compared with the live run it came from."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in ("started_s", "ended_s", "call_id", "wall_s")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value
