"""Method B, the seed's self-judgment (各モデルの自己判定方式: `RESPOND/SKIP + will + reason`), read by likelihood, and
its bias corrected (短所: 常にRESPONDしがちバイアスへの補正が必要).

Each participant's own model is asked, as that participant, whether it should reply to the last message, and the
two answers are scored as continuations (`score_options`: " RESPOND" against " SKIP") instead of written: the
bundled Gemma base fails 43 % of its written self-judgments on the benchmark (31 of 72), but it ranks two words.
Read as is, the self-judgment is the seed's "always RESPOND" bias: P(RESPOND) > P(SKIP) for 89 % of the split's
participants where the labels say 26 % should speak. The features (`self_features`):

- `self_raw`: log P(RESPOND) − log P(SKIP), as read (its sign is the uncorrected decision);
- `self_lo`: the same after contextual calibration (Zhao et al. 2021: divided by the two words' probabilities
  after a content-free conversation, the prior every answer of this prompt shares);
- `self_rel`: `self_lo` minus the roster's mean (how much more this participant wants to reply than the others).

The correction is a map fitted on the calibration split through the seed's will formula, as the other hand-raise
maps are (`engine.handraise.maps._fit_will_maps`: relevance and confidence maps of these features, novelty of the
answers already given), stored as `handraise.likelihood.self.<model>.json` (`self_map_id`) so the Labels page's
refit (Speak / Skip) refits it like the likelihood judge's. Without a map the self-judgment is the uncorrected
P(RESPOND), flagged `self:unmapped` (and `self_map:<its map id>`, so labels of its hands can fit that map)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine import judgemaps
from engine.handraise.decisions import Components, clamp01
from engine.handraise.features import embedding_features, novelty_of, recorded_features
from engine.handraise.likelihood import HANDRAISE
from engine.likelihood import CONTENT_FREE, lines
from engine.quoting import quote
from models.errors import ModelError

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from engine.handraise.cast import Participant, Turn
    from models.base import ChatModel
    from models.types import OptionScores

OPTIONS = (" RESPOND", " SKIP")
SELF_PREFIX = "self."
# The features the self maps read (chosen by cross-validation on the calibration split, see docs/handraise.md).
SELF_FEATURES = {"relevance": ["self_lo"], "confidence": ["self_lo"]}
SELF_NEEDED = ("self_raw", "self_lo", "self_rel")


def self_map_id(model_id: str) -> str:
    """The map id of `model_id`'s self-judgment (`handraise.likelihood.self.<model>.json`)."""
    return f"{SELF_PREFIX}{model_id}"


def is_self_map(map_id: object) -> bool:
    """A self map's id: the prefix and a model id after it (a bare `self.` names no model)."""
    return isinstance(map_id, str) and map_id.startswith(SELF_PREFIX) and len(map_id) > len(SELF_PREFIX)


def self_prompt(p: Participant, shown: Sequence[tuple[str, str]], names: dict[str, str]) -> str:
    """The seed's two-stage self-judgment as a completion prompt: the conversation (quoted), who the model is, and
    the decision it completes with RESPOND or SKIP."""
    expertise = ", ".join(p.expertise) or "general"
    chat = lines([(names.get(speaker, speaker), text) for speaker, text in shown])
    return (
        f"Group chat (each message quoted, latest last):\n{chat}\n\n"
        f"You are {quote(p.name)}, {quote(p.role or 'a participant')}; your expertise: {quote(expertise)}. "
        "Before answering, decide: RESPOND only if you would add something relevant and new to the last "
        "message; otherwise SKIP.\nDecision:"
    )


async def self_features(
    model_for: Callable[[str], ChatModel],
    who: Sequence[Participant],
    turns: Sequence[Turn],
    context_turns: int,
) -> tuple[dict[str, dict[str, float]], list[OptionScores]]:
    """Per participant, its own model's self-judgment read by likelihood (`self_raw`, `self_lo`, `self_rel`: see the
    module), one scoring call each (the content-free conversation as its calibration prompt)."""
    names = {p.id: p.name for p in who} | {"user": "User"}
    shown = [(t.speaker, t.text) for t in list(turns)[-context_turns:]]
    calls: list[OptionScores] = []
    odds: dict[str, tuple[float, float]] = {}
    for p in who:
        scores = await model_for(p.model_id).score_options(
            self_prompt(p, shown, names), list(OPTIONS), calibration=self_prompt(p, [("user", CONTENT_FREE)], names)
        )
        calls.append(scores)
        raw = _log_odds(scores.probabilities)
        odds[p.id] = (raw, _log_odds(scores.calibrated) if scores.calibrated else raw)
    mean = sum(lo for _, lo in odds.values()) / max(1, len(odds))
    return {pid: {"self_raw": raw, "self_lo": lo, "self_rel": lo - mean} for pid, (raw, lo) in odds.items()}, calls


def _log_odds(probabilities: Sequence[float]) -> float:
    """log(p_RESPOND / p_SKIP), kept finite (a probability of 0 reads as 1e-12)."""
    respond, skip = (max(float(v), 1e-12) for v in probabilities[:2])
    return math.log(respond) - math.log(skip)


def respond_probability(features: dict[str, Any]) -> float:
    """The uncorrected self-judgment: P(RESPOND) as the model reads it."""
    return 1 / (1 + math.exp(-max(-500.0, min(500.0, float(features["self_raw"])))))


def reads_by_likelihood(model: ChatModel) -> bool:
    """Whether `model`'s self-judgment is read by likelihood: a base model (it continues text; the bundled Gemma
    fails 43 % of its written self-judgments on the benchmark). An instruction model writes its SelfJudgment."""
    return model.spec.preferred_judge == "likelihood"


async def self_components(
    model_for: Callable[[str], ChatModel],
    who: Sequence[Participant],
    turns: Sequence[Turn],
    context_turns: int,
    embedder: TextEmbedder,
) -> tuple[list[Components], list[OptionScores]]:
    """Method B read by likelihood, corrected: each participant's components through its model's self map (the
    seed's will formula then decides), the raw features kept for a refit from labels. A model without a map gives
    the uncorrected P(RESPOND) as relevance and confidence, flagged `self:unmapped`; a call that fails gives 0/0/0,
    flagged `self_error:<kind>` (a broken judgment keeps the model quiet)."""
    try:
        features, calls = await self_features(model_for, who, turns, context_turns)
    except ModelError as exc:
        return [_failed(p.id, f"self_error:{type(exc).__name__}") for p in who], []
    emb = embedding_features(who, turns, context_turns, embedder)
    out = []
    for p, e in zip(who, emb, strict=True):
        f = features[p.id]
        cal = judgemaps.load_calibration(HANDRAISE, self_map_id(p.model_id))
        said = "RESPOND" if f["self_raw"] > 0 else "SKIP"
        if cal is None:
            rel = conf = respond_probability(f)
            # the map a refit from this hand's label would fit (labels of unmapped hands bootstrap one)
            flags = ["self:likelihood", "self:unmapped", f"self_map:{self_map_id(p.model_id)}"]
        else:
            rel, conf = cal.apply("relevance", f), cal.apply("confidence", f)
            flags = ["self:likelihood", f"calibration:{cal.version}", f"self_map:{cal.model_id}"]
        out.append(
            Components(
                model=p.id,
                relevance=round(clamp01(rel), 4),
                novelty=round(novelty_of(cal, e), 4),
                confidence=round(clamp01(conf), 4),
                reason=f"said {said} (P(RESPOND) {respond_probability(f):.2f})",
                flags=flags,
                features=recorded_features(f, e),
            )
        )
    return out, calls


def _failed(pid: str, flag: str) -> Components:
    return Components(model=pid, relevance=0, novelty=0, confidence=0, flags=[flag, "fallback"])
