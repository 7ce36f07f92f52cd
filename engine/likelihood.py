"""Likelihood judges: prompts a small base model can answer by ranking options, and their features.

A 270M base model cannot write a calibrated number or a JSON verdict, but it ranks continuations by
likelihood (as lm-evaluation-harness scores base models). Each judge here builds completion prompts,
scores a few option words with `ChatModel.score_options` (contextual calibration against the same prompt
with a content-free input), and returns raw features; a fitted map (`engine.judgemaps`) turns them into
the mechanism's numbers. Untrusted text (messages, cases, lines) enters every prompt as a JSON-escaped
string, so it cannot forge a line of the prompt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.handraise.cast import Participant, Turn
    from engine.jury import JurorSeat, JuryCase, Rubric
    from models.base import ChatModel
    from models.types import OptionScores

CONTENT_FREE = "N/A"


def quote(text: str) -> str:
    """Untrusted text as one JSON string: newlines and quotes are escaped, so it stays on its line."""
    return json.dumps(text, ensure_ascii=False)


def lines(speakers_texts: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"{who}: {quote(text)}" for who, text in speakers_texts) or "(empty)"


# -- hand raise -------------------------------------------------------------------------------------------------

HANDRAISE = "handraise.likelihood"


def _conversation(turns: Sequence[tuple[str, str]], names: dict[str, str]) -> str:
    return "Group chat (each message quoted, latest last):\n" + lines(
        [(names.get(speaker, speaker), text) for speaker, text in turns]
    )


def topic_prompt(conversation: str) -> str:
    return f"{conversation}\n\nThe last message is about"


async def handraise_features(
    model: ChatModel, who: Sequence[Participant], turns: Sequence[Turn], context_turns: int
) -> tuple[dict[str, dict[str, float]], list[OptionScores]]:
    """Raw likelihood features per participant from one scoring call. Every expertise item of every
    participant is scored as the continuation of "The last message is about", against the same prompt
    after a content-free message: the difference is the item's pointwise mutual information with the
    conversation (domain-conditional PMI, Holtzman et al. 2021), which removes how common the phrase is.
    `pmi_mean` / `pmi_max` = the mean / best PMI of the participant's items; `pmi_rel` = pmi_mean minus
    the roster's average (how much more the message is about this participant than about the others);
    `spoke` = 1 when the participant already wrote one of the recent messages. Names are not scored: the
    probe that scored them ranked the labelled speaker first less often (measured on the calibration split)."""
    names = {p.id: p.name for p in who} | {"user": "User"}
    shown = [(t.speaker, t.text) for t in list(turns)[-context_turns:]]
    conversation = _conversation(shown, names)
    empty = _conversation([("user", CONTENT_FREE)], names)
    items = [(p.id, e) for p in who for e in (p.expertise or [p.role or p.name])]
    scores = await model.score_options(
        topic_prompt(conversation), [" " + e for _, e in items], calibration=topic_prompt(empty)
    )
    pmi = scores.pmi
    means = {
        p.id: sum(pmi[j] for j, (pid, _) in enumerate(items) if pid == p.id) / sum(1 for pid, _ in items if pid == p.id)
        for p in who
    }
    average = sum(means.values()) / len(means)
    out = {
        p.id: {
            "pmi_mean": means[p.id],
            "pmi_rel": means[p.id] - average,
            "pmi_max": max(pmi[j] for j, (pid, _) in enumerate(items) if pid == p.id),
            "spoke": float(any(speaker == p.id for speaker, _ in shown)),
        }
        for p in who
    }
    return out, [scores]


# -- skip cache ---------------------------------------------------------------------------------------------------

SKIP = "skip.likelihood"
NEEDS = (" an answer", " a reply", " no reply", " nothing")


def needs_prompt(conversation: str) -> str:
    return f"{conversation}\n\nThis chat needs"


def _lse(xs: Sequence[float]) -> float:
    top = max(xs)
    return top + math.log(sum(math.exp(x - top) for x in xs))


async def skip_features(model: ChatModel, history: Sequence[tuple[str, str]]) -> tuple[dict[str, float], OptionScores]:
    """`pmi_need`: how much more the conversation makes "This chat needs an answer / a reply" likely than
    "… no reply / nothing", beyond what a content-free chat does (log-sum-exp over each side's PMIs). A
    Yes/No question ("does this need an answer?") carried no signal on the calibration split (AUC 0.49):
    the base model answers Yes or No by habit, while the PMI of descriptive phrases moves with the text."""
    conversation = "Chat channel (each message quoted, latest last):\n" + lines(list(history))
    empty = "Chat channel (each message quoted, latest last):\n" + lines([("user", CONTENT_FREE)])
    scores = await model.score_options(needs_prompt(conversation), list(NEEDS), calibration=needs_prompt(empty))
    pmi = scores.pmi
    return {"pmi_need": _lse(pmi[:2]) - _lse(pmi[2:])}, scores


# -- jury -------------------------------------------------------------------------------------------------------


def jury_prompt(
    seat: JurorSeat, case: JuryCase, rubric: Rubric, others: Sequence[tuple[str, str]] = (), content: str | None = None
) -> str:
    """A completion prompt that ends where the juror's verdict label begins. The case, the role texts and
    the other jurors' positions are quoted; the labels are the case set's own."""
    labels = "\n".join(f"- {v}: {rubric.verdict_descriptions.get(v, v)}" for v in rubric.verdicts)
    said = ("\nThe other jurors' current verdicts (quoted):\n" + lines(list(others))) if others else ""
    focus = f" Focus: {quote(seat.role_focus)}." if seat.role_focus else ""
    return (
        f"{rubric.instructions}\nVerdicts, least to most severe:\n{labels}\n\n"
        f"Case (quoted): {quote(case.content if content is None else content)}\n{said}\n"
        f"Juror {quote(seat.role_name)}.{focus}\nVerdict of this juror:"
    )


async def jury_scores(
    model: ChatModel, seat: JurorSeat, case: JuryCase, rubric: Rubric, others: Sequence[tuple[str, str]] = ()
) -> OptionScores:
    """The calibrated distribution over the rubric's labels (baseline: the same juror on a content-free case,
    with no one else's verdict)."""
    return await model.score_options(
        jury_prompt(seat, case, rubric, others),
        [" " + v for v in rubric.verdicts],
        calibration=jury_prompt(seat, case, rubric, (), CONTENT_FREE),
    )


def label_scores(n: int) -> list[float]:
    """Labels least to most severe get 100 … 0, evenly spaced (the score a distribution's mean is taken of)."""
    return [100.0 * (1 - i / (n - 1)) for i in range(n)] if n > 1 else [100.0]


# -- confidence -------------------------------------------------------------------------------------------------

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
    return {"pmi_supported": _lse(pmi[:2]) - _lse(pmi[2:])}, scores
