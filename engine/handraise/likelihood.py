"""The hand raise's likelihood judge: the conversation and topic prompts, each participant's expertise items, the
features its fitted maps read (`handraise_features`), and the best expertise to show."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.handraise.cast import Participant, Turn
    from models.base import ChatModel
    from models.types import OptionScores
from engine.likelihood import CONTENT_FREE, _item_means, item_pmi, lines

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


# The cues an ensemble's other models score (`handraise_features`): the first alone ranked as well as both in
# cross-validation on the calibration split, at one call a partner instead of two.
PARTNER_CUES = TOPIC_CUES[:1]


def topic_prompt(conversation: str, cue: str = TOPIC_CUES[0]) -> str:
    return f"{conversation}\n\n{cue}"


def expertise_items(who: Sequence[Participant]) -> list[tuple[str, str]]:
    """(participant id, item) of every expertise item scored, in order (the role or name when none is given)."""
    return [(p.id, e) for p in who for e in (p.expertise or [p.role or p.name])]


async def handraise_features(
    model: ChatModel,
    who: Sequence[Participant],
    turns: Sequence[Turn],
    context_turns: int,
    partners: Sequence[ChatModel] = (),
) -> tuple[dict[str, dict[str, float]], list[OptionScores]]:
    """Raw likelihood features per participant from one scoring call per cue (`TOPIC_CUES`). Every expertise
    item of every participant is scored as the continuation of each cue, against the same prompt after a
    content-free message: the difference is the item's pointwise mutual information with the conversation
    (domain-conditional PMI, Holtzman et al. 2021), which removes how common the phrase is; an item's PMI is
    its mean over the cues. `pmi_mean` / `pmi_max` = the mean / best PMI of the participant's items;
    `pmi_rel` / `max_rel` = those minus the roster's average (how much more the message is about this
    participant than about the others); `spoke` = 1 when the participant already wrote one of the recent
    messages (kept for the record; the fitted maps do not read it). Names are not scored: the probe that
    scored them ranked the labelled speaker first less often (measured on the calibration split).
    `pmi_last_mean` / `pmi_last_rel`: the same mean PMI and its lead scored on the last user message alone
    (the message to answer), so a question earlier in the window that nobody answered does not keep its
    topic's hands up once the user has moved on; when the window is that message alone they equal the
    window's (no extra call). Measured on the calibration split, 5-fold CV by cast: the window features
    alone F1 0.733 / top-1 0.861, with `pmi_last_rel` in the relevance map 0.750 / 0.861; with the items
    of unanswered questions followed by another topic or a greeting added, 0.658 / 0.758 against 0.742 / 0.857.
    `partners` (an ensemble, `HandRaiseConfig.likelihood_ensemble`) each score the first cue only
    (`PARTNER_CUES`), and an item's PMI is the mean over the models of each model's PMI (the judge model's
    averaged over its cues): a product of experts with equal weights. Gemma 3 270M with SmolLM2-135M-Instruct,
    5-fold CV by cast: F1 0.742 → 0.775, top-1 0.857 → 0.912 (SmolLM2 on both cues: 0.768 / 0.912, one call
    more; SmolLM2 alone 0.692 / 0.879). The partners score first, so one that cannot run fails before the
    judge model has spent a call."""
    names = {p.id: p.name for p in who} | {"user": "User"}
    shown = [(t.speaker, t.text) for t in list(turns)[-context_turns:]]
    conversation = _conversation(shown, names)
    empty = _conversation([("user", CONTENT_FREE)], names)
    items = expertise_items(who)
    scorers = [(m, PARTNER_CUES) for m in partners] + [(model, TOPIC_CUES)]

    async def score(chat: str) -> list[OptionScores]:
        return [
            await m.score_options(
                topic_prompt(chat, cue), [" " + e for _, e in items], calibration=topic_prompt(empty, cue)
            )
            for m, cues in scorers
            for cue in cues
        ]

    calls = await score(conversation)
    last_user = [turn for turn in shown if turn[0] == "user"][-1:]
    last_calls = calls
    if last_user and last_user != shown:  # the window holds more than the message to answer: score it alone too
        last_calls = await score(_conversation(last_user, names))
    means, bests = _item_means(who, items, calls)
    last_means, _ = _item_means(who, items, last_calls)
    average, average_best = sum(means.values()) / len(means), sum(bests.values()) / len(bests)
    last_average = sum(last_means.values()) / len(last_means)
    out = {
        p.id: {
            "pmi_mean": means[p.id],
            "pmi_rel": means[p.id] - average,
            "pmi_max": bests[p.id],
            "max_rel": bests[p.id] - average_best,
            "pmi_last_mean": last_means[p.id],
            "pmi_last_rel": last_means[p.id] - last_average,
            "spoke": float(any(speaker == p.id for speaker, _ in shown)),
        }
        for p in who
    }
    return out, calls if last_calls is calls else [*calls, *last_calls]


def best_expertise(who: Sequence[Participant], calls: Sequence[OptionScores]) -> dict[str, str]:
    """Per participant, the expertise item the conversation is most about (highest PMI averaged over the cues,
    the items in `handraise_features`' order), cut to 60 characters: the words a card's reason can show instead
    of a bare number."""
    items = expertise_items(who)
    pmi = item_pmi(calls)
    best: dict[str, tuple[float, str]] = {}
    for (pid, item), value in zip(items, pmi, strict=True):
        if pid not in best or value > best[pid][0]:
            best[pid] = (value, item)
    return {pid: item if len(item) <= 60 else item[:59] + "…" for pid, (_, item) in best.items()}
