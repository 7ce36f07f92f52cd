"""`ConfidenceSettings`: every weight, inclusion condition, penalty factor, rounding and level threshold of the
calculation. The defaults reproduce the origin's calculation exactly."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    include_self_confidence_above: float = Field(0.6, ge=0, le=1)
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
