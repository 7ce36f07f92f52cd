"""Confidence (GRACE): factors → score with breakdown and penalties → intervention level.

Three layers, as every mechanism here:
1. Config — `ConfidenceSettings`: every weight, inclusion condition, penalty factor, rounding and level
   threshold is a setting. The defaults reproduce the origin's calculation exactly; unlike the origin,
   the configured weights are really used.
2. Decisions — `calculate`, `decide_action`, `aggregate`, and `score_arrays` (the same calculation
   vectorised over tables, for calibration, threshold tuning and the benchmark). Pure functions.
3. Orchestration — the LLM and embedding factors (`LLMSelfEvaluator`, `QueryCoverageCalculator`,
   `SourceAgreementCalculator`, `SamplingConsistency`) and `evaluate_answer`, which records a run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from engine import judgemaps, runctx, stats
from engine.calibration import calibrate, rank_auc, risk_at
from engine.embeddings import RecordedEmbedder, TextEmbedder, cosine_matrix, get_embedder
from engine.events import async_run_context
from engine.inputs import Problems, iter_lines, problem_lines
from engine.likelihood import CONFIDENCE, confidence_features
from models.errors import ModelError

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store
    from models.base import ChatModel

# -- config ---------------------------------------------------------------------------------------


class ConfidenceFactors(BaseModel):
    """The raw evidence for one step. Unknown, ill-typed, out-of-range (scores and rates outside [0, 1],
    negative counts, NaN, infinity) and inconsistent fields (more successes than executions) are
    refused, naming the field: `{"llm_self_confidence": 1e308}` must not score SILENT, nor a rate of −5
    turn its penalty into ×−0.2."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    search_result_count: int = Field(default=0, ge=0)
    search_avg_score: float = Field(default=0.0, ge=0.0, le=1.0)
    search_max_score: float = Field(default=0.0, ge=0.0, le=1.0)
    search_score_variance: float = Field(default=1.0, ge=0.0)
    source_agreement: float = Field(default=0.0, ge=0.0, le=1.0)
    source_count: int = Field(default=0, ge=0)
    llm_self_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    tool_success_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    tool_execution_count: int = Field(default=0, ge=0)
    tool_success_count: int = Field(default=0, ge=0)
    query_coverage: float = Field(default=0.0, ge=0.0, le=1.0)
    is_search_step: bool = False

    @field_validator("tool_success_count")
    @classmethod
    def _successes_within_executions(cls, value: int, info: ValidationInfo) -> int:
        executed = info.data.get("tool_execution_count")
        if executed is not None and value > executed:
            raise ValueError(
                f"{value} successes of {executed} executions: tool_success_count must not exceed tool_execution_count"
            )
        return value


FACTOR_FIELDS = list(ConfidenceFactors.model_fields)
UNIT_FACTORS = [
    k for k, f in ConfidenceFactors.model_fields.items() if any(getattr(m, "le", None) == 1.0 for m in f.metadata)
]  # scores and rates in [0, 1]
COUNT_FACTORS = [k for k, f in ConfidenceFactors.model_fields.items() if f.annotation in (int, "int")]


class FactorError(ValueError):
    """Factors that cannot be scored; the message names every field at fault."""


def parse_factors(data: object) -> ConfidenceFactors:
    """Factors from a mapping; FactorError names each bad field (`field 'x': why`)."""
    try:
        return ConfidenceFactors.model_validate(data)
    except ValidationError as exc:
        raise FactorError(
            "; ".join(
                f"field '{'.'.join(map(str, e['loc'])) or '(factors)'}': {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
        ) from None


class LevelThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    silent: float = Field(default=0.9, ge=0, le=1)
    notify: float = Field(default=0.7, ge=0, le=1)
    confirm: float = Field(default=0.4, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> LevelThresholds:
        if not self.silent >= self.notify >= self.confirm:
            raise ValueError("thresholds must satisfy silent ≥ notify ≥ confirm")
        return self


class ConfidenceSettings(BaseModel):
    """Every number of the calculation. Defaults = the origin's behaviour."""

    model_config = ConfigDict(extra="forbid")

    # search quality
    search_good_max: float = Field(0.6, description="max score at or above which quality = max score")
    search_max_weight: float = 0.7
    search_avg_weight: float = 0.3
    variance_penalty_factor: float = 0.3
    variance_penalty_cap: float = 0.15
    # weighted mean of a non-search step: weight and the condition that includes each factor
    weight_search_quality: float = Field(0.6, ge=0)
    weight_tool_success: float = Field(0.4, ge=0)
    weight_source_agreement: float = Field(0.2, ge=0)
    weight_self_confidence: float = Field(0.3, ge=0)
    weight_query_coverage: float = Field(0.1, ge=0)
    include_search_quality_above: float = 0.0
    include_agreement_min_sources: int = Field(2, ge=0, description="source agreement counts from this many sources")
    include_self_confidence_above: float = 0.6
    include_query_coverage_above: float = 0.1
    # penalties, applied in this order
    penalty_search_no_results: float = 0.5
    penalty_tool_base: float = 0.8
    penalty_tool_slope: float = 0.2
    penalty_no_sources: float = 0.7
    no_sources_exempt_self_confidence: float = 0.8
    # output
    decimals: int = Field(3, ge=0, le=12)
    thresholds: LevelThresholds = Field(default_factory=LevelThresholds)


DEFAULT_SETTINGS = ConfidenceSettings()


class InterventionLevel(StrEnum):
    SILENT = "SILENT"
    NOTIFY = "NOTIFY"
    CONFIRM = "CONFIRM"
    ESCALATE = "ESCALATE"


SUGGESTED_ACTIONS = {
    InterventionLevel.SILENT: "proceed",
    InterventionLevel.NOTIFY: "proceed with status",
    InterventionLevel.CONFIRM: "ask confirmation",
    InterventionLevel.ESCALATE: "request clarification",
}


class FactorContribution(BaseModel):
    value: float
    weight: float
    included: bool
    contribution: float = Field(description="weight × value / sum of weights used (0 when not included)")


class Penalty(BaseModel):
    name: str
    factor: float
    before: float
    after: float


class ConfidenceScore(BaseModel):
    score: float
    base: float
    breakdown: dict[str, FactorContribution]
    penalties: list[Penalty]
    reason: str
    is_search_step: bool


class ActionDecision(BaseModel):
    level: InterventionLevel
    score: float
    reason: str
    suggested_action: str


# -- decisions ------------------------------------------------------------------------------------


def search_quality(f: ConfidenceFactors, s: ConfidenceSettings = DEFAULT_SETTINGS) -> float:
    if f.search_result_count == 0 and f.search_max_score == 0:
        return 0.0
    if f.search_max_score >= s.search_good_max:
        return f.search_max_score
    variance_penalty = min(s.variance_penalty_cap, s.variance_penalty_factor * f.search_score_variance)
    return max(
        0.0, s.search_max_weight * f.search_max_score + s.search_avg_weight * f.search_avg_score - variance_penalty
    )


def tool_success(f: ConfidenceFactors) -> float:
    if f.tool_execution_count > 0:
        return f.tool_success_count / f.tool_execution_count
    return f.tool_success_rate


def _included(f: ConfidenceFactors, sq: float, s: ConfidenceSettings) -> dict[str, tuple[float, float, bool]]:
    """factor → (value, weight, included) for the weighted mean of a non-search step."""
    return {
        "search_quality": (sq, s.weight_search_quality, sq > s.include_search_quality_above),
        "tool_success": (tool_success(f), s.weight_tool_success, True),
        "source_agreement": (
            f.source_agreement,
            s.weight_source_agreement,
            f.source_count >= s.include_agreement_min_sources,
        ),
        "llm_self_confidence": (
            f.llm_self_confidence,
            s.weight_self_confidence,
            f.llm_self_confidence > s.include_self_confidence_above,
        ),
        "query_coverage": (
            f.query_coverage,
            s.weight_query_coverage,
            f.query_coverage > s.include_query_coverage_above,
        ),
    }


def _penalties(f: ConfidenceFactors, s: ConfidenceSettings) -> list[tuple[str, float]]:
    found: list[tuple[str, float]] = []
    if f.is_search_step and f.search_result_count == 0:
        found.append(("search step without results", s.penalty_search_no_results))
    if f.tool_success_rate < 1.0:
        found.append(
            (
                f"tool success rate {f.tool_success_rate:g}",
                s.penalty_tool_base + s.penalty_tool_slope * f.tool_success_rate,
            )
        )
    if f.source_count == 0:
        exempt = (f.is_search_step and f.search_result_count > 0) or (
            not f.is_search_step and f.llm_self_confidence >= s.no_sources_exempt_self_confidence
        )
        if not exempt:
            found.append(("no sources", s.penalty_no_sources))
    return found


def calculate(factors: ConfidenceFactors, settings: ConfidenceSettings = DEFAULT_SETTINGS) -> ConfidenceScore:
    """The confidence of one step, with the breakdown and each penalty it went through."""
    s = settings
    sq = search_quality(factors, s)
    ts = tool_success(factors)
    breakdown: dict[str, FactorContribution] = {}
    if factors.is_search_step:
        base = sq * ts if ts < 1.0 else sq
        breakdown["search_quality"] = FactorContribution(value=sq, weight=1.0, included=True, contribution=sq)
        breakdown["tool_success"] = FactorContribution(
            value=ts, weight=1.0, included=ts < 1.0, contribution=base - sq if ts < 1.0 else 0.0
        )
        reason = f"search step: base = search quality {sq:.3f}" + (f" × tool success {ts:.3f}" if ts < 1 else "")
    else:
        parts = _included(factors, sq, s)
        used = {k: v for k, v in parts.items() if v[2]}
        total = sum(w for _, w, _ in used.values())
        base = sum(v * w for v, w, _ in used.values()) / total if total > 0 else 0.0
        for name, (value, weight, inc) in parts.items():
            breakdown[name] = FactorContribution(
                value=value,
                weight=weight,
                included=inc,
                contribution=(value * weight / total) if inc and total > 0 else 0.0,
            )
        reason = "weighted mean of " + ", ".join(f"{k} {v:.3f}×{w:g}" for k, (v, w, _) in used.items())
    score = base
    applied: list[Penalty] = []
    for name, factor in _penalties(factors, s):
        applied.append(Penalty(name=name, factor=factor, before=score, after=score * factor))
        score *= factor
    score = round(min(1.0, max(0.0, score)), s.decimals)
    if applied:
        reason += "; penalties: " + ", ".join(f"{p.name} ×{p.factor:.3g}" for p in applied)
    return ConfidenceScore(
        score=score,
        base=base,
        breakdown=breakdown,
        penalties=applied,
        reason=reason,
        is_search_step=factors.is_search_step,
    )


def decide_level(score: float, thresholds: LevelThresholds = DEFAULT_SETTINGS.thresholds) -> InterventionLevel:
    if score >= thresholds.silent:
        return InterventionLevel.SILENT
    if score >= thresholds.notify:
        return InterventionLevel.NOTIFY
    if score >= thresholds.confirm:
        return InterventionLevel.CONFIRM
    return InterventionLevel.ESCALATE


def decide_action(score: ConfidenceScore | float, settings: ConfidenceSettings = DEFAULT_SETTINGS) -> ActionDecision:
    """Map a score to an intervention level with the reason and the suggested action."""
    value = score.score if isinstance(score, ConfidenceScore) else float(score)
    t = settings.thresholds
    level = decide_level(value, t)
    bounds = {
        InterventionLevel.SILENT: f"≥ {t.silent:g}",
        InterventionLevel.NOTIFY: f"≥ {t.notify:g} and < {t.silent:g}",
        InterventionLevel.CONFIRM: f"≥ {t.confirm:g} and < {t.notify:g}",
        InterventionLevel.ESCALATE: f"< {t.confirm:g}",
    }[level]
    reason = f"confidence {value:.3f} {bounds} → {level.value}"
    if isinstance(score, ConfidenceScore) and score.penalties:
        reason += f" (after {len(score.penalties)} penalt{'y' if len(score.penalties) == 1 else 'ies'})"
    return ActionDecision(level=level, score=value, reason=reason, suggested_action=SUGGESTED_ACTIONS[level])


AggregationMethod = Literal["mean", "min", "weighted"]


class ConfidenceAggregator:
    """Combine step scores of a plan: mean, min (the bottleneck), or weighted 1..n (later steps count more).

    With `critical_check`, a plan any of whose steps is below `critical_threshold` gets
    mean × `critical_factor` — the origin's rule, whatever the method.
    """

    METHODS: tuple[str, ...] = ("mean", "min", "weighted")

    def __init__(
        self, critical_check: bool = False, critical_threshold: float = 0.3, critical_factor: float = 0.7
    ) -> None:
        self.critical_check = critical_check
        self.critical_threshold = critical_threshold
        self.critical_factor = critical_factor

    def aggregate(self, scores: Sequence[ConfidenceScore | float], method: str = "mean") -> float:
        if method not in self.METHODS:
            raise ValueError(f"unknown aggregation method '{method}' — use one of {', '.join(self.METHODS)}")
        values = [s.score if isinstance(s, ConfidenceScore) else float(s) for s in scores]
        if not values:
            return 0.0
        mean = sum(values) / len(values)
        if self.critical_check and any(v < self.critical_threshold for v in values):
            return mean * self.critical_factor
        if method == "mean":
            return mean
        if method == "min":
            return min(values)
        weights = range(1, len(values) + 1)
        return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)


# -- the same calculation over tables ------------------------------------------------------------


def score_arrays(columns: Mapping[str, Any], settings: ConfidenceSettings = DEFAULT_SETTINGS) -> np.ndarray:
    """Scores of many factor rows at once (columns as arrays; missing columns take the defaults).

    Gives the same numbers as `calculate`; used by calibration, the what-if threshold views and the
    benchmark.
    """
    s = settings
    n = len(next(iter(columns.values()))) if columns else 0
    defaults = ConfidenceFactors()

    def col(name: str) -> np.ndarray:
        if name in columns:
            return np.asarray(columns[name], dtype=np.float64)
        return np.full(n, float(getattr(defaults, name)), dtype=np.float64)

    check_columns({name: col(name) for name in FACTOR_FIELDS if name != "is_search_step"})

    count, avg, mx, var = (
        col("search_result_count"),
        col("search_avg_score"),
        col("search_max_score"),
        col("search_score_variance"),
    )
    agreement, n_sources = col("source_agreement"), col("source_count")
    self_conf, rate = col("llm_self_confidence"), col("tool_success_rate")
    executed, succeeded = col("tool_execution_count"), col("tool_success_count")
    coverage, is_search = col("query_coverage"), col("is_search_step").astype(bool)

    blended = np.maximum(
        0.0,
        s.search_max_weight * mx
        + s.search_avg_weight * avg
        - np.minimum(s.variance_penalty_cap, s.variance_penalty_factor * var),
    )
    sq = np.where((count == 0) & (mx == 0), 0.0, np.where(mx >= s.search_good_max, mx, blended))
    with np.errstate(divide="ignore", invalid="ignore"):
        ts = np.where(executed > 0, succeeded / np.where(executed > 0, executed, 1), rate)

    search_base = np.where(ts < 1.0, sq * ts, sq)
    terms = [
        (sq, s.weight_search_quality, sq > s.include_search_quality_above),
        (ts, s.weight_tool_success, np.ones(n, dtype=bool)),
        (agreement, s.weight_source_agreement, n_sources >= s.include_agreement_min_sources),
        (self_conf, s.weight_self_confidence, self_conf > s.include_self_confidence_above),
        (coverage, s.weight_query_coverage, coverage > s.include_query_coverage_above),
    ]
    num = sum(np.where(inc, v * w, 0.0) for v, w, inc in terms)
    den = sum(np.where(inc, w, 0.0) for _, w, inc in terms)
    with np.errstate(divide="ignore", invalid="ignore"):
        other_base = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    score = np.where(is_search, search_base, other_base)

    score = np.where(is_search & (count == 0), score * s.penalty_search_no_results, score)
    score = np.where(rate < 1.0, score * (s.penalty_tool_base + s.penalty_tool_slope * rate), score)
    exempt = (is_search & (count > 0)) | (~is_search & (self_conf >= s.no_sources_exempt_self_confidence))
    score = np.where((n_sources == 0) & ~exempt, score * s.penalty_no_sources, score)
    # Python's round (correctly rounded on the exact binary value), not np.round (scale, round, unscale),
    # so ties such as 0.0945 come out exactly as in `calculate`.
    clipped = np.clip(score, 0.0, 1.0).tolist()
    return np.array([round(v, s.decimals) for v in clipped], dtype=np.float64)


def check_columns(columns: Mapping[str, np.ndarray]) -> None:
    """The table form of ConfidenceFactors' checks: FactorError names the field and the first bad row."""

    def first(mask: np.ndarray) -> int | None:
        bad = np.flatnonzero(mask)
        return int(bad[0]) if len(bad) else None

    for name, values in columns.items():
        unit = name in UNIT_FACTORS
        row = first(
            ~np.isfinite(values)
            | (values < 0)
            | ((values > 1) if unit else False)
            | ((values != np.floor(values)) if name in COUNT_FACTORS else False)
        )
        if row is not None:
            want = "a number in [0, 1]" if unit else "a whole number ≥ 0" if name in COUNT_FACTORS else "a number ≥ 0"
            raise FactorError(f"field '{name}' row {row}: {values[row]!r} is not {want}")
    executed, succeeded = columns.get("tool_execution_count"), columns.get("tool_success_count")
    if executed is not None and succeeded is not None:
        row = first(succeeded > executed)
        if row is not None:
            raise FactorError(
                f"field 'tool_success_count' row {row}: {succeeded[row]:g} successes of {executed[row]:g} executions"
            )


def levels_of(scores: np.ndarray, thresholds: LevelThresholds = DEFAULT_SETTINGS.thresholds) -> np.ndarray:
    """Level names for an array of scores."""
    return np.select(
        [scores >= thresholds.silent, scores >= thresholds.notify, scores >= thresholds.confirm],
        ["SILENT", "NOTIFY", "CONFIRM"],
        default="ESCALATE",
    )


# -- orchestration: the LLM and embedding factors --------------------------------------------------


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
            return FactorResult(
                name="llm_self_confidence",
                value=self.FALLBACK,
                flagged=True,
                detail=f"fallback {self.FALLBACK}: {exc.kind}: {exc.message}",
                flags=list(getattr(exc, "flags", [])),
            )
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
    PMI of "The answer is correct / supported" against "… wrong / made up" (engine/likelihood.py), through
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
            return FactorResult(
                name="llm_self_confidence",
                value=self.FALLBACK,
                flagged=True,
                detail=f"fallback {self.FALLBACK}: {exc.kind}: {exc.message}",
            )
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
            return FactorResult(
                name="query_coverage",
                value=self.FALLBACK,
                flagged=True,
                detail=f"fallback {self.FALLBACK} (left out of the mean): {exc.kind}: {exc.message}",
                flags=list(getattr(exc, "flags", [])),
            )
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
    self_eval: Literal["generate", "likelihood"] = "generate"
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
        evaluator = LikelihoodSelfEvaluator(model) if config.self_eval == "likelihood" else LLMSelfEvaluator(model)
        self_result = await evaluator.evaluate(config.query, config.answer, sources)
        run.emit("confidence_factor", **self_result.model_dump())
        runctx.progress(advance=1, step="query coverage")
        coverage = await QueryCoverageCalculator(model).calculate(config.query, config.answer)
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
    self_eval: Literal["generate", "likelihood"] = "generate",
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


# -- calibration against labelled outcomes: one parser, one report, one entry point ---------------------------


class LabelledItem(BaseModel):
    """One labelled step: its factors and whether acting on it was right."""

    model_config = ConfigDict(extra="forbid")

    id: str
    query: str = ""
    correct: bool
    factors: ConfidenceFactors


class LabelError(ValueError):
    """A labelled set with bad rows; `problems` names each by line. Nothing is imported."""

    def __init__(self, problems: list[str]) -> None:

        self.problems = problems
        super().__init__(problem_lines(problems, "bad rows, nothing imported:"))


def parse_labels(text: str, source: str = "labels") -> list[LabelledItem]:
    """Labelled items from JSONL ({factors, correct, id?, query?} a line); every bad line is named
    (`source:N: why`, a factor by its field) and nothing is imported. An empty text gives no items."""

    items: list[LabelledItem] = []
    problems = Problems()
    for number, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("correct"), bool):
                raise ValueError("needs a boolean 'correct'")
            factors = parse_factors(row.get("factors", {}))
        except ValueError as exc:  # not JSON, no boolean 'correct', or a FactorError naming the field
            problems.append(f"{source}:{number}: {str(exc).splitlines()[0]}")
            continue
        items.append(
            LabelledItem(
                id=str(row.get("id") or f"line-{number}"),
                query=str(row.get("query") or ""),
                correct=row["correct"],
                factors=factors,
            )
        )
    if problems:
        raise LabelError(problems)
    return items


LEVEL_NAMES = ("SILENT", "NOTIFY", "CONFIRM", "ESCALATE")


def calibration_report(
    items: Sequence[LabelledItem], settings: ConfidenceSettings = DEFAULT_SETTINGS, bins: int = 10
) -> dict[str, Any]:
    """Scores of the labelled items under `settings`, their reliability bins, ECE, risk–coverage (with each
    level threshold marked), the share of items per level and the accuracy per level."""

    if not items:
        raise ValueError("no labelled items")
    columns = {name: np.asarray([getattr(i.factors, name) for i in items]) for name in FACTOR_FIELDS}
    scores = score_arrays(columns, settings).tolist()
    correct = [i.correct for i in items]
    report = calibrate(scores, correct, bins)
    t = settings.thresholds
    levels = levels_of(np.asarray(scores), t).tolist()
    counts = {lvl: levels.count(lvl) for lvl in LEVEL_NAMES}
    return {
        "items": [
            {"id": i.id, "query": i.query, "score": s, "level": lvl, "correct": c}
            for i, s, lvl, c in zip(items, scores, levels, correct, strict=True)
        ],
        "n": report.n,
        "accuracy": report.accuracy,
        "ece": report.ece,
        "aurc": report.aurc,
        **score_quality(scores, correct, counts["SILENT"] + counts["NOTIFY"]),
        "bins": [b.model_dump() for b in report.bins],
        "risk_coverage": [p.model_dump() for p in report.risk_coverage],
        "thresholds": {
            name: risk_at(scores, correct, value).model_dump()
            for name, value in (("silent", t.silent), ("notify", t.notify), ("confirm", t.confirm))
        },
        "level_shares": {lvl: counts[lvl] / len(levels) for lvl in LEVEL_NAMES},
        "level_counts": counts,
        "accuracy_by_level": {
            lvl: (
                sum(c for c, at in zip(correct, levels, strict=True) if at == lvl) / counts[lvl]
                if counts[lvl]
                else None
            )
            for lvl in LEVEL_NAMES
        },
    }


def score_quality(scores: Sequence[float], correct: Sequence[bool], proceeded: int) -> dict[str, Any]:
    """The figures' 95 % intervals, and two more ways to read the scores: AUC (do right answers score higher?)
    and the Brier score (the score read as P(right)). Wilson for the accuracy and the proceed rate (the share
    acted on without asking: SILENT or NOTIFY, as the experiments count it), a seeded bootstrap over items
    for ECE, AURC, AUC and Brier (engine/stats.py)."""

    n = len(scores)
    s, c = np.asarray(scores, float), np.asarray(correct, bool)
    auc = rank_auc(s[c].tolist(), s[~c].tolist())

    def boot(statistic: stats.Stat) -> list[float] | None:
        interval = stats.bootstrap(statistic)[1]
        return interval.as_list() if interval else None

    accuracy_ci, proceed_ci = stats.wilson(int(c.sum()), n), stats.wilson(proceeded, n)
    return {
        "accuracy_ci": accuracy_ci.as_list() if accuracy_ci else None,
        "ece_ci": boot(stats.w_ece(s, c)),
        "aurc_ci": boot(stats.w_aurc(s, c)),
        "auc": None if auc is None else round(auc, 4),
        "auc_ci": boot(stats.w_auc(s, c)),
        "brier": round(float(np.mean((s - c) ** 2)), 4),
        "brier_ci": boot(stats.w_brier(s, c)),
        "proceed_rate": proceeded / n,
        "proceed_rate_ci": proceed_ci.as_list() if proceed_ci else None,
    }


class CalibrationConfig(BaseModel):
    """`confidence.calibrate`: a labelled set (its items are the input) scored under these settings."""

    model_config = ConfigDict(extra="forbid")

    labels: str = Field("", description="the labelled set's file name")
    items: list[LabelledItem] = Field(min_length=1)
    bins: int = Field(10, ge=2, le=50)
    settings: ConfidenceSettings = Field(default_factory=ConfidenceSettings)


class CalibrationResult(BaseModel):
    run_id: str
    report: dict[str, Any]


async def calibrate_labels(
    config: CalibrationConfig, models: ModelSource | None, store: Store, *, sinks: list[EventSink] | None = None
) -> CalibrationResult:
    """The calibration of the default (or given) scores against the labels as a stored run of kind
    `confidence.calibrate`. No model is called (`models` is unused; every entry point takes one)."""

    async with async_run_context(
        store, "confidence.calibrate", config.model_dump(mode="json"), name=config.labels, sinks=sinks
    ) as run:
        runctx.progress(total=len(config.items), step="scoring")
        report = calibration_report(config.items, config.settings, config.bins)
        runctx.progress(done=len(config.items), step="calibrated")
        run.emit("confidence_calibrated", **{k: v for k, v in report.items() if k != "items"})
        run.summary = {"n": report["n"], "ece": report["ece"], "aurc": report["aurc"], "result": report}
    return CalibrationResult(run_id=run.run_id, report=report)
