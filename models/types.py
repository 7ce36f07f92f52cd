"""Plain data types shared by every backend."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Request(BaseModel):
    """Everything that determines an answer; its hash keys recording and replay."""

    model_id: str
    messages: list[Message]
    schema_name: str | None = None
    json_schema: dict[str, Any] | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    # Scoring requests (`score_options`): a raw completion prompt (None: the messages in the model's chat
    # layout) and the continuations to score. Left out of the hash when unset, so chat requests keep theirs.
    prompt: str | None = None
    options: list[str] | None = None

    def request_hash(self) -> str:
        data = self.model_dump(mode="json")
        for key in ("prompt", "options"):
            if data.get(key) is None:
                data.pop(key, None)
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Completion(BaseModel):
    """One finished call: the text, the validated object (for structured calls) and its cost."""

    model_id: str
    backend: str
    text: str
    parsed: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    cost: float = 0.0
    finish_reason: str | None = None
    # Values that were out of range and clamped, or repaired by the tolerant extractor.
    flags: list[str] = Field(default_factory=list)
    call_id: int | None = None
    replayed: bool = False
    # A replayed answer spends nothing (`cost` 0); this is what the recorded call it repeats cost.
    would_cost: float | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.usage.completion_tokens / self.latency_s if self.latency_s > 0 else 0.0


class RawResult(BaseModel):
    """What a backend's transport returns before validation."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    # Providers with a native object (Anthropic tool use) hand it over directly.
    native_object: dict[str, Any] | None = None
    # Set by replay only: the cost of the recorded call this answer repeats (nothing is spent now).
    recorded_cost: float | None = None


class Chunk(BaseModel):
    """One piece of a streamed answer; the last one carries the finished Completion."""

    text: str = ""
    completion: Completion | None = None


class ChoiceProbabilities(BaseModel):
    """How likely the model continues with each choice (normalised over the choices)."""

    model_id: str
    probabilities: dict[str, float]
    prompt_tokens: int = 0
    latency_s: float = 0.0
    call_id: int | None = None


class ScoreResult(BaseModel):
    """What a backend's scoring transport returns: each option's summed log-probability as the continuation
    of the prompt, the number of tokens it took, and flags (e.g. an option scored by its first token only)."""

    logprobs: list[float]
    token_counts: list[int]
    prompt_tokens: int = 0
    flags: list[str] = Field(default_factory=list)


class OptionScores(BaseModel):
    """How likely a model continues a prompt with each option (lm-evaluation-harness style).

    `probabilities` normalise the summed log-probabilities over the options; `calibrated` divides them by
    the same options' probabilities after a content-free prompt (contextual calibration, Zhao et al. 2021)
    and renormalises; `baseline` holds that prompt's log-probabilities, so `pmi` (how much more likely
    the input made each option) is available too. None when no calibration prompt was given."""

    model_id: str
    options: list[str]
    logprobs: list[float]
    token_counts: list[int]
    probabilities: list[float]
    calibrated: list[float] | None = None
    baseline: list[float] | None = None
    prompt_tokens: int = 0
    latency_s: float = 0.0
    flags: list[str] = Field(default_factory=list)
    call_id: int | None = None
    replayed: bool = False

    @property
    def pmi(self) -> list[float]:
        if self.baseline is None:
            raise ValueError("pmi needs a calibration prompt")
        return [a - b for a, b in zip(self.logprobs, self.baseline, strict=True)]

    def best(self, *, calibrated: bool = True) -> str:
        probs = self.calibrated if calibrated and self.calibrated is not None else self.probabilities
        return self.options[max(range(len(self.options)), key=lambda i: probs[i])]

    def as_dict(self, *, calibrated: bool = True) -> dict[str, float]:
        probs = self.calibrated if calibrated and self.calibrated is not None else self.probabilities
        return dict(zip(self.options, probs, strict=True))
