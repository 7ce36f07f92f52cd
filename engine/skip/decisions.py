"""What a judgment decides, pure: how long a confidence skips its scope (`calculate_skip_seconds`) and the seed's
parsing table made fail-safe (`parse_judgment`, `parse_confidence`): a field that did not parse cleanly is
flagged, and a flagged judgment is never cached."""

from __future__ import annotations

import json
import math
import re

from pydantic import BaseModel, Field

from engine.skip.config import JudgmentSkipConfig
from models.structured import FLOAT_LIKE


class JudgmentResult(BaseModel):
    should_respond: bool
    reason: str
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    # A failed field (`missing:confidence`, `invalid:confidence`, `truncated`, `unparseable`, …): the
    # judgment still decides whether to respond, but it is never cached.
    flags: list[str] = Field(default_factory=list)

    @property
    def cacheable(self) -> bool:
        """Only a judgment whose every field parsed cleanly may set a skip window."""
        return not self.flags


def calculate_skip_seconds(confidence: float, config: JudgmentSkipConfig) -> int:
    """The first threshold (highest first, sorted at lookup) the confidence reaches, else the default."""
    for threshold in sorted(config.thresholds, key=lambda t: t.min_confidence, reverse=True):
        if confidence >= threshold.min_confidence:
            return threshold.skip_seconds
    return config.default_skip_seconds


_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")


def parse_confidence(value: object) -> tuple[float, str | None]:
    """(confidence, the flag of a failed field): a number in [0, 1], else the fallback 0.0."""
    if value is None:
        return 0.0, "missing:confidence"
    if isinstance(value, bool):
        return 0.0, "invalid:confidence"
    try:
        if not isinstance(value, FLOAT_LIKE):  # what float() refuses with a TypeError
            raise TypeError(type(value).__name__)
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0, "invalid:confidence"
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        return 0.0, "invalid:confidence"
    return number, None


def parse_judgment(response: str, *, truncated: bool = False) -> JudgmentResult:
    """The seed's parsing table, made fail-safe. A confidence in [0, 1] is used. A missing one (the seed:
    1.0), an out-of-range one (the seed: clamped), NaN, infinite or not a number is a failed field:
    confidence 0.0, flagged `missing:confidence` / `invalid:confidence`. A `should_respond` that is not a
    JSON boolean is `false`, flagged. An answer cut off at max_tokens, or unparseable, is "don't respond"
    with confidence 0.0, flagged. A flagged judgment is never cached (the origin's 12-hour skip)."""
    if truncated:
        return JudgmentResult(
            should_respond=False, reason="the answer was cut off at max_tokens", confidence=0.0, flags=["truncated"]
        )
    try:
        match = _FLAT_OBJECT.search(response)
        data = json.loads(match.group() if match else response)
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
    except (json.JSONDecodeError, TypeError, ValueError, RecursionError) as exc:
        return JudgmentResult(
            should_respond=False, reason=f"Failed to parse LLM response: {exc}", confidence=0.0, flags=["unparseable"]
        )
    flags: list[str] = []
    respond = data.get("should_respond", False)
    if not isinstance(respond, bool):
        flags.append("invalid:should_respond")
        respond = False
    confidence, failed = parse_confidence(data.get("confidence"))
    if failed:
        flags.append(failed)
    return JudgmentResult(
        should_respond=respond, reason=str(data.get("reason", "")), confidence=confidence, flags=flags
    )
