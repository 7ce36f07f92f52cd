"""Hand raise: before anyone answers, each model's will to speak is judged; hands at or above the threshold
are shown as cards the user approves or skips.

This module holds the configuration with the seed's defaults and the pure decisions: will from its
components, cooldown, over-raise damping, the three modes, @mentions, batch actions and timeouts, the
one-cycle-per-turn loop guard, and the what-if re-decision of a recorded conversation. The judge (judge.py) and
the conversation (conversation.py) build on these.

Seed defaults: will = 0.5·relevance + 0.3·novelty + 0.2·confidence, threshold 0.6, focus mode,
brainstorm auto-allow above 0.3 with a cap on speakers, cooldown −0.1 per recent turn spoken (floor 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from engine.embeddings import EMBEDDERS, USE_ID


class Mode(StrEnum):
    FOCUS = "focus"  # hands shown, the user approves (default)
    BRAINSTORM = "brainstorm"  # will above `brainstorm_auto_allow` is approved automatically, up to a cap
    MENTION_ONLY = "mention_only"  # no will judgment: only @mentioned models answer


JudgeMethod = Literal["likelihood", "judge", "self", "hybrid", "embedding"]
TimeoutAction = Literal["skip", "approve"]
# The embedding judge's default sentence embedder (`HandRaiseConfig.embedder`; an id of engine.embeddings.EMBEDDERS,
# each with its own fitted map `handraise.embedding.<id>.json`): the multilingual USE, which reads Japanese where
# MiniLM cannot (calibration split, 5-fold CV by cast: F1 0.74 against 0.68; Japanese 0.76 against 0.45; the
# shipped benchmark: F1 0.77 against 0.56, Japanese 0.74 against 0.24). docs/hand-raise.md has the figures.
DEFAULT_EMBEDDER = USE_ID
EMBEDDER_ENV = "HANDRAISE_EMBEDDER"  # where the CLI and the Hand raise page read another default from


def check_embedder(embedder_id: str) -> str:
    """The id, if it names a known embedder; else a ValueError that lists the known ones."""
    if embedder_id not in EMBEDDERS:
        raise ValueError(f"unknown embedder {embedder_id!r} — known: {', '.join(EMBEDDERS)}")
    return embedder_id


class Weights(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    relevance: float = Field(0.5, ge=0)
    novelty: float = Field(0.3, ge=0)
    confidence: float = Field(0.2, ge=0)

    @model_validator(mode="after")
    def _positive(self) -> Weights:
        if self.relevance + self.novelty + self.confidence <= 0:
            raise ValueError("at least one weight must be above 0")
        return self


class HandRaiseConfig(BaseModel):
    """Every number the decisions use. Weights that do not sum to 1 are normalised by their sum, so a will
    stays in [0, 1] whatever the sliders say (with the seed's weights this is the seed's formula)."""

    model_config = ConfigDict(extra="forbid")

    weights: Weights = Field(default_factory=Weights)
    threshold: float = Field(0.6, ge=0, le=1)
    mode: Mode = Mode.FOCUS
    brainstorm_auto_allow: float = Field(0.3, ge=0, le=1, description="brainstorm: will above this is approved")
    brainstorm_max_speakers: int = Field(2, ge=1, le=64, description="brainstorm: at most this many auto-approved")
    cooldown_enabled: bool = True
    cooldown_per_turn: float = Field(0.1, ge=0, le=1, description="will lost per recent turn the model spoke in")
    cooldown_window: int = Field(3, ge=1, le=50, description="how many earlier user turns count as recent")
    over_raise_window: int = Field(5, ge=2, le=100, description="turns looked at to detect a model always raising")
    over_raise_level: float = Field(
        0.9, ge=0, le=1, description="a raw will at or above this in every one of the window's turns is over-raising"
    )
    over_raise_damping: float = Field(0.8, gt=0, le=1, description="factor applied to an over-raising will")
    card_timeout_s: float | None = Field(None, gt=0, description="None: cards wait for the user")
    timeout_action: TimeoutAction = "skip"
    auto_approve_at: float | None = Field(None, ge=0, le=1, description="a standing 'will ≥ X auto-approve' rule")
    judge_method: JudgeMethod = "likelihood"  # the README's default: option likelihoods through a fitted map
    judge_model: str = "gemma3-270m"
    likelihood_ensemble: list[str] = Field(
        default_factory=lambda: ["smollm2-135m"],
        description="likelihood method: other models whose option log-probabilities are averaged with the judge "
        "model's, where a map was fitted for that combination",
    )
    context_turns: int = Field(3, ge=1, le=50, description="recent turns given to the judge")
    gate: bool = Field(
        True,
        description="likelihood and embedding methods: each relevance × p(the message asks for an answer) "
        "(engine/handraise/gate.py): a greeting or a thank-you is relevant to nobody",
    )
    embedder: str = Field(
        DEFAULT_EMBEDDER,
        description="embedding method: the sentence embedder (minilm | use-m3) whose cosines the judge reads, "
        "through its own fitted map handraise.embedding.<embedder>.json (the likelihood judge's novelty keeps "
        "MiniLM, the embedder its maps were fitted with)",
    )

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        return check_embedder(value)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """The embedder is stored only with a config whose judge reads it (the embedding method): every other
        config dumps, hashes and replays as it did before the setting existed."""
        data: dict[str, object] = handler(self)
        if self.judge_method != "embedding":
            data.pop("embedder", None)
        if self.judge_method not in ("likelihood", "embedding"):  # the gate: only the offline judges read it
            data.pop("gate", None)
        return data


def stored_config(data: Mapping[str, Any]) -> HandRaiseConfig:
    """A stored run's config read back: one stored before the embedder was a setting has no `embedder`, and its
    embedding judge read MiniLM (its recorded vectors are MiniLM's), so that is what it replays with; one stored
    before the gate has no `gate`, and its hands were judged ungated, so it replays ungated."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a hand-raise config must be an object, not {type(data).__name__}")
    before = {"embedder": "minilm", "gate": False}
    return HandRaiseConfig.model_validate({k: v for k, v in before.items() if k not in data} | dict(data))


def default_ensemble(known: Iterable[str], judge_model: str) -> list[str]:
    """The default likelihood partners (`HandRaiseConfig.likelihood_ensemble`) that a catalog knows, other than
    the judge model: what the page preselects and the CLI uses without `--ensemble`, so both store the same
    config (a catalog without them: the judge model alone)."""
    ids = set(known)
    return [m for m in HandRaiseConfig().likelihood_ensemble if m in ids and m != judge_model]


# -- will --------------------------------------------------------------------------------------------------


def clamp01(x: float) -> float:
    if x != x:  # NaN
        return 0.0
    return 0.0 if x < 0 else 1.0 if x > 1 else float(x)


def will_from(relevance: float, novelty: float, confidence: float, weights: Weights | None = None) -> float:
    """The seed's weighted sum (normalised by the weights' sum), each component clamped to [0, 1]."""
    w = weights or Weights()
    total = w.relevance + w.novelty + w.confidence
    value = (
        w.relevance * clamp01(relevance) + w.novelty * clamp01(novelty) + w.confidence * clamp01(confidence)
    ) / total
    return round(value, 6)


def cooldown_delta(model: str, recent_speakers: Sequence[set[str] | frozenset[str]], config: HandRaiseConfig) -> float:
    """−`cooldown_per_turn` for each of the last `cooldown_window` user turns in which the model spoke."""
    if not config.cooldown_enabled:
        return 0.0
    spoke = sum(model in turn for turn in recent_speakers[-config.cooldown_window :])
    return round(-config.cooldown_per_turn * spoke, 6)


def over_raising(raw_history: Sequence[float], config: HandRaiseConfig) -> bool:
    """A model whose raw will reached `over_raise_level` in each of its last `over_raise_window` turns."""
    window = raw_history[-config.over_raise_window :]
    return len(window) == config.over_raise_window and all(w >= config.over_raise_level for w in window)


# -- mentions ------------------------------------------------------------------------------------------------

MENTION = re.compile(r"(?<![\w.@])@([\w][\w.\-]*)", re.UNICODE)


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-.]+", "", name).casefold()


@dataclass(frozen=True)
class Mentions:
    models: frozenset[str] = frozenset()
    all: bool = False
    unknown: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.all or bool(self.models)


def parse_mentions(text: str, names: Mapping[str, Sequence[str]]) -> Mentions:
    """@name and @all anywhere in the message (not only at its start; not inside e-mail addresses).
    `names` maps a model id to its aliases (its profile name, say); matching ignores case, spaces, '-',
    '_' and '.'. A mention may be followed by punctuation ("@gemma, what…")."""
    lookup: dict[str, str] = {}
    for model_id, aliases in names.items():
        for alias in (model_id, *aliases):
            lookup.setdefault(_norm(alias), model_id)
    found: set[str] = set()
    unknown: list[str] = []
    everyone = False
    for match in MENTION.finditer(text):
        token = match.group(1).rstrip(".-")
        key = _norm(token)
        if key in ("all", "everyone", "全員"):
            everyone = True
        elif key in lookup:
            found.add(lookup[key])
        else:
            # "@gemma3-270m's" or a longer alias with spaces: try the longest known alias at this spot.
            rest = _norm(text[match.start(1) : match.start(1) + 64])
            hit = max((alias for alias in lookup if alias and rest.startswith(alias)), key=len, default=None)
            if hit:
                found.add(lookup[hit])
            else:
                unknown.append(token)
    return Mentions(models=frozenset(found), all=everyone, unknown=tuple(unknown))


# -- the decisions of one turn ------------------------------------------------------------------------------


class Components(BaseModel):
    """A judge's answer for one model."""

    model_config = ConfigDict(extra="forbid")

    model: str
    relevance: float = Field(ge=0, le=1)
    novelty: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    reason: str = ""
    flags: list[str] = Field(default_factory=list)  # fallback, invalid:…, missing:…, repaired, …
    # The judge's raw features (likelihood PMIs, embedding cosines) behind these numbers: stored with the hand,
    # so a label on it can refit the map with no model call (engine/labels). Empty for judges that write numbers.
    features: dict[str, float] = Field(default_factory=dict)


class HandStatus(StrEnum):
    RAISED = "raised"  # at or above the threshold: a card
    LOWERED = "lowered"  # below the threshold: no card
    MENTIONED = "mentioned"  # @name: answers without a card
    NOT_JUDGED = "not_judged"  # mention-only mode, not mentioned


@dataclass(slots=True)
class Hand:
    """One model's hand in one turn (a slotted dataclass: the what-if re-decides thousands at a time)."""

    model: str
    relevance: float
    novelty: float
    confidence: float
    raw_will: float
    will: float
    status: HandStatus
    cooldown_delta: float = 0.0
    over_raise_factor: float = 1.0  # 1.0: no adjustment
    reason: str = ""
    flags: list[str] = field(default_factory=list)
    features: dict[str, float] = field(default_factory=dict)  # the judge's raw features (Components.features)

    def payload(self) -> dict[str, object]:
        extra: dict[str, object] = {"features": dict(self.features)} if self.features else {}
        return extra | {
            "model": self.model,
            "relevance": self.relevance,
            "novelty": self.novelty,
            "confidence": self.confidence,
            "raw_will": self.raw_will,
            "cooldown_delta": self.cooldown_delta,
            "over_raise_factor": self.over_raise_factor,
            "will": self.will,
            "status": self.status.value,
            "reason": self.reason,
            "flags": list(self.flags),
        }


@dataclass
class History:
    """What earlier user turns left behind: who spoke, and each model's raw will."""

    speakers: list[set[str]] = field(default_factory=list)
    raw_wills: dict[str, list[float]] = field(default_factory=dict)

    def record(self, spoke: Iterable[str], raw: Mapping[str, float]) -> None:
        self.speakers.append(set(spoke))
        for model, value in raw.items():
            self.raw_wills.setdefault(model, []).append(value)


def decide_hands(
    components: Sequence[Components],
    config: HandRaiseConfig,
    history: History | None = None,
    mentions: Mentions | None = None,
    models: Sequence[str] | None = None,
) -> list[Hand]:
    """One turn: the will of each judged model after cooldown and over-raise damping, and whether its hand
    goes up. @name answers without a card; @all puts every judged model's card up (the seed: judge on
    @all too, and let "approve all" give the old behaviour). Mention-only mode judges nobody."""
    history = history or History()
    mentions = mentions or Mentions()
    hands: list[Hand] = []
    if config.mode == Mode.MENTION_ONLY:
        everyone = list(models or [c.model for c in components])
        for model in everyone:
            mentioned = mentions.all or model in mentions.models
            hands.append(
                Hand(
                    model=model,
                    relevance=0,
                    novelty=0,
                    confidence=0,
                    raw_will=0,
                    will=0,
                    status=HandStatus.MENTIONED if mentioned else HandStatus.NOT_JUDGED,
                    reason="mentioned" if mentioned else "mention-only mode",
                )
            )
        return hands
    for c in components:
        raw = will_from(c.relevance, c.novelty, c.confidence, config.weights)
        delta = cooldown_delta(c.model, history.speakers, config)
        damped = over_raising(history.raw_wills.get(c.model, []), config)
        factor = config.over_raise_damping if damped else 1.0
        will = round(max(0.0, raw + delta) * factor, 6)
        flags = list(c.flags) + (["over_raise"] if damped else [])
        if c.model in mentions.models:
            status = HandStatus.MENTIONED
        elif mentions.all or (will >= config.threshold and "self:SKIP" not in c.flags):
            status = HandStatus.RAISED
        else:
            status = HandStatus.LOWERED
        hands.append(
            Hand(
                model=c.model,
                relevance=c.relevance,
                novelty=c.novelty,
                confidence=c.confidence,
                raw_will=raw,
                cooldown_delta=delta,
                over_raise_factor=factor,
                will=will,
                status=status,
                reason=c.reason,
                flags=flags,
                features=dict(c.features),
            )
        )
    return hands


# -- approvals ------------------------------------------------------------------------------------------------

DecidedBy = Literal["user", "auto_rule", "timeout", "mention", "mode", "batch", "cancel"]


@dataclass(slots=True, frozen=True)
class Resolution:
    model: str
    approved: bool
    by: DecidedBy
    rule: str = ""


Action = Literal["approve", "skip"]


def auto_resolutions(hands: Sequence[Hand], config: HandRaiseConfig) -> dict[str, Resolution]:
    """What is decided without the user: mentions answer; below-threshold hands are skipped by the mode;
    brainstorm approves wills above `brainstorm_auto_allow`, highest first, up to the cap; a standing
    `auto_approve_at` rule approves raised hands at or above it. Raised hands left out wait for the user."""
    out: dict[str, Resolution] = {}
    for h in hands:
        if h.status == HandStatus.MENTIONED:
            out[h.model] = Resolution(model=h.model, approved=True, by="mention", rule="@mention")
        elif h.status == HandStatus.NOT_JUDGED:
            out[h.model] = Resolution(model=h.model, approved=False, by="mode", rule="mention-only mode")
    if config.mode == Mode.BRAINSTORM:
        eligible = sorted(
            (h for h in hands if h.model not in out and h.will > config.brainstorm_auto_allow),
            key=lambda h: (-h.will, h.model),
        )
        for h in eligible[: config.brainstorm_max_speakers]:
            out[h.model] = Resolution(
                model=h.model,
                approved=True,
                by="auto_rule",
                rule=f"brainstorm: will {h.will:.2f} > {config.brainstorm_auto_allow}",
            )
        for h in eligible[config.brainstorm_max_speakers :]:
            if h.status != HandStatus.RAISED:
                out[h.model] = Resolution(
                    model=h.model,
                    approved=False,
                    by="auto_rule",
                    rule=f"brainstorm cap of {config.brainstorm_max_speakers} speakers",
                )
    if config.auto_approve_at is not None:
        for h in hands:
            if h.model not in out and h.status == HandStatus.RAISED and h.will >= config.auto_approve_at:
                out[h.model] = Resolution(
                    model=h.model, approved=True, by="auto_rule", rule=f"will ≥ {config.auto_approve_at} auto-approve"
                )
    for h in hands:
        if h.model not in out and h.status == HandStatus.LOWERED:
            out[h.model] = Resolution(
                model=h.model, approved=False, by="mode", rule=f"will {h.will:.2f} < threshold {config.threshold}"
            )
    return out


def pending(hands: Sequence[Hand], resolved: Mapping[str, Resolution]) -> list[Hand]:
    """Cards still waiting for the user."""
    return [h for h in hands if h.model not in resolved]


def batch_actions(
    hands: Sequence[Hand], resolved: Mapping[str, Resolution], batch: str, at: float | None = None
) -> dict[str, Resolution]:
    """The seed's batch buttons over the waiting cards: approve_all, skip_all, auto_at (will ≥ `at`; the
    rest keep waiting)."""
    out = dict(resolved)
    for h in pending(hands, resolved):
        if batch == "approve_all":
            out[h.model] = Resolution(model=h.model, approved=True, by="batch", rule="approve all")
        elif batch == "skip_all":
            out[h.model] = Resolution(model=h.model, approved=False, by="batch", rule="skip all")
        elif batch == "auto_at":
            if at is None:
                raise ValueError("auto_at needs a will")
            if h.will >= at:
                out[h.model] = Resolution(model=h.model, approved=True, by="batch", rule=f"will ≥ {at}")
        else:
            raise ValueError(f"unknown batch action '{batch}'")
    return out


def user_action(
    hands: Sequence[Hand], resolved: Mapping[str, Resolution], model: str, action: Action
) -> dict[str, Resolution]:
    if model not in {h.model for h in pending(hands, resolved)}:
        raise ValueError(f"{model} has no card waiting")
    return {**resolved, model: Resolution(model=model, approved=action == "approve", by="user")}


def timeout_resolutions(
    hands: Sequence[Hand], resolved: Mapping[str, Resolution], config: HandRaiseConfig
) -> dict[str, Resolution]:
    """When the card timeout passes, every waiting card is skipped (or approved) per `timeout_action`."""
    out = dict(resolved)
    for h in pending(hands, resolved):
        out[h.model] = Resolution(
            model=h.model,
            approved=config.timeout_action == "approve",
            by="timeout",
            rule=f"no decision in {config.card_timeout_s} s → {config.timeout_action}",
        )
    return out


def skip_line(hand: Hand) -> str:
    """The seed's log line for a model that does not answer; a judgment that failed says which field."""
    failed = failure_flags(hand.flags)
    return f"SKIP (will={hand.will:.2f}, reason={hand.reason or '-'})" + (f" ⚠ {', '.join(failed)}" if failed else "")


# -- the loop guard -------------------------------------------------------------------------------------------


class LoopGuard:
    """One raise → approve → answer cycle per user turn. A second raise in the same turn (a model's
    answer prompting more hands, say) is refused, and every refusal is kept for the telemetry."""

    def __init__(self, max_cycles: int = 1) -> None:
        self.max_cycles = max_cycles
        self._cycles: dict[str, int] = {}
        self.refused: list[tuple[str, str]] = []

    def allow(self, turn_id: str, source: str = "") -> bool:
        used = self._cycles.get(turn_id, 0)
        if used >= self.max_cycles:
            self.refused.append((turn_id, source))
            return False
        self._cycles[turn_id] = used + 1
        return True


# -- what-if: re-deciding a recorded conversation ---------------------------------------------------------------


class TurnRecord(BaseModel):
    """A recorded user turn: the judged components and what the user did with the cards."""

    turn: int
    text: str = ""
    mentions: list[str] = Field(default_factory=list)
    mention_all: bool = False
    components: list[Components]
    models: list[str] = Field(default_factory=list)  # every model in the conversation (mention-only mode)
    user_actions: dict[str, Action] = Field(default_factory=dict)
    timed_out: bool = False


@dataclass
class TurnOutcome:
    turn: int
    hands: list[Hand]
    resolutions: dict[str, Resolution]

    @property
    def speakers(self) -> list[str]:
        return [m for m, r in self.resolutions.items() if r.approved]


def redecide(turns: Sequence[TurnRecord], config: HandRaiseConfig, unrecorded: Action = "skip") -> list[TurnOutcome]:
    """Decide a whole recorded conversation again under `config`, with no model call. Each turn's
    cooldown and over-raise history follow from the speakers decided for the turns before it. A card the
    user decided keeps that decision; a card the user never saw (it was not raised then) gets
    `unrecorded`; a recorded timeout applies the configured timeout action."""
    history = History()
    outcomes: list[TurnOutcome] = []
    for record in turns:
        mentions = Mentions(models=frozenset(record.mentions), all=record.mention_all)
        hands = decide_hands(
            record.components, config, history, mentions, models=record.models or [c.model for c in record.components]
        )
        resolved = auto_resolutions(hands, config)
        for h in pending(hands, resolved):
            if h.model in record.user_actions:
                resolved[h.model] = Resolution(
                    model=h.model, approved=record.user_actions[h.model] == "approve", by="user"
                )
            elif record.timed_out:
                resolved.update(timeout_resolutions([h], resolved, config))
            else:
                resolved[h.model] = Resolution(
                    model=h.model, approved=unrecorded == "approve", by="user", rule="what-if: no recorded decision"
                )
        history.record([m for m, r in resolved.items() if r.approved], {h.model: h.raw_will for h in hands})
        outcomes.append(TurnOutcome(turn=record.turn, hands=hands, resolutions=resolved))
    return outcomes


def changed_hands(before: Sequence[TurnOutcome], after: Sequence[TurnOutcome]) -> list[dict[str, object]]:
    """Hands whose card or answer differs between two decisions of the same conversation."""
    rows: list[dict[str, object]] = []
    for b, a in zip(before, after, strict=True):
        b_hands = {h.model: h for h in b.hands}
        for h in a.hands:
            old = b_hands.get(h.model)
            if old is None:
                continue
            was, now = b.resolutions[h.model], a.resolutions[h.model]
            if old.status != h.status or was.approved != now.approved:
                rows.append(
                    {
                        "turn": a.turn,
                        "model": h.model,
                        "status_before": old.status.value,
                        "status_after": h.status.value,
                        "answered_before": was.approved,
                        "answered_after": now.approved,
                        "will_before": old.will,
                        "will_after": h.will,
                    }
                )
    return rows


# -- failed judgments ----------------------------------------------------------------------------------------

FAILED_FLAGS = ("invalid:", "missing:", "fallback", "truncated", "judge_error:", "self_error:", "judge:unparseable")


def failure_flags(flags: Sequence[str]) -> list[str]:
    """The flags that say a component is a fallback rather than a judgment (shown on cards and lines)."""
    return [f for f in flags if f.startswith(FAILED_FLAGS)]
