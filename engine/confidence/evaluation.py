"""The `confidence.evaluate` run kind: one answer's LLM and embedding factors computed, scored and decided as a
stored run (`evaluate`; `evaluate_answer` for a model object at hand), and whether its result can be trusted
(`answer_judged`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine import runctx
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.judges import (
    FactorResult,
    LikelihoodSelfEvaluator,
    LLMSelfEvaluator,
    QueryCoverageCalculator,
    SamplingConsistency,
    SignalSelfEvaluator,
    SourceAgreementCalculator,
)
from engine.confidence.levels import ActionDecision, InterventionLevel, decide_action
from engine.confidence.score import ConfidenceScore, calculate
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings
from engine.confidence.signals import EMBEDDER, READER, Signals
from engine.embeddings import RecordedEmbedder
from engine.events import async_run_context
from models.errors import ModelError

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store
    from models.base import ChatModel


class LiveEvaluation(BaseModel):
    run_id: str
    factors: ConfidenceFactors
    results: list[FactorResult]
    score: ConfidenceScore
    decision: ActionDecision
    samples: list[str] = Field(default_factory=list)


class EvaluationConfig(BaseModel):
    """`confidence.evaluate`: one answer's LLM and embedding factors, scored under these settings."""

    model_config = ConfigDict(extra="forbid")

    model_id: str
    query: str = Field(min_length=1)
    answer: str
    sources: list[str] = Field(default_factory=list)
    sampling_k: int = Field(0, ge=0, le=10, description="answers to sample for a consistency factor (no sources)")
    self_eval: Literal["signals", "generate", "likelihood"] = Field(
        "signals",
        description="signals: SmolLM2's and the multilingual embedder's signals through the maps fitted on the "
        "labelled split (self-confidence and query coverage; the default) · generate: the model writes ratings · "
        "likelihood: the model's PMI of 'the answer is correct'",
    )
    settings: ConfidenceSettings = Field(default_factory=ConfidenceSettings)

    @field_validator("sources")
    @classmethod
    def _no_blank_sources(cls, value: list[str]) -> list[str]:
        return [s for s in value if s.strip()]


async def evaluate(
    config: EvaluationConfig,
    models: ModelSource,
    store: Store,
    *,
    agreement: SourceAgreementCalculator | None = None,
    base_factors: ConfidenceFactors | None = None,
    sinks: list[Any] | None = None,
) -> LiveEvaluation:
    """Compute the LLM and embedding factors for one answer, score it and decide the level, as a stored run of
    kind `confidence.evaluate`; progress counts the factors."""
    model = models(config.model_id)
    sources = config.sources
    # the embeddings are calls of the run: replayed where the model replays (a demo, a replay: exact on any CPU)
    agreement = agreement or SourceAgreementCalculator(RecordedEmbedder.for_model(model))
    settings = config.settings
    with_agreement = len(sources) >= 2
    with_sampling = config.sampling_k >= 2 and not sources
    async with async_run_context(store, "confidence.evaluate", config.model_dump(mode="json"), sinks=sinks) as run:
        runctx.progress(total=2 + with_agreement + with_sampling, step="self-evaluation")

        def first(result: FactorResult) -> None:
            run.emit("confidence_factor", **result.model_dump())
            runctx.progress(advance=1, step="query coverage")

        self_result, coverage, signals = await answer_factors(config, models, model, on_self=first)
        if signals is not None:
            run.emit("confidence_signals", features=signals.features, own_answer=signals.own_answer)
        if config.self_eval == "signals":  # both factors from one reading: the first is told now
            first(self_result)
        run.emit("confidence_factor", **coverage.model_dump())
        runctx.progress(advance=1, step="source agreement" if with_agreement else "sampling")
        results = [self_result, coverage]
        update: dict[str, Any] = {
            "llm_self_confidence": self_result.value,
            "query_coverage": coverage.value,
            "source_count": len(sources),
        }
        if with_agreement:
            value = agreement.calculate(sources)
            agree = FactorResult(name="source_agreement", value=value, detail=f"{len(sources)} sources")
            results.append(agree)
            run.emit("confidence_factor", **agree.model_dump())
            update["source_agreement"] = value
            runctx.progress(advance=1)
        samples: list[str] = []
        if with_sampling:
            consistency, samples = await SamplingConsistency(model, agreement, k=config.sampling_k).calculate(
                config.query, config.answer
            )
            results.append(consistency)
            run.emit("confidence_factor", **consistency.model_dump(), samples=samples)
            if not consistency.flagged:
                update |= {"source_agreement": consistency.value, "source_count": config.sampling_k}
            runctx.progress(advance=1)
        factors = (base_factors or ConfidenceFactors()).model_copy(update=update)
        score = calculate(factors, settings)
        decision = decide_action(score, settings)
        run.emit(
            "confidence_scored",
            factors=factors.model_dump(),
            score=score.model_dump(),
            decision=decision.model_dump(mode="json"),
        )
        live = LiveEvaluation(
            run_id=run.run_id, factors=factors, results=results, score=score, decision=decision, samples=samples
        )
        flagged = [r.name for r in results if r.flagged]
        trusted = answer_judged(factors, settings, flagged)
        run.summary = {
            "score": score.score,
            "level": decision.level.value,
            # what the agent does: the score's level, unless nothing judged the answer itself — then a person
            # checks it (ESCALATE), never a SILENT that reads as "fine" on a result that cannot be trusted
            "trusted": trusted,
            "acted_level": decision.level.value if trusted else InterventionLevel.ESCALATE.value,
            "flagged": flagged,
            "result": live.model_dump(mode="json", exclude={"run_id"}),
        }
    return live


async def answer_factors(
    config: EvaluationConfig,
    models: ModelSource,
    model: ChatModel,
    on_self: Callable[[FactorResult], object] | None = None,
) -> tuple[FactorResult, FactorResult, Signals | None]:
    """The two factors that judge the answer itself: by the signals (one reading of SmolLM2 and the embedder, the
    default), or by the evaluating model (its self-evaluation, then its coverage rating; `on_self` hears the first
    before the second call starts, so a watcher sees it and a cancel lands between them)."""
    if config.self_eval == "signals":
        try:
            reader = models(READER)
        except (KeyError, ModelError) as exc:
            return (
                *SignalSelfEvaluator.fallbacks(f"{READER} cannot be built here: {exc}", ["reader_unavailable"]),
                None,
            )
        evaluator = SignalSelfEvaluator(
            reader, RecordedEmbedder.for_model(reader, EMBEDDER), config.settings.include_self_confidence_above
        )
        return await evaluator.evaluate(config.query, config.answer, config.sources)
    judge = LikelihoodSelfEvaluator(model) if config.self_eval == "likelihood" else LLMSelfEvaluator(model)
    self_result = await judge.evaluate(config.query, config.answer, config.sources)
    if on_self is not None:
        on_self(self_result)
    return self_result, await QueryCoverageCalculator(model).calculate(config.query, config.answer), None


ANSWER_JUDGES = ("llm_self_confidence", "query_coverage")  # the factors that judge the answer itself


def answer_judged(factors: ConfidenceFactors, settings: ConfidenceSettings, flagged: Sequence[str]) -> bool:
    """Whether a live result can be trusted: at least one factor that judges the answer itself (self-confidence,
    query coverage) counted and did not fall back. Without one, the score rests on evidence that cannot tell a
    right answer from a wrong one (source agreement, a tool success of 1 when no tool ran)."""
    used = {n for n, c in calculate(factors, settings).breakdown.items() if c.included}
    return any(n in used and n not in flagged for n in ANSWER_JUDGES)


async def evaluate_answer(
    store: Store,
    model: ChatModel,
    query: str,
    answer: str,
    sources: Sequence[str] | None = None,
    *,
    settings: ConfidenceSettings = DEFAULT_SETTINGS,
    agreement: SourceAgreementCalculator | None = None,
    sampling_k: int = 0,
    base_factors: ConfidenceFactors | None = None,
    sinks: list[EventSink] | None = None,
    self_eval: Literal["signals", "generate", "likelihood"] = "signals",
) -> LiveEvaluation:
    """`evaluate` for a model object at hand (tests, scripts): the same run, the same stored config."""
    config = EvaluationConfig(
        model_id=model.model_id,
        query=query,
        answer=answer,
        sources=list(sources or []),
        sampling_k=sampling_k,
        self_eval=self_eval,
        settings=settings,
    )
    return await evaluate(config, lambda _id: model, store, agreement=agreement, base_factors=base_factors, sinks=sinks)


async def generate_answer(model: ChatModel, query: str, max_tokens: int = 160) -> str:
    completion = await model.complete(query, temperature=0.0, max_tokens=max_tokens)
    return completion.text.strip()
