"""The LLM and embedding factors of a live answer: the model's self-evaluation (generated ratings, or by
likelihood through a fitted map), its query coverage, the sources' agreement (embeddings) and, without sources,
the agreement of sampled answers. Each gives a `FactorResult`; a failure is a flagged fallback, never a judgment."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from engine import judgemaps
from engine.confidence.likelihood import CONFIDENCE, confidence_features
from engine.confidence.signals import (
    SIGNALS,
    SIGNALS_ID,
    Signals,
    on_seed_scale,
    read_answer,
    read_signals,
    signals_problem,
)
from engine.embeddings import TextEmbedder, cosine_matrix, get_embedder
from models.errors import ModelError

if TYPE_CHECKING:
    from models.base import ChatModel


def failed_call(
    name: str, fallback: float, exc: ModelError, *, note: str = "", keep_flags: bool = True
) -> FactorResult:
    """A factor whose model call failed: the documented fallback, flagged, with the error in its detail (and the
    failed fields the error names, `keep_flags`)."""
    return FactorResult(
        name=name,
        value=fallback,
        flagged=True,
        detail=f"fallback {fallback}{note}: {exc.kind}: {exc.message}",
        flags=list(getattr(exc, "flags", [])) if keep_flags else [],
    )


class SelfEvalOutput(BaseModel):
    """What the self-evaluating model returns: three 0–1 ratings and why."""

    accuracy: float = Field(ge=0.0, le=1.0, description="is the answer factually right?")
    relevance: float = Field(ge=0.0, le=1.0, description="does it answer the question asked?")
    style: float = Field(ge=0.0, le=1.0, description="is it clear and appropriately phrased?")
    reason: str = Field(max_length=160)


class CoverageOutput(BaseModel):
    coverage: float = Field(ge=0.0, le=1.0, description="share of the question's parts the answer addresses")
    missing: str = Field(max_length=120, description="what is left unanswered, or empty")


class FactorResult(BaseModel):
    """One computed factor: its value, whether it is a fallback, and where it came from."""

    name: str
    value: float
    flagged: bool = False
    detail: str = ""
    call_id: int | None = None
    flags: list[str] = Field(default_factory=list)
    probability: float | None = Field(
        None,
        exclude_if=lambda v: v is None,  # the runs and demos recorded before it keep their shape
        description="the calibrated probability behind the value, where the value is placed on the seed's scale",
    )


SELF_EVAL_PROMPT = (
    "Rate the answer to the question. Give accuracy, relevance and style, each between 0 and 1, "
    "and a one-sentence reason.\n\nQuestion: {query}\n\nAnswer: {answer}{sources}"
)
COVERAGE_PROMPT = (
    "How much of the question does the answer cover? Give coverage between 0 (nothing) and 1 (every part), "
    "and name what is missing.\n\nQuestion: {query}\n\nAnswer: {answer}"
)


def _sources_block(sources: Sequence[str] | None) -> str:
    if not sources:
        return ""
    return "\n\nSources:\n" + "\n".join(f"- {s}" for s in sources)


class LLMSelfEvaluator:
    """The model rates accuracy, relevance and style; the factor is their weighted mean.

    On any failure (unreachable model, unparseable output, a rating outside [0, 1], an answer cut off
    at max_tokens) the factor is 0.5 — the seed's default — and flagged with the failed fields, so a
    fallback is never mistaken for a judgment (and a rating of 7 never becomes 1.0).
    """

    FALLBACK = 0.5

    def __init__(self, model: ChatModel, weights: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> None:
        self.model = model
        self.weights = weights

    async def evaluate(self, query: str, answer: str, sources: Sequence[str] | None = None) -> FactorResult:

        prompt = SELF_EVAL_PROMPT.format(query=query, answer=answer, sources=_sources_block(sources))
        try:
            completion = await self.model.complete(prompt, schema=SelfEvalOutput, temperature=0.0, max_tokens=160)
        except ModelError as exc:
            return failed_call("llm_self_confidence", self.FALLBACK, exc)
        p = completion.parsed or {}
        wa, wr, ws = self.weights
        value = (wa * p["accuracy"] + wr * p["relevance"] + ws * p["style"]) / (wa + wr + ws)
        return FactorResult(
            name="llm_self_confidence",
            value=min(1.0, max(0.0, value)),
            call_id=completion.call_id,
            flags=completion.flags,
            detail=f"accuracy {p['accuracy']:.2f}, relevance {p['relevance']:.2f}, style {p['style']:.2f}: "
            f"{p['reason']}",
        )


class LikelihoodSelfEvaluator:
    """The self-evaluation of a model that scores instead of writing: p(the answer is supported) from the
    PMI of "The answer is correct / supported" against "… wrong / made up" (engine/confidence/likelihood.py), through
    the fitted map `data/calibration/confidence.likelihood.<model>.json` (learnt on a calibration split).
    Without a map the PMI is squashed by a sigmoid and flagged `uncalibrated`; a failed call gives the
    same 0.5 fallback as the generating evaluator, flagged."""

    FALLBACK = 0.5

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def evaluate(self, query: str, answer: str, sources: Sequence[str] | None = None) -> FactorResult:

        try:
            features, scores = await confidence_features(self.model, query, answer, list(sources or []))
        except ModelError as exc:
            return failed_call("llm_self_confidence", self.FALLBACK, exc, keep_flags=False)
        cal = judgemaps.load_calibration(CONFIDENCE, self.model.model_id)
        pmi = features["pmi_supported"]
        if not math.isfinite(pmi):
            return FactorResult(
                name="llm_self_confidence",
                value=self.FALLBACK,
                flagged=True,
                call_id=scores.call_id,
                detail=f"fallback {self.FALLBACK}: invalid likelihood feature",
                flags=["invalid:likelihood_features"],
            )
        value = cal.apply("supported", features) if cal else 1 / (1 + math.exp(-pmi))
        flags = ["likelihood", f"calibration:{cal.version}" if cal else "uncalibrated"]
        return FactorResult(
            name="llm_self_confidence",
            value=round(value, 4),
            call_id=scores.call_id,
            flags=flags,
            detail=f"p(supported) {value:.2f} by likelihood (PMI {pmi:+.2f})",
        )


class SignalSelfEvaluator:
    """The default self-evaluation and query coverage (engine/confidence/signals.py): white-box signals of
    SmolLM2 and the multilingual embedder through the maps fitted on the labelled split. One reading gives both
    factors; a failed call, a missing or refused map or a non-finite signal gives each factor its documented
    fallback (0.5 and 0.0), flagged, with why."""

    def __init__(self, reader: ChatModel, embedder: TextEmbedder, floor: float = 0.6) -> None:
        self.reader = reader
        self.embedder = embedder
        self.floor = floor  # the settings' include_self_confidence_above: see `on_seed_scale`

    @staticmethod
    def fallbacks(why: str, flags: list[str], call_id: int | None = None) -> tuple[FactorResult, FactorResult]:
        return (
            FactorResult(
                name="llm_self_confidence",
                value=LLMSelfEvaluator.FALLBACK,
                flagged=True,
                call_id=call_id,
                detail=f"fallback {LLMSelfEvaluator.FALLBACK}: {why}",
                flags=flags,
            ),
            FactorResult(
                name="query_coverage",
                value=QueryCoverageCalculator.FALLBACK,
                flagged=True,
                call_id=call_id,
                detail=f"fallback {QueryCoverageCalculator.FALLBACK} (left out of the mean): {why}",
                flags=flags,
            ),
        )

    async def evaluate(
        self, query: str, answer: str, sources: Sequence[str] | None = None
    ) -> tuple[FactorResult, FactorResult, Signals | None]:
        sources = list(sources or [])
        try:
            cal = judgemaps.load_calibration(SIGNALS, SIGNALS_ID, check=signals_problem)
        except judgemaps.MapError as exc:
            return (*self.fallbacks(f"the signals' map cannot be read: {exc}", ["map_invalid"]), None)
        if cal is None:
            return (*self.fallbacks(f"no fitted map {SIGNALS}.{SIGNALS_ID}.json", ["uncalibrated"]), None)
        try:
            signals = await read_signals(self.reader, self.embedder, query, answer, sources)
        except ModelError as exc:
            return (*self.fallbacks(f"{exc.kind}: {exc.message}", [exc.kind]), None)
        first = signals.call_ids[0] if signals.call_ids else None
        try:
            reading = read_answer(cal, signals, sources)
        except ValueError as exc:
            return (*self.fallbacks(f"invalid signal: {exc}", ["invalid:signals"], first), signals)
        flags = reading.flags + judgemaps.map_flags(cal)
        value = on_seed_scale(reading.supported, self.floor)
        return (
            FactorResult(
                name="llm_self_confidence",
                value=value,
                call_id=first,
                flags=flags,
                detail=f"{reading.detail}; on the seed's scale {value:.2f} (= {self.floor:g} + "
                f"{1 - self.floor:g} × p: counted, and p = 0.5 sits at {self.floor + (1 - self.floor) / 2:.2f})",
                probability=round(reading.supported, 4),
            ),
            FactorResult(
                name="query_coverage",
                value=round(reading.coverage, 4),
                call_id=first,
                flags=flags,
                detail=reading.coverage_detail,
            ),
            signals,
        )


class QueryCoverageCalculator:
    """The model judges how much of the question the answer covers.

    On failure the factor is 0.0 and flagged: at ≤ 0.1 coverage is left out of the weighted mean, so an
    unknown coverage neither raises nor lowers the score.
    """

    FALLBACK = 0.0

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def calculate(self, query: str, answer: str) -> FactorResult:

        prompt = COVERAGE_PROMPT.format(query=query, answer=answer)
        try:
            completion = await self.model.complete(prompt, schema=CoverageOutput, temperature=0.0, max_tokens=120)
        except ModelError as exc:
            return failed_call("query_coverage", self.FALLBACK, exc, note=" (left out of the mean)")
        p = completion.parsed or {}
        return FactorResult(
            name="query_coverage",
            value=p["coverage"],
            call_id=completion.call_id,
            flags=completion.flags,
            detail=f"missing: {p['missing'] or '—'}",
        )


class SourceAgreementCalculator:
    """Mean pairwise cosine similarity of the texts' embeddings (packaged MiniLM, batched); < 2 texts → 1.0."""

    def __init__(self, embedder: TextEmbedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> TextEmbedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def calculate(self, texts: Sequence[str]) -> float:
        texts = [t for t in texts if t and t.strip()]
        if len(texts) < 2:
            return 1.0

        sims = cosine_matrix(self.embedder.embed(texts))
        upper = sims[np.triu_indices(len(texts), k=1)]
        return float(min(1.0, max(0.0, upper.mean())))


class SamplingConsistency:
    """SelfCheckGPT-style: k sampled answers to the same query; their agreement stands in for source
    agreement when there are no sources (the k samples then count as k sources)."""

    def __init__(self, model: ChatModel, agreement: SourceAgreementCalculator, k: int = 3, temperature: float = 0.8):
        self.model = model
        self.agreement = agreement
        self.k = k
        self.temperature = temperature

    async def calculate(self, query: str, answer: str | None = None) -> tuple[FactorResult, list[str]]:

        samples: list[str] = []
        errors: list[str] = []
        for i in range(self.k):
            try:
                c = await self.model.complete(query, temperature=self.temperature, max_tokens=96, seed=1000 + i)
                samples.append(c.text)
            except ModelError as exc:
                errors.append(exc.kind)
        texts = ([answer] if answer else []) + samples
        if len(samples) < 2:
            return FactorResult(
                name="sampling_consistency",
                value=0.0,
                flagged=True,
                detail=f"too few samples ({len(samples)}/{self.k}); errors: {errors}",
            ), samples
        value = self.agreement.calculate(texts)
        return FactorResult(
            name="sampling_consistency", value=value, detail=f"agreement of {len(texts)} texts ({len(samples)} samples)"
        ), samples
