"""The calculation of `score.calculate` over tables of factor rows at once, for calibration, the what-if
threshold views and the benchmark: the same numbers, without the breakdown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.confidence.factors import FACTOR_FIELDS, ConfidenceFactors, check_columns
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings


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
