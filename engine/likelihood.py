"""Likelihood judges: prompts a small base model can answer by ranking options, and their features.

A 270M base model cannot write a calibrated number or a JSON verdict, but it ranks continuations by
likelihood (as lm-evaluation-harness scores base models). Each judge here builds completion prompts,
scores a few option words with `ChatModel.score_options` (contextual calibration against the same prompt
with a content-free input), and returns raw features; a fitted map (`engine.judgemaps`) turns them into
the mechanism's numbers. Untrusted text (messages, cases, lines) enters every prompt as a JSON-escaped
string, so it cannot forge a line of the prompt.

This module is the shared core: the content-free input, quoted lines, log-sum-exp, an item's PMI over cues and
models, the labels' evenly spaced scores. Each mechanism's prompts and features live in its package
(`engine.handraise.likelihood`, `engine.jury.likelihood`, `engine.skip.likelihood`, `engine.confidence.likelihood`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.quoting import quote

if TYPE_CHECKING:
    from engine.handraise.cast import Participant
    from models.types import OptionScores


CONTENT_FREE = "N/A"


def lines(speakers_texts: Sequence[tuple[str, str]]) -> str:
    """One line per turn, `Name: "text"`: the text always quoted, a name quoted when it holds a line break or
    any other unprintable character (so a name cannot forge a turn of its own; a plain name reads as it always
    has, which keeps recorded prompts and the maps fitted on them unchanged)."""
    return "\n".join(f"{_speaker(who)}: {quote(text)}" for who, text in speakers_texts) or "(empty)"


def _speaker(who: object) -> str:
    name = str(who)
    return name if name.isprintable() and name.strip() == name else quote(name)


def per_token(logprob: float, tokens: int) -> float:
    """A continuation's log-likelihood per token (length-normalised, as LM-Polygraph's scores are)."""
    return logprob / max(tokens, 1)


def log_sum_exp(xs: Sequence[float]) -> float:
    """log Σ exp(x), computed stably; −inf when every x is −inf (options the model gives no probability)."""
    top = max(xs)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(x - top) for x in xs))


def item_pmi(calls: Sequence[OptionScores]) -> list[float]:
    """Each option's PMI: averaged over each model's calls (its cues), then over the models."""
    by_model: dict[str, list[OptionScores]] = {}
    for c in calls:
        by_model.setdefault(c.model_id, []).append(c)
    per_model = [[sum(c.pmi[j] for c in cs) / len(cs) for j in range(len(cs[0].pmi))] for cs in by_model.values()]
    return [sum(values) / len(values) for values in zip(*per_model, strict=True)]


def _item_means(
    who: Sequence[Participant], items: Sequence[tuple[str, str]], calls: Sequence[OptionScores]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per participant, the mean and the best PMI of its expertise items (each item's PMI as `item_pmi`)."""
    pmi = item_pmi(calls)
    mine = {p.id: [pmi[j] for j, (pid, _) in enumerate(items) if pid == p.id] for p in who}
    return {pid: sum(xs) / len(xs) for pid, xs in mine.items()}, {pid: max(xs) for pid, xs in mine.items()}


def label_scores(n: int) -> list[float]:
    """Labels least to most severe get 100 … 0, evenly spaced (the score a distribution's mean is taken of)."""
    return [100.0 * (1 - i / (n - 1)) for i in range(n)] if n > 1 else [100.0]
