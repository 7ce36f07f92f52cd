"""How a jury seat judges by likelihood: whether it does (`by_likelihood`), through which fitted map (its role's,
the panel's or the role-blind channel map), and the scoring itself, with the calls that seats on one model share
(one phase-1 scoring and one role-cue scoring a case, whoever asks first makes them). `Jury` (engine.jury.runner)
runs the phases; this is the half of a seat that is not a generated answer."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any, Literal

from engine import judgemaps
from engine.embeddings import EmbedderUnavailable, RecordedEmbedder
from engine.jury.config import JuryCase, JuryConfig, Rubric
from engine.jury.decisions import JurorSeat
from engine.jury.likelihood import (
    JURY,
    JURY_HEADINGS,
    JURY_OTHERS_FEATURES,
    VERDICT_READS,
    jury_features,
    jury_others_weight,
    jury_rationale,
    jury_round_features,
    jury_scores,
)
from engine.jury.neighbours import (
    JURY_NEIGHBOURS,
    features_of,
    nearest_cases,
    neighbour_texts,
    neighbours_problem,
)
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
from engine.likelihood import label_scores
from models.errors import ModelError
from models.recording import call_context

if TYPE_CHECKING:
    from models.catalog import ModelSpec
    from models.source import ModelSource

Answer = tuple[dict[str, Any] | None, str | None, dict[str, Any]]  # (parsed answer, failure reason, call facts)
SharedCalls = dict[tuple[str, str, str], asyncio.Task[tuple[dict[str, float], Any]]]


def auto_judge(spec: ModelSpec, scoring: str) -> Literal["likelihood", "generate"]:
    """The judge method `auto` gives a seat: the catalog's preferred one (likelihood for a base model), when
    its backend scores options exactly (`scoring`: the backend's `scoring_support`; a replay, "recorded",
    answers as the recorded run's backend did); generate otherwise."""
    exact = scoring.startswith("exact") or scoring == "recorded"
    return "likelihood" if spec.preferred_judge == "likelihood" and exact else "generate"


JURY_SEAT = "jury.seat"  # a stacked panel's likelihood seat: data/calibration/jury.seat.<model>.json


class LikelihoodSeats:
    """The likelihood half of a `Jury`: its seats, models and config are the jury's."""

    def stack_map(self, rubric: Rubric) -> Any:  # the Jury's (engine.jury.runner): None here
        return None

    seats: list[JurorSeat]
    model: ModelSource
    config: JuryConfig
    usage: dict[str, Any]

    def __init__(self) -> None:
        # (case id, case text, model id) → the channel features of phase 1, which a round's map also reads.
        self._phase1_features: dict[tuple[str, str, str], dict[str, float]] = {}
        # The same key's phase-1 scoring (under way or done): seats on one model with one prompt (the channel
        # judge is role-blind) share one call rather than repeat it.
        self._phase1_calls: SharedCalls = {}
        # The same key's role cues (`engine.jury.roles`): one more call a case, shared by every role seat.
        self._cue_calls: SharedCalls = {}
        self._embedders: dict[str, RecordedEmbedder] = {}  # embedder id → the run's recorded embedder

    def by_distribution(self, seat: JurorSeat) -> bool:
        """Whether the seat's answer is a calibrated distribution over the labels (a likelihood or neighbours seat):
        what the stack reads and a learned round updates."""
        return seat.judge == "neighbours" or self.by_likelihood(seat)

    def _embedder(self, embedder_id: str) -> RecordedEmbedder:
        """The run's embedder of that id, recording into (and replaying from) the call log of the panel's models: a
        model seat's, else (a panel of neighbours seats only) the final judge's, which is built but never called."""
        if embedder_id not in self._embedders:
            base = None
            ids = [s.model_id for s in self.seats if s.judge != "neighbours"] + [self.config.final_judge_model]
            for model_id in ids:
                try:
                    base = self.model(model_id)
                    break
                except (KeyError, ModelError):  # not in the catalog, or cannot be built here
                    continue
            self._embedders[embedder_id] = (
                RecordedEmbedder.for_model(base, embedder_id)
                if base is not None
                else RecordedEmbedder(None, embedder_id=embedder_id)
            )
        return self._embedders[embedder_id]

    async def _neighbours_score(
        self, seat: JurorSeat, case: JuryCase, rubric: Rubric, t0: float, stage: str
    ) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
        """The LLM-free juror (engine.jury.neighbours): the case's two embeddings through the seat's fitted map,
        and the labelled cases it is closest to, in words. Same contract as `_ask`."""
        facts: dict[str, Any] = {"started_s": round(time.perf_counter() - t0, 4)}
        try:
            cal = judgemaps.load_calibration(JURY_NEIGHBOURS, seat.model_id, check=neighbours_problem)
        except ValueError as exc:  # the shipped map is damaged: the seat fails, flagged, and the others go on
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, str(exc), facts
        if cal is None or not all(v in cal.maps for v in rubric.verdicts):
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return (
                None,
                f"no fitted neighbours map for {seat.model_id} with the labels {', '.join(rubric.verdicts)}",
                facts,
            )
        try:
            embedder = self._embedder(seat.model_id)
            with call_context(purpose=f"jury.{stage}:{seat.juror_id}"):
                vectors = await asyncio.to_thread(embedder.embed, neighbour_texts(case.content))
        except (EmbedderUnavailable, KeyError) as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"embedder unavailable: {exc}", facts
        facts["ended_s"] = round(time.perf_counter() - t0, 4)
        features = features_of(vectors[0], vectors[1])
        if not all(math.isfinite(v) for v in features.values()):
            facts["flags"] = ["neighbours", "invalid:embedding"]
            return None, "invalid embedding (a non-finite value)", facts
        try:
            probs = cal.distribution(rubric.verdicts, features)
        except (ValueError, KeyError) as exc:
            facts["flags"] = ["neighbours", f"calibration:{cal.version}", *judgemaps.map_flags(cal)]
            return None, f"the neighbours map {cal.version} cannot be applied ({str(exc)[:160]})", facts
        near = nearest_cases(cal, vectors[0])
        best = max(range(len(probs)), key=lambda i: probs[i])
        lead = f"Reads as {VERDICT_READS.get(rubric.verdicts[best], rubric.verdicts[best])} ({probs[best]:.0%} sure)"
        if near:
            named = " and ".join(f"“{title}” ({VERDICT_READS.get(gold, gold)})" for _, title, gold, _ in near)
            text = f"{lead}: the labelled cases it is closest to are {named}."
        else:
            text = (
                f"{lead}: by what the transcript and the agent's last line are about, as the labelled cases taught it."
            )
        facts.update(
            flags=["neighbours", f"calibration:{cal.version}", *judgemaps.map_flags(cal)],
            detail=f"{_distribution(rubric.verdicts, probs)}; embeddings {seat.model_id} of the transcript and the "
            f"agent's last line; nearest: "
            + (", ".join(f"{i} {cos:.2f}" for i, _, _, cos in near) or "none kept")
            + f"; map {cal.version}",
            distribution=dict(zip(rubric.verdicts, (round(float(p), 6) for p in probs), strict=True)),
        )
        return _answer(rubric, probs, text), None, facts

    def by_likelihood(self, seat: JurorSeat) -> bool:
        """Whether this seat judges by likelihood: as configured, or under `auto` when its model is a base
        model (catalog `tuning`) on a backend that scores options exactly (the channel judge scores whole
        transcripts; a first-token or top-k approximation cannot). An unknown model generates (and fails
        there, with its reason, as a flagged fallback). A seat's own `judge` overrides the config."""
        if seat.judge:
            return seat.judge == "likelihood"
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
        the map file (`engine.jury.likelihood.jury_others_weight`): 0.0 when a round cannot move the seat. None
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

    async def _score(
        self, seat: JurorSeat, case: JuryCase, rubric: Rubric, others: list[tuple[str, str]], t0: float, stage: str
    ) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
        """The likelihood juror. With a fitted jury map for the model whose classes are the rubric's labels
        (`data/calibration/jury.likelihood.<model>.json`), the distribution over the labels is that map
        applied to the juror's channel features (`engine.jury.likelihood.jury_features`);
        otherwise it is the calibrated likelihood of the label words themselves, flagged `uncalibrated`.
        In a discussion round a map that reads the others' evidence (`JURY_OTHERS_FEATURES`) gets the
        juror's phase-1 features and how much the others' quoted verdicts moved them, weighted as fitted
        (`engine.jury.likelihood.fit_jury_calibration`); the phase-1 features are the ones this run already
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
        try:
            reading = await self._channel_reading(seat, case, rubric, others, stage)
        except ModelError as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"{type(exc).__name__}: {exc.message}", facts
        except KeyError as exc:
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, f"unknown model: {exc.args[0]}", facts
        except ValueError as exc:  # its map cannot be used (MapError): the seat fails, the others go on
            facts["ended_s"] = round(time.perf_counter() - t0, 4)
            return None, str(exc), facts
        features, scores, shared, unheard, cal = reading
        if scores is not None and not shared:
            self.usage["prompt_tokens"] += scores.prompt_tokens
        facts.update(ended_s=round(time.perf_counter() - t0, 4), call_id=None if scores is None else scores.call_id)
        score_flags = [] if scores is None else list(scores.flags)
        if features is not None and cal is not None:
            shown = " · ".join(f"{k} {v:+.2f}" for k, v in features.items())
            if not all(math.isfinite(v) for v in features.values()):
                facts["flags"] = ["likelihood", "invalid:likelihood_features", *score_flags]
                return None, f"invalid likelihood features: {shown}", facts
            try:
                probs = cal.distribution(rubric.verdicts, features)
            except (ValueError, KeyError) as exc:
                facts["flags"] = ["likelihood", f"calibration:{cal.version}", *judgemaps.map_flags(cal)]
                return None, f"the map {cal.version} cannot be applied ({str(exc)[:160]})", facts
            flags = ["likelihood", f"calibration:{cal.version}", *score_flags, *judgemaps.map_flags(cal)]
            shown = " · ".join(
                f"{k} {v:+.2f}" for k, v in features.items() if k in cal.maps[rubric.verdicts[0]].features
            )
            detail = f"features: {shown}; map {cal.version}"
            if shared:
                detail += " · the panel's one scoring call for this model and case (same prompt)"
        else:
            probs = scores.calibrated or scores.probabilities
            flags = ["likelihood", "uncalibrated", *scores.flags]
            detail = "label words, no fitted map"
        # The card's sentence in words; the distribution, features and map are its detail (behind a toggle).
        text = jury_rationale(rubric.verdicts, probs, features if cal is not None else None, heard=bool(others))
        detail = f"{_distribution(rubric.verdicts, probs)}; {detail}"
        if others:
            detail += " · after hearing " + ", ".join(f"{who}: {v}" for who, v in others)
            if unheard:
                detail += " (weight 0 in this map: not scored again)"
        facts.update(flags=flags, detail=detail)  # machine text, beside the answer: never from a model's JSON
        facts["distribution"] = dict(zip(rubric.verdicts, (round(float(p), 6) for p in probs), strict=True))
        return _answer(rubric, probs, text), None, facts

    async def _channel_reading(
        self, seat: JurorSeat, case: JuryCase, rubric: Rubric, others: list[tuple[str, str]], stage: str
    ) -> tuple[dict[str, float] | None, Any, bool, bool, Any]:
        """(features, scores, shared, unheard, map) of the role-blind channel judge: the features its fitted map
        reads (None, with the label words' `scores`, when the model has no map for the rubric's labels). In a
        round, a map that reads the others' evidence gets the phase-1 features and how hearing them moved
        these; a final judge whose map weighs the others 0 reuses its phase-1 reading (`unheard`, no call)."""
        features: dict[str, float] | None = None
        scores: Any = None
        shared = unheard = False
        model = self.model(seat.model_id)
        cal = None
        check = judgemaps.logistic_problem  # the maps a distribution is read through
        if self.stack_map(rubric) is not None:  # a seat of a stacked panel reads its own seat map
            cal = judgemaps.load_calibration(JURY_SEAT, model.model_id, check=check)
        if cal is None:
            cal = judgemaps.load_calibration(JURY, model.model_id, check=check)
        mapped = cal is not None and all(v in cal.maps for v in rubric.verdicts)
        with call_context(purpose=f"jury.{stage}:{seat.juror_id}"):
            if not mapped:
                return None, await jury_scores(model, seat, case, rubric, others), False, False, cal
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
            if features is not None and any(
                f.startswith(("cue_", "rel_")) for v in rubric.verdicts for f in cal.maps[v].features
            ):
                # A map that reads the role cues too (the second model's): one more call, shared by its seats.
                cues, cue_scores, cue_shared = await self._shared(self._cue_calls, key, cue_features(model, case))
                if not cue_shared:
                    self.usage["prompt_tokens"] += cue_scores.prompt_tokens
                features = {**features, **cues}
        return features, scores, shared, unheard, cal

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
        if judged is None:
            text = panel_rationale(rubric.verdicts, probs, features)
            how = "the panel map over every seat's features; no call of its own"
        else:
            text = role_rationale(judged[0], rubric.verdicts, probs, features)
            how = f"the {seat.role_name} role map"
            if others:
                text = text[:-1] + "; its map does not read the others' verdicts, so hearing them cannot move it."
        facts.update(
            flags=[
                "likelihood",
                f"calibration:{cal.version}",
                "role_map" if judged else "panel_map",
                *judgemaps.map_flags(cal),
            ],
            detail=f"{_distribution(rubric.verdicts, probs)}; features: {shown}; {how}, map {cal.version}",
            distribution=dict(zip(rubric.verdicts, (round(float(p), 6) for p in probs), strict=True)),
        )
        return _answer(rubric, probs, text), None, facts

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


def _distribution(verdicts: list[str], probs: list[float]) -> str:
    return "likelihood: " + " · ".join(f"{v} {p:.2f}" for v, p in zip(verdicts, probs, strict=True))


def _answer(rubric: Rubric, probs: list[float], text: str) -> dict[str, Any]:
    """A likelihood seat's answer, shaped as a generated one: verdict = the most likely label, confidence = its
    probability, score = the distribution's mean over the labels' evenly spaced scores (every axis gets it)."""
    best = max(range(len(probs)), key=lambda i: probs[i])
    score = round(sum(p * v for p, v in zip(probs, label_scores(len(probs)), strict=True)), 1)
    return {
        "verdict": rubric.verdicts[best],
        "score": score,
        "axes": dict.fromkeys(rubric.axes, score),
        "confidence": round(probs[best], 4),
        "reasoning": text,
        "statement": text,
    }
