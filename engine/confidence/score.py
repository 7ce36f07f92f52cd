"""The score of one step: search quality and tool success, the weighted mean of the included factors (or the
search step's base), the penalties in order, with the breakdown and the reason (`calculate`). Pure."""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine.confidence.factors import ConfidenceFactors
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings


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
