"""Option scoring: the pure arithmetic behind `ChatModel.score_options`.

A small base model cannot write a calibrated number, but it ranks continuations by likelihood (the way
lm-evaluation-harness scores base models on multiple-choice tasks). These helpers turn summed option
log-probabilities into probabilities over the options, and apply contextual calibration: divide by the
same options' probabilities after a content-free input ("N/A") and renormalise (Zhao et al. 2021,
"Calibrate Before Use"), which removes the prior a prompt template gives to one option.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def normalise(logprobs: Sequence[float]) -> list[float]:
    """Softmax over the options' summed log-probabilities (a log-sum-exp, so tiny values don't vanish)."""
    if not logprobs:
        return []
    finite = [x for x in logprobs if math.isfinite(x)]
    if not finite:
        return [1.0 / len(logprobs)] * len(logprobs)
    top = max(finite)
    weights = [math.exp(x - top) if math.isfinite(x) else 0.0 for x in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


def calibrate(probabilities: Sequence[float], baseline: Sequence[float], floor: float = 1e-6) -> list[float]:
    """Contextual calibration: p_i / b_i, renormalised. A baseline option of ~0 probability is floored so
    one option cannot take everything from a rounding error."""
    if len(probabilities) != len(baseline):
        raise ValueError("baseline and probabilities must score the same options")
    ratios = [p / max(b, floor) for p, b in zip(probabilities, baseline, strict=True)]
    total = sum(ratios)
    if total <= 0 or not math.isfinite(total):
        return [1.0 / len(ratios)] * len(ratios)
    return [r / total for r in ratios]


def split_trailing_space(prompt: str, option: str) -> tuple[str, str]:
    """lm-evaluation-harness's convention: trailing whitespace of the context moves to the continuation,
    so "Answer: " + "Yes" is scored as "Answer:" + " Yes" (the way a tokenizer writes a word)."""
    stripped = prompt.rstrip(" ")
    return stripped, prompt[len(stripped):] + option
