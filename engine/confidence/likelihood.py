"""The confidence self-evaluation by likelihood: the prompt that ends at "The answer is", its verdict words, and
the PMI feature a fitted map (`data/calibration/confidence.likelihood.<model>.json`) turns into p(supported).
The shared core (log-sum-exp, the content-free input) is `engine.likelihood`, the quoting `engine.quoting`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.likelihood import CONTENT_FREE, log_sum_exp
from engine.quoting import quote

if TYPE_CHECKING:
    from models.base import ChatModel
    from models.types import OptionScores


CONFIDENCE = "confidence.likelihood"
VERDICT_WORDS = (" correct", " supported", " wrong", " made up")


def answer_prompt(query: str, answer: str, sources: Sequence[str] = ()) -> str:
    src = ("\nSources (quoted):\n" + "\n".join(f"- {quote(s)}" for s in sources)) if sources else ""
    return f"Question (quoted): {quote(query)}\nAnswer (quoted): {quote(answer)}{src}\n\nThe answer is"


async def confidence_features(
    model: ChatModel, query: str, answer: str, sources: Sequence[str] = ()
) -> tuple[dict[str, float], OptionScores]:
    """`pmi_supported`: how much more the question, answer and sources make "The answer is correct /
    supported" likely than "… wrong / made up", beyond the same prompt with a content-free answer."""
    scores = await model.score_options(
        answer_prompt(query, answer, sources),
        list(VERDICT_WORDS),
        calibration=answer_prompt(query, CONTENT_FREE, sources),
    )
    pmi = scores.pmi
    return {"pmi_supported": log_sum_exp(pmi[:2]) - log_sum_exp(pmi[2:])}, scores
