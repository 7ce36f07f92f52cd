"""The checker's settings: the seed's `response:` section (`ResponseConfig`), its judgment skip windows
(`JudgmentSkipConfig`, `JudgmentSkipThreshold`) and what a backend error does (`FailurePolicy`)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class JudgmentSkipThreshold(BaseModel):
    """Apply `skip_seconds` when confidence ≥ `min_confidence`."""

    model_config = ConfigDict(extra="forbid")

    min_confidence: float = Field(ge=0.0, le=1.0)
    skip_seconds: int = Field(ge=0)


def _default_thresholds() -> list[JudgmentSkipThreshold]:
    return [
        JudgmentSkipThreshold(min_confidence=0.9, skip_seconds=43200),  # 12 hours
        JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),  # 1 hour
    ]


class JudgmentSkipConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    thresholds: list[JudgmentSkipThreshold] = Field(default_factory=_default_thresholds)
    default_skip_seconds: int = Field(600, ge=0)  # 10 minutes


class FailurePolicy(StrEnum):
    """What a backend error does. Never: cache it as a judgment."""

    RETRY_NEXT_CHECK = "retry_next_check"  # nothing cached; the scope is judged again at the next check
    BACKOFF = "backoff"  # nothing cached; the scope waits `backoff_seconds` before the next try


class ResponseConfig(BaseModel):
    """The seed's `response:` section."""

    model_config = ConfigDict(extra="forbid")

    check_interval_seconds: int = Field(60, gt=0)
    min_wait_seconds: int = Field(300, ge=0)
    message_limit: int = Field(20, gt=0)
    max_message_age_seconds: int = Field(43200, gt=0)
    cleanup_interval_seconds: int = Field(86400, gt=0, description="how often delete_expired runs")
    judgment_skip: JudgmentSkipConfig = Field(default_factory=JudgmentSkipConfig)
    failure_policy: FailurePolicy = FailurePolicy.RETRY_NEXT_CHECK
    backoff_seconds: int = Field(300, ge=0)
    persona_name: str = "myao"
