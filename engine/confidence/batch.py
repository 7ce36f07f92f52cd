"""The `confidence.eval` run kind: a labelled file of answers (`{"id", "query", "answer", "sources", "supported",
"language"}` a line) each judged as `confidence.evaluate` judges one — the self-evaluation and query coverage, the
sources' agreement, the score and its level — in one stored run with an event per item; its totals (AUC of the final
score and of p(supported) against "supported", the share of right answers that proceed and of wrong ones stopped,
by language and by whether the answer had sources, each with its interval) are computed from those lines only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine import runctx
from engine.confidence.evaluation import EvaluationConfig, answer_factors, answer_judged
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.figures import PROCEED, eval_totals
from engine.confidence.judges import FactorResult, SourceAgreementCalculator
from engine.confidence.levels import InterventionLevel, decide_action
from engine.confidence.score import calculate
from engine.confidence.settings import ConfidenceSettings
from engine.embeddings import RecordedEmbedder
from engine.events import async_run_context
from engine.inputs import InputError, first_problems, labelled_records, read_text

if TYPE_CHECKING:
    from engine.events import ModelSource
    from engine.store import Store

MAX_CASES = 5000


class AnswerCase(BaseModel):
    """One labelled answer. Unknown fields are refused, naming them (a typo such as `suported` is not a label)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=200)
    query: str = Field(min_length=1, max_length=20_000)
    answer: str = Field(max_length=20_000)
    sources: list[str] = Field(default_factory=list, max_length=50)
    supported: bool
    language: str = Field("", max_length=16)

    @field_validator("sources")
    @classmethod
    def _no_blank_sources(cls, value: list[str]) -> list[str]:
        if any(len(s) > 20_000 for s in value):
            raise ValueError("a source longer than 20,000 characters")
        return [s for s in value if s.strip()]


class CaseFileError(ValueError):
    """A labelled file that cannot be read; the message names the file and each bad line."""


def parse_cases(text: str, source: str) -> list[AnswerCase]:
    """Every line checked before any is judged: CaseFileError lists each bad line (first 10), duplicate ids too."""
    cases, problems = labelled_records(text, AnswerCase)
    if problems:
        raise CaseFileError(first_problems(source, problems))
    if not cases:
        raise CaseFileError(f"{source}: no labelled answers")
    if len(cases) > MAX_CASES:
        raise CaseFileError(f"{source}: {len(cases)} answers; at most {MAX_CASES} a run")
    return cases


def load_cases(path: Path) -> list[AnswerCase]:
    try:
        text = read_text(path)
    except InputError as exc:
        raise CaseFileError(str(exc)) from None
    return parse_cases(text, path.name)


class EvalConfig(BaseModel):
    """`confidence.eval`: the labelled answers (the input, stored with the run) and how they are judged."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="the file's name, as the run is named")
    cases: list[AnswerCase]
    model_id: str = Field("smollm2-135m", description="the evaluating model (generate / likelihood judges)")
    self_eval: Literal["signals", "generate", "likelihood"] = "signals"
    settings: ConfidenceSettings = Field(default_factory=ConfidenceSettings)


async def judge_case(
    case: AnswerCase, config: EvalConfig, models: ModelSource, agreement: SourceAgreementCalculator
) -> dict[str, Any]:
    """One answer judged as `confidence.evaluate` judges it (no sampling): its line of the run."""
    one = EvaluationConfig(
        model_id=config.model_id,
        query=case.query,
        answer=case.answer,
        sources=case.sources,
        self_eval=config.self_eval,
        settings=config.settings,
    )
    self_result, coverage, signals = await answer_factors(one, models, models(config.model_id))
    results: list[FactorResult] = [self_result, coverage]
    update: dict[str, Any] = {
        "llm_self_confidence": self_result.value,
        "query_coverage": coverage.value,
        "source_count": len(case.sources),
    }
    if len(case.sources) >= 2:
        update["source_agreement"] = agreement.calculate(case.sources)
    factors = ConfidenceFactors().model_copy(update=update)
    score = calculate(factors, config.settings)
    flagged = [r.name for r in results if r.flagged]
    level = decide_action(score, config.settings).level.value
    # what the agent does, as `confidence evaluate` acts: nothing judged the answer itself → a person checks it
    trusted = answer_judged(factors, config.settings, flagged)
    acted = level if trusted else InterventionLevel.ESCALATE.value
    return {
        "id": case.id,
        "language": case.language or "unknown",
        "sources": len(case.sources),
        "supported": case.supported,
        "score": score.score,
        "level": level,
        "trusted": trusted,
        "acted_level": acted,
        "proceeds": acted in PROCEED,
        # the judge's own p(supported) (the signals), or its value (the other judges); none for a fallback
        "p_supported": None
        if self_result.flagged
        else self_result.probability
        if self_result.probability is not None
        else self_result.value,
        "factors": {k: update[k] for k in ("llm_self_confidence", "query_coverage", "source_count")}
        | ({"source_agreement": update["source_agreement"]} if "source_agreement" in update else {}),
        "flagged": flagged,
        "detail": {r.name: r.detail for r in results},
        "signals": signals.features if signals is not None else {},
        "call_ids": signals.call_ids if signals is not None else [r.call_id for r in results if r.call_id],
    }


async def evaluate_cases(
    store: Store,
    config: EvalConfig,
    models: ModelSource,
    *,
    on_item: Callable[[dict[str, Any]], object] | None = None,
    sinks: list[Any] | None = None,
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Judge every labelled answer as one stored run of kind `confidence.eval` (an event per item, the totals as
    its summary); returns (run id, lines, totals). ModelErrors of one item are that item's flagged fallbacks."""
    base = models(config.model_id)
    agreement = SourceAgreementCalculator(RecordedEmbedder.for_model(base))
    lines: list[dict[str, Any]] = []
    name = f"confidence eval {config.source} ({config.self_eval})"
    async with async_run_context(
        store, "confidence.eval", config.model_dump(mode="json"), name=name, sinks=sinks
    ) as run:
        runctx.progress(total=len(config.cases), step="answers", unit="answers")
        for case in config.cases:
            line = await judge_case(case, config, models, agreement)
            lines.append(line)
            run.emit("confidence_eval_item", **line)
            if on_item:
                on_item(line)
            runctx.progress(advance=1)
        totals = eval_totals(lines)
        run.summary = totals
    return run.run_id, lines, totals
