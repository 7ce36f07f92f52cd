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


# Two phrasings of "what is the last message about", scored with the same options: the PMI of each expertise
# item is averaged over them (a prompt-template ensemble; one phrasing alone ranked the labelled speaker first
# less often and gave a lower F1 in cross-validation on the calibration split). Both share the conversation,
# so llama.cpp re-evaluates only the short cue and the options for the second.
TOPIC_CUES = ("The last message is about", "This is a question for someone who knows")


def topic_prompt(conversation: str, cue: str = TOPIC_CUES[0]) -> str:
    return f"{conversation}\n\n{cue}"


def expertise_items(who: Sequence[Participant]) -> list[tuple[str, str]]:
    """(participant id, item) of every expertise item scored, in order (the role or name when none is given)."""
    return [(p.id, e) for p in who for e in (p.expertise or [p.role or p.name])]


async def handraise_features(
    model: ChatModel, who: Sequence[Participant], turns: Sequence[Turn], context_turns: int
) -> tuple[dict[str, dict[str, float]], list[OptionScores]]:
    """Raw likelihood features per participant from one scoring call per cue (`TOPIC_CUES`). Every expertise
    item of every participant is scored as the continuation of each cue, against the same prompt after a
    content-free message: the difference is the item's pointwise mutual information with the conversation
    (domain-conditional PMI, Holtzman et al. 2021), which removes how common the phrase is; an item's PMI is
    its mean over the cues. `pmi_mean` / `pmi_max` = the mean / best PMI of the participant's items;
    `pmi_rel` / `max_rel` = those minus the roster's average (how much more the message is about this
    participant than about the others); `spoke` = 1 when the participant already wrote one of the recent
    messages (kept for the record; the fitted maps do not read it). Names are not scored: the probe that
    scored them ranked the labelled speaker first less often (measured on the calibration split)."""
    names = {p.id: p.name for p in who} | {"user": "User"}
    shown = [(t.speaker, t.text) for t in list(turns)[-context_turns:]]
    conversation = _conversation(shown, names)
    empty = _conversation([("user", CONTENT_FREE)], names)
    items = expertise_items(who)
    calls = [
        await model.score_options(
            topic_prompt(conversation, cue), [" " + e for _, e in items], calibration=topic_prompt(empty, cue)
        )
        for cue in TOPIC_CUES
    ]
    pmi = [sum(c.pmi[j] for c in calls) / len(calls) for j in range(len(items))]
    mine = {p.id: [pmi[j] for j, (pid, _) in enumerate(items) if pid == p.id] for p in who}
    means = {pid: sum(xs) / len(xs) for pid, xs in mine.items()}
    bests = {pid: max(xs) for pid, xs in mine.items()}
    average, average_best = sum(means.values()) / len(means), sum(bests.values()) / len(bests)
    out = {
        p.id: {
            "pmi_mean": means[p.id],
            "pmi_rel": means[p.id] - average,
            "pmi_max": bests[p.id],
            "max_rel": bests[p.id] - average_best,
            "spoke": float(any(speaker == p.id for speaker, _ in shown)),
        }
        for p in who
    }
    return out, calls


def best_expertise(who: Sequence[Participant], calls: Sequence[OptionScores]) -> dict[str, str]:
    """Per participant, the expertise item the conversation is most about (highest PMI averaged over the cues,
    the items in `handraise_features`' order), cut to 60 characters: the words a card's reason can show instead
    of a bare number."""
    items = expertise_items(who)
    pmi = [sum(c.pmi[j] for c in calls) / len(calls) for j in range(len(items))]
    best: dict[str, tuple[float, str]] = {}
    for (pid, item), value in zip(items, pmi, strict=True):
        if pid not in best or value > best[pid][0]:
            best[pid] = (value, item)
    return {pid: item if len(item) <= 60 else item[:59] + "…" for pid, (_, item) in best.items()}


# -- skip cache ---------------------------------------------------------------------------------------------------

SKIP = "skip.likelihood"
# Cues after the quoted chat, each with the continuations that say it wants an answer (first tuple) and those
# that say it does not (second). Each cue gives one feature, the PMI of its first side against its second
# (log-sum-exp per side); a fitted logistic map combines them. The sides are written from what the words
# mean, not picked from data; the four cues together ranked the calibration split's snippets better in 5-fold
# cross-validation (AUC 0.89) than the first alone (0.83; its former two-against-two version 0.80).
SKIP_CUES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "pmi_need",
        "This chat needs",
        (" an answer", " a reply", " help", " a response"),
        (" no reply", " nothing", " no response", " no action"),
    ),
    (
        "pmi_last",
        "The last message is",
        (" a question", " a request for help", " asking for help", " a problem"),
        (" small talk", " a statement", " an announcement", " a thank-you", " a joke", " an update"),
    ),
    (
        "pmi_should",
        "Someone should now",
        (" answer", " reply", " help", " respond"),
        (" wait", " do nothing", " stay quiet", " ignore it"),
    ),
    (
        "pmi_status",
        "Status of this chat:",
        (" unanswered question", " waiting for an answer", " needs help"),
        (" resolved", " just chatting", " no action needed", " done"),
    ),
)
SKIP_FEATURES = [name for name, *_ in SKIP_CUES]
NEEDS = SKIP_CUES[0][2] + SKIP_CUES[0][3]


def needs_prompt(conversation: str, cue: str = SKIP_CUES[0][1]) -> str:
    return f"{conversation}\n\n{cue}"


def _lse(xs: Sequence[float]) -> float:
    top = max(xs)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(x - top) for x in xs))


async def skip_features(
    model: ChatModel,
    history: Sequence[tuple[str, str]],
    cues: Sequence[tuple[str, str, Sequence[str], Sequence[str]]] = SKIP_CUES,
) -> tuple[dict[str, float], OptionScores]:
    """One feature per cue of `SKIP_CUES` (`pmi_need`, `pmi_last`, `pmi_should`, `pmi_status`): how much more
    the conversation makes the cue's "wants an answer" continuations likely than its "does not" ones, beyond
    what a content-free chat does (log-sum-exp over each side's PMIs). The cues share the quoted chat, so
    llama.cpp evaluates it once and each further cue costs only its own tokens. A Yes/No question ("does this
    need an answer?") carried no signal on the calibration split (AUC 0.49): the base model answers Yes or No
    by habit, while the PMI of descriptive phrases moves with the text. Returns the features and the last
    cue's scores (prompt tokens and call ids of all cues summed into it). `cues`: a part of `SKIP_CUES` gives
    only its features (the fitted map needs all of them)."""
    conversation = "Chat channel (each message quoted, latest last):\n" + lines(list(history))
    empty = "Chat channel (each message quoted, latest last):\n" + lines([("user", CONTENT_FREE)])
    features: dict[str, float] = {}
    prompt_tokens = 0
    scores = None
    for name, cue, yes, no in cues:
        scores = await model.score_options(
            needs_prompt(conversation, cue), [*yes, *no], calibration=needs_prompt(empty, cue)
        )
        pmi = scores.pmi
        features[name] = _lse(pmi[: len(yes)]) - _lse(pmi[len(yes) :])
        prompt_tokens += scores.prompt_tokens
    assert scores is not None
    return features, scores.model_copy(update={"prompt_tokens": prompt_tokens})


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
