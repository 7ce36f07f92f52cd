"""Option scoring: the pure arithmetic behind `ChatModel.score_options`.

A small base model cannot write a calibrated number, but it ranks continuations by likelihood (the way
lm-evaluation-harness scores base models on multiple-choice tasks). These helpers turn summed option
log-probabilities into probabilities over the options, and apply contextual calibration: divide by the
same options' probabilities after a content-free input ("N/A") and renormalise (Zhao et al. 2021,
"Calibrate Before Use"), which removes the prior a prompt template gives to one option.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence


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
    return stripped, prompt[len(stripped) :] + option


# -- scoring through APIs that expose log-probabilities -------------------------------------------------
# Three transports, from exact to approximate:
# * echo: a completions endpoint returns the log-probability of every prompt token (`echo` + `logprobs`,
#   as lm-evaluation-harness's `local-completions` uses it): score = the sum over the option's tokens, exact.
# * walk: an endpoint that continues raw text gives the top-k next tokens; the option is followed token by
#   token (the longest top-k token it starts with), one request per step, exact while each token is in the
#   top k and an upper bound (flagged) where it falls out.
# * first token: a chat endpoint gives the top-k tokens of the answer's first position only; each option
#   is scored by its first token (flagged), and options that share that token cannot be told apart.

TopLogprobs = list[tuple[str, float]]


class ScoringUnsupported(ValueError):
    """The log-probabilities the API gave cannot score these options (the message says why)."""


def echo_option_logprob(
    tokens: Sequence[str], token_logprobs: Sequence[float | None], offsets: Sequence[int], start: int, end: int
) -> tuple[float, int, bool]:
    """Sum the echoed prompt-token log-probabilities of the characters [start, end) (the option inside the
    echoed prompt): (sum, token count, straddles) — `straddles` is True when a token spans the boundary
    between prompt and option (it is counted with the option, as the tokenizer merged them)."""
    total, count, straddles = 0.0, 0, False
    for token, logprob, offset in zip(tokens, token_logprobs, offsets, strict=False):
        if offset >= end:
            break  # generated tokens after the echoed prompt
        if offset + len(token) <= start:
            continue
        if offset < start:
            straddles = True
        if logprob is None:
            raise ScoringUnsupported("the server gave no log-probability for an option token")
        total += float(logprob)
        count += 1
    if count == 0:
        raise ScoringUnsupported("the echoed tokens do not cover the option")
    return total, count, straddles


def missing_bound(top: TopLogprobs) -> float:
    """An upper bound on the log-probability of a token outside the top k: no more than the least likely
    top-k token, nor than the probability mass the top k leave over."""
    if not top:
        return -50.0
    least = min(lp for _, lp in top)
    rest = 1.0 - sum(math.exp(lp) for _, lp in top)
    return min(least, math.log(rest)) if rest > 1e-12 else min(least, math.log(1e-12))


def _clean(token: str) -> str:
    return token.replace("▁", " ").replace("Ġ", " ")


def first_token_scores(top: TopLogprobs, options: Sequence[str]) -> tuple[list[float], list[str]]:
    """Each option's log-probability as the first token of a chat answer: the best top-k token that the
    option (leading spaces ignored, as a chat answer starts a new text) begins with. An option whose first
    token is not in the top k gets an upper bound (`missing_bound`) and a flag. Raises
    ScoringUnsupported when two options are decided by the same token."""
    flags = ["first_token"]
    scores: list[float] = []
    chosen: list[str | None] = []
    floor = missing_bound(top)
    for i, option in enumerate(options):
        text = option.strip()
        best: tuple[str, float] | None = None
        for token, logprob in top:
            piece = _clean(token).strip()
            if piece and text.startswith(piece) and (best is None or len(piece) > len(best[0])):
                best = (piece, logprob)
        if best is None:
            scores.append(floor)
            chosen.append(None)
            flags.append(f"below_top_k:{i}")
        else:
            scores.append(best[1])
            chosen.append(best[0])
    seen: dict[str, int] = {}
    for i, picked in enumerate(chosen):
        if picked is None:
            continue
        token = picked
        if token in seen and options[seen[token]].strip() != options[i].strip():
            raise ScoringUnsupported(
                f"options {options[seen[token]].strip()!r} and {options[i].strip()!r} both begin with the token "
                f"{token!r}: a first-token score cannot tell them apart"
            )
        seen[token] = i
    return scores, flags


async def walk_scores(
    prompt: str,
    options: Sequence[str],
    next_top: Callable[[str], Awaitable[tuple[TopLogprobs, int]]],
    max_steps: int = 24,
) -> tuple[list[float], list[int], int, list[str]]:
    """Follow each option token by token through `next_top(text) -> (top-k next tokens, prompt tokens)`:
    (log-probabilities, token counts, prompt tokens, flags). Steps shared by options (a common prefix)
    are asked once. Trailing spaces of the prompt move into the options, as in lm-evaluation-harness."""
    cache: dict[str, tuple[TopLogprobs, int]] = {}
    flags: list[str] = []
    prompt_tokens = 0

    async def top_for(text: str) -> TopLogprobs:
        nonlocal prompt_tokens
        if text not in cache:
            cache[text] = await next_top(text)
            if len(cache) == 1:
                prompt_tokens = cache[text][1]
        return cache[text][0]

    logprobs: list[float] = []
    counts: list[int] = []
    for i, option in enumerate(options):
        context, remaining = split_trailing_space(prompt, option)
        total, steps = 0.0, 0
        while remaining and steps < max_steps:
            top = await top_for(context)
            best: tuple[str, float] | None = None
            for token, logprob in top:
                piece = _clean(token)
                if piece and remaining.startswith(piece) and (best is None or len(piece) > len(best[0])):
                    best = (piece, logprob)
            steps += 1
            if best is None:
                total += missing_bound(top)
                flags.append(f"below_top_k:{i}")
                break
            total += best[1]
            context += best[0]
            remaining = remaining[len(best[0]) :]
        if remaining and steps >= max_steps:
            flags.append(f"truncated_option:{i}")
        logprobs.append(total)
        counts.append(steps)
    return logprobs, counts, prompt_tokens, flags
