"""The raw evidence of one step (`ConfidenceFactors`) and its checks, for one row (`parse_factors`) and for a
table of rows (`check_columns`): a bad field is refused by name, never scored."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator


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
