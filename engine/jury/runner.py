"""The jury run: phase 1 in parallel, parallel discussion rounds until a stop rule ends them, the final
judgment — every step an event (`JuryView` folds them). A model failure becomes a flagged fallback juror,
never a raise."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from engine import judgemaps, runctx
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
    early_termination,
    failed_seat_flags,
    fallback_evaluation,
    idle_discussion,
    majority_vote,
    panel_consensus,
    phase1_stop,
    positions_moved,
    round_stop,
    stagnant_rounds,
)
from engine.jury.prompts import evaluation_messages, final_messages, output_schemas, statement_messages
from engine.jury.roles import (
    JURY_PANEL,
    JURY_ROLE,
    JURY_ROLES,
    PANEL_FEATURES,
    cue_features,
    panel_rationale,
    role_rationale,
    role_slug,
)
from engine.likelihood import (
    JURY,
    JURY_HEADINGS,
    JURY_OTHERS_FEATURES,
    jury_features,
    jury_others_weight,
    jury_rationale,
    jury_round_features,
    jury_scores,
    label_scores,
)
from models.errors import ModelError
from models.recording import call_context
from models.source import ModelLookup, ModelSource, model_source

if TYPE_CHECKING:
    from engine.events import Emit, EventSink
    from engine.store import Store
    from models.catalog import ModelSpec

IDLE_DISCUSSION_TEXT = (
    "No discussion round was run: every juror's fitted map gives the others' verdicts weight 0, so a round "
    "cannot move anyone. Straight to the final judgment."
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
    }


def _event_consensus(c: ConsensusResult) -> dict[str, Any]:
    return {
        "consensusStatus": c.status.value,
        "agreementLevel": round(c.agreement_level, 4),
        "consensusReached": c.consensus_reached,
        "majorityPosition": c.majority_position,
        "counts": c.counts,
        "failedSeats": c.failed,
    }


def auto_judge(spec: ModelSpec, scoring: str) -> Literal["likelihood", "generate"]:
    """The judge method `auto` gives a seat: the catalog's preferred one (likelihood for a base model), when
    its backend scores options exactly (`scoring`: the backend's `scoring_support`; a replay, "recorded",
    answers as the recorded run's backend did); generate otherwise."""
    exact = scoring.startswith("exact") or scoring == "recorded"
    return "likelihood" if spec.preferred_judge == "likelihood" and exact else "generate"


class Jury:
    """A panel of jurors (seat + model each) that judges cases. `models` looks model ids up (a ModelHub's
    `get`, or a mapping of id → ChatModel); the final judge's model is looked up the same way when needed."""

    def __init__(self, seats: Sequence[JurorSeat], models: ModelLookup, config: JuryConfig | None = None) -> None:
        if not seats:
            raise ValueError("a jury needs at least one juror")
        self.seats = list(seats)
        self.model: ModelSource = model_source(models)
        self.config = config or JuryConfig()
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}
        # (case id, case text, model id) → the channel features of phase 1, which a round's map also reads.
        self._phase1_features: dict[tuple[str, str, str], dict[str, float]] = {}
        # The same key's phase-1 scoring (under way or done): seats on one model with one prompt (the channel
        # judge is role-blind) share one call rather than repeat it.
        self._phase1_calls: dict[tuple[str, str, str], asyncio.Task[tuple[dict[str, float], Any]]] = {}
        # The same key's role cues (`engine.jury.roles`): one more call a case, shared by every role seat.
        self._cue_calls: dict[tuple[str, str, str], asyncio.Task[tuple[dict[str, float], Any]]] = {}

    def by_likelihood(self, seat: JurorSeat) -> bool:
        """Whether this seat judges by likelihood: as configured, or under `auto` when its model is a base
        model (catalog `tuning`) on a backend that scores options exactly (the channel judge scores whole
        transcripts; a first-token or top-k approximation cannot). An unknown model generates (and fails
        there, with its reason, as a flagged fallback)."""
        if self.config.judge != "auto":
            return self.config.judge == "likelihood"
        try:
            model = self.model(seat.model_id)
        except KeyError:
            return False
        return auto_judge(model.spec, type(model).scoring_support(model.spec)) == "likelihood"

    def identical_seats(self, rubric: Rubric) -> bool:
        """Whether the seats are identical by construction: two or more, every one on the same model judging by
        likelihood through the model's fitted jury map (the channel judge is role-blind: the role never reaches
        the prompt), so every seat gives the same verdict from the same call."""
        models = {s.model_id for s in self.seats}
        if len(self.seats) < 2 or len(models) != 1 or not all(self.by_likelihood(s) for s in self.seats):
            return False
        try:
            model_id = self.model(next(iter(models))).model_id
        except KeyError:
            return False
        cal = judgemaps.load_calibration(JURY, model_id)
        if cal is None or not all(v in cal.maps for v in rubric.verdicts):
            return False
        roles = [self.role_map(s, rubric) for s in self.seats]
        return not any(roles) or len({None if r is None else r[0] for r in roles}) == 1

    def role_map(self, seat: JurorSeat, rubric: Rubric) -> tuple[str, Any] | None:
        """(role, fitted role map) when this seat judges from its own role (`engine.jury.roles`): role maps on,
        a likelihood seat on the default labels, whose role name has a checklist and a map fitted for its
        model. None otherwise (the seat reads the role-blind channel map)."""
        role = role_slug(seat.role_name)
        if not self.config.role_maps or role not in JURY_ROLES or list(rubric.verdicts) != list(JURY_HEADINGS):
            return None
        if not self.by_likelihood(seat):
            return None
        try:
            model_id = self.model(seat.model_id).model_id
        except KeyError:
            return None
        cal = judgemaps.load_calibration(f"{JURY_ROLE}.{role}", model_id)
        return None if cal is None or not all(v in cal.maps for v in rubric.verdicts) else (role, cal)

    def others_weight(self, seat: JurorSeat, rubric: Rubric) -> float | None:
        """The weight this seat's fitted map gives the other jurors' verdicts in a discussion round, read from
        the map file (`engine.likelihood.jury_others_weight`): 0.0 when a round cannot move the seat. None
        where a round can move it or nothing says it cannot: a generating seat, a model without a jury map for
        the rubric's labels (the label words then hear the others), a map that does not read their features."""
        if not self.by_likelihood(seat):
            return None
        if self.role_map(seat, rubric) is not None:
            return 0.0  # a role map reads its phase-1 cues only: hearing the others cannot move it
        try:
            model_id = self.model(seat.model_id).model_id
        except KeyError:
            return None
        cal = judgemaps.load_calibration(JURY, model_id)
        if cal is None or not all(v in cal.maps for v in rubric.verdicts):
            return None
        return jury_others_weight(cal, rubric.verdicts)

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

    async def _score(
        self, seat: JurorSeat, case: JuryCase, rubric: Rubric, others: list[tuple[str, str]], t0: float, stage: str
    ) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
        """The likelihood juror. With a fitted jury map for the model whose classes are the rubric's labels
        (`data/calibration/jury.likelihood.<model>.json`), the distribution over the labels is that map
        applied to the juror's channel features (`engine.likelihood.jury_features`);
        otherwise it is the calibrated likelihood of the label words themselves, flagged `uncalibrated`.
        In a discussion round a map that reads the others' evidence (`JURY_OTHERS_FEATURES`) gets the
        juror's phase-1 features and how much the others' quoted verdicts moved them, weighted as fitted
        (`engine.likelihood.fit_jury_calibration`); the phase-1 features are the ones this run already
        scored for the case and model (scored again, and recorded, when it has none: e.g. a final judge
        on a model no juror used). Verdict = the most likely label, confidence = its probability, score =
        the distribution's mean over the labels' evenly spaced scores (every axis gets that score); the
        'reasoning' states the distribution, the 'detail' the features and map (or the label words) and, in a
        round, what the juror heard. A non-finite feature is a failed field (a
        non-voting fallback). Same contract as `_ask`."""

        role = await self._role_score(seat, case, rubric, others, t0, stage)
        if role is not None:
            return role
        facts: dict[str, Any] = {"started_s": round(time.perf_counter() - t0, 4)}
        features: dict[str, float] | None = None
        scores: Any = None
        shared = unheard = False
        try:
            model = self.model(seat.model_id)
            cal = judgemaps.load_calibration(JURY, model.model_id)
            mapped = cal is not None and all(v in cal.maps for v in rubric.verdicts)
            with call_context(purpose=f"jury.{stage}:{seat.juror_id}"):
                if mapped:
                    assert cal is not None
                    reads_others = all(set(JURY_OTHERS_FEATURES) <= set(cal.maps[v].features) for v in rubric.verdicts)
                    key = (case.id, case.content, model.model_id)
                    if (others and reads_others and key not in self._phase1_features) or not others:
                        features, scores, shared = await self._phase1_scoring(key, model, case)
                        self._phase1_features.setdefault(key, dict(features))
                    if others and stage == "final" and jury_others_weight(cal, rubric.verdicts) == 0:
                        # The others weigh 0 in this map: hearing them cannot change the distribution, so the
                        # judge's round input is its phase-1 reading, unmoved, and no call is made for it.
                        features = jury_round_features(self._phase1_features[key], self._phase1_features[key])
                        scores, shared = None, False
                        unheard = True
                    elif others:
                        features, scores = await jury_features(model, case, others)
                        shared = False
                        if reads_others:
                            features = jury_round_features(self._phase1_features[key], features)
                    elif reads_others:  # phase 1: nothing heard, nothing moved
                        own = self._phase1_features[key]
                        features = jury_round_features(own, own)
                else:
                    scores = await jury_scores(model, seat, case, rubric, others)
        except ModelError as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"{type(exc).__name__}: {exc.message}", facts
        except KeyError as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"unknown model: {exc.args[0]}", facts
        if scores is not None and not shared:
            self.usage["prompt_tokens"] += scores.prompt_tokens
        facts.update(ended_s=round(time.perf_counter() - t0, 4), call_id=None if scores is None else scores.call_id)
        score_flags = [] if scores is None else list(scores.flags)
        if features is not None and cal is not None:
            shown = " · ".join(f"{k} {v:+.2f}" for k, v in features.items())
            if not all(math.isfinite(v) for v in features.values()):
                facts["flags"] = ["likelihood", "invalid:likelihood_features", *score_flags]
                return None, f"invalid likelihood features: {shown}", facts
            probs = cal.distribution(rubric.verdicts, features)
            flags = ["likelihood", f"calibration:{cal.version}", *score_flags]
            detail = f"features: {shown}; map {cal.version}"
            if shared:
                detail += " · the panel's one scoring call for this model and case (same prompt)"
        else:
            probs = scores.calibrated or scores.probabilities
            flags = ["likelihood", "uncalibrated", *scores.flags]
            detail = "label words, no fitted map"
        best = max(range(len(probs)), key=lambda i: probs[i])
        score = round(sum(p * v for p, v in zip(probs, label_scores(len(probs)), strict=True)), 1)
        # The card's sentence in words; the distribution, features and map are its detail (behind a toggle).
        text = jury_rationale(rubric.verdicts, probs, features if cal is not None else None, heard=bool(others))
        distribution = "likelihood: " + " · ".join(f"{v} {p:.2f}" for v, p in zip(rubric.verdicts, probs, strict=True))
        detail = f"{distribution}; {detail}"
        if others:
            detail += " · after hearing " + ", ".join(f"{who}: {v}" for who, v in others)
            if unheard:
                detail += " (weight 0 in this map: not scored again)"
        facts.update(flags=flags, detail=detail)  # machine text, beside the answer: never from a model's JSON
        return (
            {
                "verdict": rubric.verdicts[best],
                "score": score,
                "axes": dict.fromkeys(rubric.axes, score),
                "confidence": round(probs[best], 4),
                "reasoning": text,
                "statement": text,
            },
            None,
            facts,
        )

    async def _role_score(
        self, seat: JurorSeat, case: JuryCase, rubric: Rubric, others: list[tuple[str, str]], t0: float, stage: str
    ) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]] | None:
        """A seat judging from its own role (`engine.jury.roles`), or the final judge of such a panel: the
        channel features and the six role cues (two shared calls a case, whoever asks first makes them), read
        through the seat's role map, or for the final judge through the panel map over every seat's features
        (no call of its own). None when neither applies (the role-blind judge then decides). A round cannot
        move a role seat (its map reads phase-1 features only): its card keeps its phase-1 reading."""
        judged = self.role_map(seat, rubric)
        panel = None
        if judged is None:
            if stage != "final" or not self.config.role_maps:
                return None
            try:
                model = self.model(seat.model_id)
            except KeyError:
                return None
            key = (case.id, case.content, model.model_id)
            panel = judgemaps.load_calibration(JURY_PANEL, model.model_id)
            seated = [self.role_map(s, rubric) for s in self.seats]
            if panel is None or key not in self._cue_calls or not any(seated) or not self.by_likelihood(seat):
                return None
            if not all(v in panel.maps for v in rubric.verdicts):
                return None
        facts: dict[str, Any] = {"started_s": round(time.perf_counter() - t0, 4)}
        try:
            model = self.model(seat.model_id)
            key = (case.id, case.content, model.model_id)
            with call_context(purpose=f"jury.{stage}:{seat.juror_id}"):
                channel, scores, shared = await self._phase1_scoring(key, model, case)
                cues, cue_scores, cue_shared = await self._shared(self._cue_calls, key, cue_features(model, case))
        except ModelError as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"{type(exc).__name__}: {exc.message}", facts
        for s, was_shared in ((scores, shared), (cue_scores, cue_shared)):
            if not was_shared:
                self.usage["prompt_tokens"] += s.prompt_tokens
        features = {**channel, **cues}
        cal = panel if judged is None else judged[1]
        assert cal is not None
        read = PANEL_FEATURES if judged is None else list(cal.maps[rubric.verdicts[0]].features)
        shown = " · ".join(f"{k} {features[k]:+.2f}" for k in read)
        facts.update(ended_s=round(time.perf_counter() - t0, 4), call_id=None if cue_shared else cue_scores.call_id)
        if not all(math.isfinite(features[k]) for k in read):
            facts["flags"] = ["likelihood", "invalid:likelihood_features"]
            return None, f"invalid likelihood features: {shown}", facts
        probs = cal.distribution(rubric.verdicts, features)
        best = max(range(len(probs)), key=lambda i: probs[i])
        score = round(sum(p * v for p, v in zip(probs, label_scores(len(probs)), strict=True)), 1)
        if judged is None:
            text = panel_rationale(rubric.verdicts, probs, features)
            how = "the panel map over every seat's features; no call of its own"
        else:
            text = role_rationale(judged[0], rubric.verdicts, probs, features)
            how = f"the {seat.role_name} role map"
            if others:
                text = text[:-1] + "; its map does not read the others' verdicts, so hearing them cannot move it."
        distribution = "likelihood: " + " · ".join(f"{v} {p:.2f}" for v, p in zip(rubric.verdicts, probs, strict=True))
        facts.update(
            flags=["likelihood", f"calibration:{cal.version}", "role_map" if judged else "panel_map"],
            detail=f"{distribution}; features: {shown}; {how}, map {cal.version}",
        )
        parsed = {
            "verdict": rubric.verdicts[best],
            "score": score,
            "axes": dict.fromkeys(rubric.axes, score),
            "confidence": round(probs[best], 4),
            "reasoning": text,
            "statement": text,
        }
        return parsed, None, facts

    async def _shared(
        self,
        calls: dict[tuple[str, str, str], asyncio.Task[tuple[dict[str, float], Any]]],
        key: tuple[str, str, str],
        coro: Any,
    ) -> tuple[dict[str, float], Any, bool]:
        """(features, scores, shared): one call per key however many seats ask at once."""
        known = calls.get(key)
        if known is not None:
            coro.close()
            features, scores = await asyncio.shield(known)
            return dict(features), scores, True
        task = asyncio.ensure_future(coro)
        calls[key] = task
        try:
            features, scores = await task
        except BaseException:
            calls.pop(key, None)  # a failure is not kept: the next seat tries again
            raise
        return dict(features), scores, False

    async def _phase1_scoring(
        self, key: tuple[str, str, str], model: Any, case: JuryCase
    ) -> tuple[dict[str, float], Any, bool]:
        """(channel features, scores, shared) of a case's phase-1 scoring on a model: one call however many
        seats ask for it at once (`shared`: this seat joined a call another seat started)."""

        known = self._phase1_calls.get(key)
        if known is not None:  # under way or done (a done task answers at once, in any event loop)
            features, scores = await asyncio.shield(known)
            return dict(features), scores, True
        task = asyncio.ensure_future(jury_features(model, case))
        self._phase1_calls[key] = task
        try:
            features, scores = await task
        except BaseException:
            self._phase1_calls.pop(key, None)  # a failure is not kept: the next seat tries again
            raise
        return dict(features), scores, False

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
            }
        )

    async def run(self, case: JuryCase, emit: Emit | None = None) -> CollaborativeJuryResult:
        cfg = self.config
        rubric = case.rubric or Rubric()
        evaluation_schema, statement_schema, final_schema = output_schemas(tuple(rubric.verdicts), tuple(rubric.axes))
        n = len(self.seats)
        order = [s.juror_id for s in self.seats]
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}
        t0 = time.perf_counter()

        def send(type_: str, **payload: object) -> None:
            if emit is not None:
                emit(type_, submissionId=case.id, **payload)

        identical = self.identical_seats(rubric)
        send(
            "jury_started",
            case={"id": case.id, "title": case.title, "content": case.content, "gold": case.gold},
            rubric=rubric.model_dump(),
            config=cfg.model_dump(),
            jurors=[s.model_dump() for s in self.seats],
            identicalSeats=identical,
        )

        # Phase 1 — independent, in parallel; each card is sent as soon as its juror answers.
        send("phase_started", phase=1, speakerOrder=order)

        async def evaluate(seat: JurorSeat) -> JurorEvaluation:
            if self.by_likelihood(seat):
                parsed, reason, facts = await self._score(seat, case, rubric, [], t0, "phase1")
            else:
                parsed, reason, facts = await self._ask(
                    seat, evaluation_messages(seat, case, rubric, n), evaluation_schema, t0, "phase1"
                )
            e = self._evaluation(seat, parsed, reason, facts, rubric, 0, "reasoning")
            send("juror_evaluation", phase=1, round=0, **_event_evaluation(e))
            return e

        phase1 = await self._gather([evaluate(s) for s in self.seats])
        phase1_consensus = panel_consensus(phase1, cfg.consensus_threshold)
        send("consensus_check", phase=1, round=0, **_event_consensus(phase1_consensus))

        # Phase 2 — parallel rounds.
        rounds: list[DiscussionRound] = []
        latest = {e.juror_id: e for e in phase1}
        stop = phase1_stop(phase1_consensus, cfg.max_discussion_rounds)
        if stop is None and cfg.skip_idle_rounds:
            weights = {s.juror_id: self.others_weight(s, rubric) for s in self.seats}
            if idle_discussion(weights, phase1):
                stop = "no_influence"
                send(
                    "discussion_skipped",
                    reason=stop,
                    weights=weights,
                    text=IDLE_DISCUSSION_TEXT,
                )
                send("discussion_ended", reason=stop, totalRounds=0)
        if stop is None:
            still = 0
            for round_number in range(1, cfg.max_discussion_rounds + 1):
                send("round_started", round=round_number, speakerOrder=order)
                earlier = list(rounds)

                async def speak(
                    index: int,
                    seat: JurorSeat,
                    round_number: int = round_number,
                    earlier: list[DiscussionRound] = earlier,
                ) -> JurorStatement:
                    current = latest[seat.juror_id]
                    if self.by_likelihood(seat):
                        others = [
                            (o.role_name or o.juror_id, o.verdict)
                            for o in latest.values()
                            if o.juror_id != seat.juror_id and not o.fallback
                        ]
                        parsed, why, facts = await self._score(seat, case, rubric, others, t0, f"round{round_number}")
                    else:
                        parsed, why, facts = await self._ask(
                            seat,
                            statement_messages(seat, case, rubric, n, round_number, phase1, earlier, current),
                            statement_schema,
                            t0,
                            f"round{round_number}",
                        )
                    updated = self._evaluation(seat, parsed, why, facts, rubric, round_number, "statement")
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
                        position_changed=parsed is not None
                        and not current.fallback
                        and updated.verdict != current.verdict,
                        updated_evaluation=updated,
                        detail=updated.detail if parsed is not None else "",
                    )
                    send(
                        "juror_statement",
                        round=round_number,
                        juror=seat.juror_id,
                        statementOrder=index,
                        statement=text,
                        detail=statement.detail,
                        positionChanged=statement.position_changed,
                        previousVerdict=current.verdict,
                        newVerdict=updated.verdict,
                        newScore=updated.score,
                        previousScore=current.score,
                        evaluation=_event_evaluation(updated),
                    )
                    return statement

                statements = await self._gather([speak(i, s) for i, s in enumerate(self.seats)])
                for st in statements:
                    assert st.updated_evaluation is not None
                    latest[st.juror_id] = st.updated_evaluation
                consensus = panel_consensus([latest[j] for j in order], cfg.consensus_threshold)
                rounds.append(
                    DiscussionRound(
                        round_number=round_number, statements=statements, consensus_check=consensus, speaker_order=order
                    )
                )
                moved = positions_moved(statements)
                still = stagnant_rounds(still, moved)
                send("round_completed", round=round_number, moved=moved, **_event_consensus(consensus))
                stop = round_stop(
                    consensus,
                    still,
                    round_number,
                    max_discussion_rounds=cfg.max_discussion_rounds,
                    stagnation_rounds=cfg.stagnation_rounds,
                )
                if stop is not None:
                    break
            send("discussion_ended", reason=stop or "max_rounds", totalRounds=len(rounds))
        reason = stop or "max_rounds"  # the last round always returns a reason; `or` only tells the type checker

        # Phase 3 — the final judgment.
        final_evals = [latest[j] for j in order]
        judgment = await self._final(case, rubric, final_schema, phase1, rounds, final_evals, t0)
        send("final_judgment", **judgment.model_dump())
        result = CollaborativeJuryResult(
            phase1_evaluations=phase1,
            phase1_consensus=phase1_consensus,
            discussion_rounds=rounds,
            total_rounds=len(rounds),
            phase3_judgment=judgment,
            final_verdict=judgment.verdict,
            final_score=judgment.score,
            early_termination=early_termination(reason),
            termination_reason=reason,
            case_id=case.id,
            jurors=self.seats,
            prompt_tokens=self.usage["prompt_tokens"],
            completion_tokens=self.usage["completion_tokens"],
            cost=self.usage["cost"],
            wall_s=round(time.perf_counter() - t0, 4),
            identical_seats=identical,
        )
        send(
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
        if cfg.final_judgment_method != "final_judge":
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
    """`emit`, reporting progress on the way (``engine.runctx``): one unit per juror answer and one for
    the final judgment; the total shrinks to what is left once the discussion ends early."""

    n = len(jury.seats)
    runctx.progress(total=n * (1 + jury.config.max_discussion_rounds) + 1, step="phase 1")

    def emitting(type_: str, **payload: object) -> object:
        out = emit(type_, **payload)
        if type_ == "juror_evaluation":
            runctx.progress(advance=1, step="phase 1 — independent evaluations")
        elif type_ == "juror_statement":
            runctx.progress(advance=1, step=f"discussion round {payload.get('round')}")
        elif type_ == "discussion_ended" or (
            type_ == "consensus_check" and (payload.get("consensusReached") or jury.config.max_discussion_rounds == 0)
        ):
            control = runctx.current()
            if control is not None:
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
