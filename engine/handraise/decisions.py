"""Hand raise: before anyone answers, each model's will to speak is judged; hands at or above the threshold
are shown as cards the user approves or skips.

This module holds the configuration with the seed's defaults and the pure decisions: will from its
components, cooldown, over-raise damping, the three modes, @mentions, batch actions and timeouts, the
one-cycle-per-turn loop guard, and the what-if re-decision of a recorded conversation. Judging (which
model calls) and orchestration build on these.

Seed defaults: will = 0.5·relevance + 0.3·novelty + 0.2·confidence, threshold 0.6, focus mode,
brainstorm auto-allow above 0.3 with a cap on speakers, cooldown −0.1 per recent turn spoken (floor 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from engine.quoting import DATA_NOTE, quote


class Mode(StrEnum):
    FOCUS = "focus"  # hands shown, the user approves (default)
    BRAINSTORM = "brainstorm"  # will above `brainstorm_auto_allow` is approved automatically, up to a cap
    MENTION_ONLY = "mention_only"  # no will judgment: only @mentioned models answer


JudgeMethod = Literal["likelihood", "judge", "self", "hybrid", "embedding"]
TimeoutAction = Literal["skip", "approve"]


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
    over_raise_level: float = Field(0.9, ge=0, le=1, description="a raw will at or above this in every one of "
                                                                 "the window's turns is over-raising")
    over_raise_damping: float = Field(0.8, gt=0, le=1, description="factor applied to an over-raising will")
    card_timeout_s: float | None = Field(None, gt=0, description="None: cards wait for the user")
    timeout_action: TimeoutAction = "skip"
    auto_approve_at: float | None = Field(None, ge=0, le=1, description="a standing 'will ≥ X auto-approve' rule")
    judge_method: JudgeMethod = "judge"
    judge_model: str = "gemma3-270m"
    context_turns: int = Field(3, ge=1, le=50, description="recent turns given to the judge")


# -- will --------------------------------------------------------------------------------------------------


def clamp01(x: float) -> float:
    if x != x:  # NaN
        return 0.0
    return 0.0 if x < 0 else 1.0 if x > 1 else float(x)


def will_from(relevance: float, novelty: float, confidence: float, weights: Weights | None = None) -> float:
    """The seed's weighted sum (normalised by the weights' sum), each component clamped to [0, 1]."""
    w = weights or Weights()
    total = w.relevance + w.novelty + w.confidence
    value = (w.relevance * clamp01(relevance) + w.novelty * clamp01(novelty)
             + w.confidence * clamp01(confidence)) / total
    return round(value, 6)


def cooldown_delta(model: str, recent_speakers: Sequence[set[str] | frozenset[str]], config: HandRaiseConfig) -> float:
    """−`cooldown_per_turn` for each of the last `cooldown_window` user turns in which the model spoke."""
    if not config.cooldown_enabled:
        return 0.0
    spoke = sum(model in turn for turn in recent_speakers[-config.cooldown_window:])
    return round(-config.cooldown_per_turn * spoke, 6)


def over_raising(raw_history: Sequence[float], config: HandRaiseConfig) -> bool:
    """A model whose raw will reached `over_raise_level` in each of its last `over_raise_window` turns."""
    window = raw_history[-config.over_raise_window:]
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
            rest = _norm(text[match.start(1):match.start(1) + 64])
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

    def payload(self) -> dict[str, object]:
        return {"model": self.model, "relevance": self.relevance, "novelty": self.novelty,
                "confidence": self.confidence, "raw_will": self.raw_will, "cooldown_delta": self.cooldown_delta,
                "over_raise_factor": self.over_raise_factor, "will": self.will, "status": self.status.value,
                "reason": self.reason, "flags": list(self.flags)}


@dataclass
class History:
    """What earlier user turns left behind: who spoke, and each model's raw will."""

    speakers: list[set[str]] = field(default_factory=list)
    raw_wills: dict[str, list[float]] = field(default_factory=dict)

    def record(self, spoke: Iterable[str], raw: Mapping[str, float]) -> None:
        self.speakers.append(set(spoke))
        for model, value in raw.items():
            self.raw_wills.setdefault(model, []).append(value)


def decide_hands(components: Sequence[Components], config: HandRaiseConfig, history: History | None = None,
                 mentions: Mentions | None = None, models: Sequence[str] | None = None) -> list[Hand]:
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
            hands.append(Hand(model=model, relevance=0, novelty=0, confidence=0, raw_will=0, will=0,
                              status=HandStatus.MENTIONED if mentioned else HandStatus.NOT_JUDGED,
                              reason="mentioned" if mentioned else "mention-only mode"))
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
        hands.append(Hand(model=c.model, relevance=c.relevance, novelty=c.novelty, confidence=c.confidence,
                          raw_will=raw, cooldown_delta=delta, over_raise_factor=factor, will=will, status=status,
                          reason=c.reason, flags=flags))
    return hands


# -- approvals ------------------------------------------------------------------------------------------------

DecidedBy = Literal["user", "auto_rule", "timeout", "mention", "mode", "batch"]


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
        eligible = sorted((h for h in hands if h.model not in out and h.will > config.brainstorm_auto_allow),
                          key=lambda h: (-h.will, h.model))
        for h in eligible[:config.brainstorm_max_speakers]:
            out[h.model] = Resolution(model=h.model, approved=True, by="auto_rule",
                                      rule=f"brainstorm: will {h.will:.2f} > {config.brainstorm_auto_allow}")
        for h in eligible[config.brainstorm_max_speakers:]:
            if h.status != HandStatus.RAISED:
                out[h.model] = Resolution(model=h.model, approved=False, by="auto_rule",
                                          rule=f"brainstorm cap of {config.brainstorm_max_speakers} speakers")
    if config.auto_approve_at is not None:
        for h in hands:
            if h.model not in out and h.status == HandStatus.RAISED and h.will >= config.auto_approve_at:
                out[h.model] = Resolution(model=h.model, approved=True, by="auto_rule",
                                          rule=f"will ≥ {config.auto_approve_at} auto-approve")
    for h in hands:
        if h.model not in out and h.status == HandStatus.LOWERED:
            out[h.model] = Resolution(model=h.model, approved=False, by="mode",
                                      rule=f"will {h.will:.2f} < threshold {config.threshold}")
    return out


def pending(hands: Sequence[Hand], resolved: Mapping[str, Resolution]) -> list[Hand]:
    """Cards still waiting for the user."""
    return [h for h in hands if h.model not in resolved]


def batch_actions(hands: Sequence[Hand], resolved: Mapping[str, Resolution], batch: str,
                  at: float | None = None) -> dict[str, Resolution]:
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


def user_action(hands: Sequence[Hand], resolved: Mapping[str, Resolution], model: str,
                action: Action) -> dict[str, Resolution]:
    if model not in {h.model for h in pending(hands, resolved)}:
        raise ValueError(f"{model} has no card waiting")
    return {**resolved, model: Resolution(model=model, approved=action == "approve", by="user")}


def timeout_resolutions(hands: Sequence[Hand], resolved: Mapping[str, Resolution],
                        config: HandRaiseConfig) -> dict[str, Resolution]:
    """When the card timeout passes, every waiting card is skipped (or approved) per `timeout_action`."""
    out = dict(resolved)
    for h in pending(hands, resolved):
        out[h.model] = Resolution(model=h.model, approved=config.timeout_action == "approve", by="timeout",
                                  rule=f"no decision in {config.card_timeout_s} s → {config.timeout_action}")
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


def redecide(turns: Sequence[TurnRecord], config: HandRaiseConfig,
             unrecorded: Action = "skip") -> list[TurnOutcome]:
    """Decide a whole recorded conversation again under `config`, with no model call. Each turn's
    cooldown and over-raise history follow from the speakers decided for the turns before it. A card the
    user decided keeps that decision; a card the user never saw (it was not raised then) gets
    `unrecorded`; a recorded timeout applies the configured timeout action."""
    history = History()
    outcomes: list[TurnOutcome] = []
    for record in turns:
        mentions = Mentions(models=frozenset(record.mentions), all=record.mention_all)
        hands = decide_hands(record.components, config, history, mentions,
                             models=record.models or [c.model for c in record.components])
        resolved = auto_resolutions(hands, config)
        for h in pending(hands, resolved):
            if h.model in record.user_actions:
                resolved[h.model] = Resolution(model=h.model, approved=record.user_actions[h.model] == "approve",
                                               by="user")
            elif record.timed_out:
                resolved.update(timeout_resolutions([h], resolved, config))
            else:
                resolved[h.model] = Resolution(model=h.model, approved=unrecorded == "approve", by="user",
                                               rule="what-if: no recorded decision")
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
                rows.append({"turn": a.turn, "model": h.model, "status_before": old.status.value,
                             "status_after": h.status.value, "answered_before": was.approved,
                             "answered_after": now.approved, "will_before": old.will, "will_after": h.will})
    return rows


# -- participants and judges ------------------------------------------------------------------------------------


class Participant(BaseModel):
    """A voice in the conversation: a catalog model and the profile it speaks with. Several participants
    may share one model (three roles over the bundled Gemma, say)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    model_id: str
    name: str
    icon: str = "🙋"
    expertise: list[str] = Field(default_factory=list)
    role: str = ""

    def profile_text(self) -> str:
        return f"{self.name}: {self.role}. Expertise: {', '.join(self.expertise) or 'general'}."


DEFAULT_CAST = [
    Participant(id="coder", model_id="gemma3-270m", name="Coder", icon="🧑‍💻",
                expertise=["Python", "debugging", "APIs", "databases"], role="writes and fixes code"),
    Participant(id="designer", model_id="gemma3-270m", name="Designer", icon="🎨",
                expertise=["UI", "UX", "colour", "typography"], role="shapes interfaces and visuals"),
    Participant(id="researcher", model_id="gemma3-270m", name="Researcher", icon="🔬",
                expertise=["statistics", "papers", "experiments", "evaluation"], role="checks evidence and methods"),
]


@dataclass(frozen=True)
class Turn:
    """One message of the conversation as the judges see it."""

    speaker: str  # "user" or a participant id
    text: str


@dataclass
class JudgeCall:
    """Facts of the calls a judgment took, for the telemetry."""

    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    call_ids: list[int] = field(default_factory=list)
    cost: float = 0.0  # dollars, as recorded with each call (0 for local models and replays)

    def add(self, completion: object) -> None:
        usage = getattr(completion, "usage", None)
        self.latency_s += float(getattr(completion, "latency_s", 0.0))
        self.cost += float(getattr(completion, "cost", 0.0) or 0.0)
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        self.calls += 1
        call_id = getattr(completion, "call_id", None)
        if call_id is not None:
            self.call_ids.append(call_id)


FIELDS = ("relevance", "novelty", "confidence")


FAILED_FLAGS = ("invalid:", "missing:", "fallback", "truncated", "judge_error:", "self_error:", "judge:unparseable")


def failure_flags(flags: Sequence[str]) -> list[str]:
    """The flags that say a component is a fallback rather than a judgment (shown on cards and lines)."""
    return [f for f in flags if f.startswith(FAILED_FLAGS)]


def _component(raw: object) -> tuple[float, str | None]:
    """(value, why it failed) for one judged component: a number in [0, 1], else the fallback 0.0."""
    if raw is None:
        return 0.0, "missing"
    if isinstance(raw, bool):
        return 0.0, "invalid"
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0, "missing"
    except OverflowError:  # an integer too large for a float
        return 0.0, "invalid"
    if not (math.isfinite(value) and 0 <= value <= 1):
        return 0.0, "invalid"
    return value, None


def components_from(model: str, obj: object, flags: Sequence[str] = ()) -> Components:
    """Components from whatever a judge returned for one participant. The documented fallback: a
    component that is missing or not a number counts as 0.0 and is flagged `missing:<field>`; one
    outside [0, 1], NaN or infinite (a 0–10 answer, say) is a failed field: 0.0, flagged
    `invalid:<field>` — never clamped into 1.0; no object at all gives 0/0/0 flagged `fallback`. A will
    of 0 never raises a hand, so a broken judgment keeps the model quiet rather than loud."""
    out_flags = list(flags)
    if not isinstance(obj, Mapping):
        return Components(model=model, relevance=0, novelty=0, confidence=0, reason="",
                          flags=[*out_flags, "fallback"])
    values: dict[str, float] = {}
    for name in FIELDS:
        value, why = _component(obj.get(name))
        if why is not None and f"{why}:{name}" not in out_flags:
            out_flags.append(f"{why}:{name}")
        values[name] = value
    reason = obj.get("reason")
    return Components(model=model, reason=str(reason).strip()[:200] if reason is not None else "", flags=out_flags,
                      **values)


def _scaled(value: object, scale: int) -> object:
    """A score on a 0..scale skeleton as a 0–1 component; anything but a number there (a string, a
    boolean) is invalid, NaN — the skeleton only ever holds digits."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return value / scale
    except OverflowError:
        return math.inf


def batched_components(data: object, ids: Sequence[str], flags: Sequence[str] = (), scale: int = 1
                       ) -> list[Components]:
    """Components of every participant from a batched answer ({id: {relevance, novelty, confidence,
    reason}}), each number divided by `scale`. An answer with any failed number (outside 0..scale, NaN,
    a boolean) is an invalid answer as a whole: every participant gets the fallback 0/0/0, flagged, since
    a judge that answered one participant on a 0–10 scale did so for the others too, and its "1" must
    not become the maximum."""
    data = data if isinstance(data, Mapping) else {}
    scaled: dict[str, object] = {}
    invalid: dict[str, list[str]] = {}
    for pid in ids:
        raw = data.get(pid)
        if isinstance(raw, Mapping) and scale != 1:
            raw = {**raw, **{f: _scaled(raw[f], scale) for f in FIELDS if f in raw}}
        scaled[pid] = raw
        if isinstance(raw, Mapping):
            # In the filled skeleton (scale 9) a slot always holds a digit: a null there is no skeleton output.
            invalid[pid] = [f"invalid:{f}" for f in FIELDS if f in raw and (
                _component(raw[f])[1] == "invalid" or (scale != 1 and raw[f] is None))]
    base = [*flags] + ([f"scale:0-{scale}"] if scale != 1 else [])
    if any(invalid.values()):
        return [components_from(pid, None, [*base, "judge:invalid_answer", *invalid.get(pid, [])]) for pid in ids]
    return [components_from(pid, scaled[pid], base) for pid in ids]


def parse_template_fill(text: str, ids: Sequence[str]) -> list[Components]:
    """The filled skeleton of the local batched judgment (see `template_parts`) → components; scores are
    the digits 0–9 read as n/9. Anything else is a fallback, flagged — never raises."""
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return [components_from(pid, None, ["scale:0-9", "judge:unparseable"]) for pid in ids]
    return batched_components(data, ids, (), scale=9)


def _context_lines(turns: Sequence[Turn], names: Mapping[str, str], limit: int) -> str:
    shown = list(turns)[-limit:]
    return "\n".join(f"{names.get(t.speaker, t.speaker)}: {t.text}" for t in shown) or "(empty)"


@lru_cache(maxsize=32)
def _batch_schema(ids: tuple[str, ...]) -> type[BaseModel]:
    one = create_model("WillScores", relevance=(float, Field(ge=0, le=1)), novelty=(float, Field(ge=0, le=1)),
                       confidence=(float, Field(ge=0, le=1)), reason=(str, Field(max_length=60)))
    return create_model("HandRaiseJudgment", **{i: (one, ...) for i in ids})  # type: ignore[call-overload]


DIGITS = [str(i) for i in range(10)]


def template_parts(ids: Sequence[str], reason_tokens: int = 8) -> list[tuple[str, Any]]:
    """The batched judgment's skeleton: {"id": {"relevance": d, "novelty": d, "confidence": d, "reason": "…"}, …}."""
    parts: list[tuple[str, Any]] = [("text", "{")]
    for k, pid in enumerate(ids):
        parts += [("text", ("," if k else "") + f'"{pid}": {{"relevance": '), ("choice", DIGITS),
                  ("text", ', "novelty": '), ("choice", DIGITS), ("text", ', "confidence": '), ("choice", DIGITS),
                  ("text", ', "reason": "'), ("free", (reason_tokens, '"\n')), ("text", '"}')]
    parts.append(("text", "}"))
    return parts


class SelfJudgment(BaseModel):
    decision: Literal["RESPOND", "SKIP"]
    relevance: float = Field(ge=0, le=1)
    novelty: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    reason: str = Field(max_length=60)


JUDGE_SYSTEM = ("You decide who in a group chat should speak next. For each participant rate from 0 to 1: "
                "relevance (the topic against their expertise), novelty (what they would add beyond what was "
                "already said), confidence (how sure their answer would be). Reason: a few words.")
SELF_SYSTEM = ("You are {name}, {role}. Expertise: {expertise}. Before answering, decide whether you should speak. "
               "RESPOND only if you would add something relevant and new; otherwise SKIP. Rate from 0 to 1 your "
               "relevance, novelty and confidence, and give a few words of reason.")


def _quoted_context(turns: Sequence[Turn], names: Mapping[str, str], limit: int) -> str:
    """The recent turns for a judge: one a line, speaker and text each a quoted string, so a message or an
    answer holding newlines and a fake "Name: …" line cannot pass for a turn of its own."""
    shown = list(turns)[-limit:]
    return "\n".join(f"- {quote(names.get(t.speaker, t.speaker))}: {quote(t.text)}" for t in shown) or "(empty)"


def judge_messages(participants: Sequence[Participant], turns: Sequence[Turn], context_turns: int
                   ) -> list[dict[str, str]]:
    names = {p.id: p.name for p in participants} | {"user": "User"}
    roster = "\n".join(f"- {p.id}: {quote(p.profile_text())}" for p in participants)
    return [{"role": "system", "content": f"{JUDGE_SYSTEM} {DATA_NOTE}"},
            {"role": "user", "content": f"Participants:\n{roster}\n\nConversation (latest last, one quoted "
             f"message a line):\n{_quoted_context(turns, names, context_turns)}\n\nRate every participant."}]


def self_messages(p: Participant, participants: Sequence[Participant], turns: Sequence[Turn], context_turns: int
                  ) -> list[dict[str, str]]:
    names = {q.id: q.name for q in participants} | {"user": "User"}
    return [{"role": "system", "content": SELF_SYSTEM.format(name=p.name, role=p.role or "a participant",
                                                             expertise=", ".join(p.expertise) or "general")
             + f" {DATA_NOTE}"},
            {"role": "user", "content": "Conversation (latest last, one quoted message a line):\n"
             f"{_quoted_context(turns, names, context_turns)}\n\nShould you speak?"}]


class WillJudge:
    """Judges every participant's will for one user turn with the configured method. Returns components
    (with flags) and the call facts; never raises for a bad or failed judgment (see `components_from`)."""

    def __init__(self, participants: Sequence[Participant], models: Any, config: HandRaiseConfig,
                 embedder: Any = None) -> None:
        self.participants = list(participants)
        self._models = models
        self.config = config
        self._embedder = embedder

    def model(self, model_id: str) -> Any:
        return self._models[model_id] if isinstance(self._models, Mapping) else self._models(model_id)

    async def judge(self, turns: Sequence[Turn], method: JudgeMethod | None = None,
                    candidates: Sequence[str] | None = None) -> tuple[list[Components], JudgeCall]:
        method = method or self.config.judge_method
        who = [p for p in self.participants if candidates is None or p.id in candidates]
        facts = JudgeCall()
        if not who:
            return [], facts
        if method == "judge":
            return await self._batched(who, turns, facts), facts
        if method == "self":
            return await self._self(who, turns, facts), facts
        if method == "embedding":
            import time

            started = time.perf_counter()
            out = self._embedding(who, turns)
            facts.latency_s = time.perf_counter() - started
            return out, facts
        if method == "likelihood":
            return await self._likelihood(who, turns, facts), facts
        judged = await self._batched(who, turns, facts)
        # hybrid: the judge filters; survivors judge themselves; each component is the mean of the two.
        survivors = [c.model for c in judged if will_from(c.relevance, c.novelty, c.confidence,
                                                          self.config.weights) >= self.config.threshold]
        own = {c.model: c for c in await self._self([p for p in who if p.id in survivors], turns, facts)}
        out = []
        for c in judged:
            s = own.get(c.model)
            if s is None:
                out.append(c.model_copy(update={"flags": [*c.flags, "hybrid:filtered_by_judge"]}))
                continue
            out.append(Components(
                model=c.model, relevance=(c.relevance + s.relevance) / 2, novelty=(c.novelty + s.novelty) / 2,
                confidence=(c.confidence + s.confidence) / 2, reason=s.reason or c.reason,
                flags=[*c.flags, *s.flags, "hybrid:judge+self"]))
        return out, facts

    async def _batched(self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall
                       ) -> list[Components]:
        from models.errors import ModelError, StructuredOutputError
        from models.structured import ExtractionError, extract_json

        model = self.model(self.config.judge_model)
        if getattr(model, "template_capable", False):
            return await self._batched_template(model, who, turns, facts)
        schema = _batch_schema(tuple(p.id for p in who))
        try:
            completion = await model.complete(
                judge_messages(who, turns, self.config.context_turns), schema=schema, temperature=0.0,
                max_tokens=40 + 45 * len(who))
        except StructuredOutputError as exc:
            if "truncated" in exc.flags:  # cut off at max_tokens: no value of it is trusted
                return [components_from(p.id, None, ["judge:truncated", "truncated"]) for p in who]
            try:
                obj, repairs = extract_json(exc.raw_text or "")
            except ExtractionError:
                obj, repairs = None, []
            return batched_components(obj, [p.id for p in who], ["judge:unparseable", *repairs])
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        facts.add(completion)
        parsed = completion.parsed or {}
        return [components_from(p.id, parsed.get(p.id), [f for f in completion.flags
                                                        if f.split(":", 1)[-1].startswith(p.id)]) for p in who]

    async def _batched_template(self, model: Any, who: Sequence[Participant], turns: Sequence[Turn],
                                facts: JudgeCall) -> list[Components]:
        """The batched judgment on a local model: the JSON skeleton is fixed text, so only the nine score
        digits (0-9, read as n/9) and three short reasons cost decoding steps — one request, a fraction of
        the grammar-constrained output's steps."""
        from models.errors import ModelError

        messages = judge_messages(who, turns, self.config.context_turns)
        messages[0]["content"] = messages[0]["content"].replace("rate from 0 to 1", "rate from 0 to 9")
        try:
            completion = await model.fill_template(messages, template_parts([p.id for p in who]))
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        facts.add(completion)
        return parse_template_fill(completion.text, [p.id for p in who])

    async def _self(self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall) -> list[Components]:
        import asyncio

        from models.errors import ModelError

        async def one(p: Participant) -> Components:
            try:
                completion = await self.model(p.model_id).complete(
                    self_messages(p, self.participants, turns, self.config.context_turns), schema=SelfJudgment,
                    temperature=0.0, max_tokens=80)
            except ModelError as exc:
                return components_from(p.id, None, [f"self_error:{type(exc).__name__}", *getattr(exc, "flags", [])])
            facts.add(completion)
            parsed = completion.parsed or {}
            c = components_from(p.id, parsed, completion.flags)
            if parsed.get("decision") == "SKIP":
                # A model that says SKIP keeps its hand down whatever its scores (decide_hands reads the
                # flag); an @mention or @all still brings it in.
                return c.model_copy(update={"flags": [*c.flags, "self:SKIP"]})
            return c

        return list(await asyncio.gather(*(one(p) for p in who)))

    async def _likelihood(self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall
                          ) -> list[Components]:
        """The judge model ranks options instead of writing numbers (engine/likelihood.py): relevance and
        confidence are fitted maps of the PMI of each participant's expertise with the conversation;
        novelty is the embedding novelty (a likelihood novelty measured no better than chance). A model
        that cannot score, or a failed call, gives the 0/0/0 fallback with a flag."""
        import math
        import time

        from engine.judgemaps import load_calibration
        from engine.likelihood import HANDRAISE, handraise_features
        from models.errors import ModelError

        model = self.model(self.config.judge_model)
        started = time.perf_counter()
        try:
            features, calls = await handraise_features(model, who, turns, self.config.context_turns)
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        for c in calls:
            facts.calls += 1
            facts.prompt_tokens += c.prompt_tokens
            if c.call_id is not None:
                facts.call_ids.append(c.call_id)
        novelty = {c.model: c.novelty for c in self._embedding(who, turns)}
        facts.latency_s += time.perf_counter() - started
        cal = load_calibration(HANDRAISE, model.model_id) or load_calibration(HANDRAISE, "default")
        out = []
        for p in who:
            f = features[p.id]
            if not all(math.isfinite(v) for v in f.values()):
                out.append(components_from(p.id, None, ["likelihood", "invalid:likelihood_features"]))
                continue
            if cal is None:  # no fitted map for this model: a plain squash of the PMI, flagged
                rel = conf = 1 / (1 + math.exp(-f["pmi_mean"]))
                flags = ["likelihood", "uncalibrated"]
            else:
                rel, conf = cal.apply("relevance", f), cal.apply("confidence", f)
                flags = ["likelihood", f"calibration:{cal.version}"]
            out.append(Components(model=p.id, relevance=round(rel, 4), novelty=novelty[p.id],
                                  confidence=round(conf, 4), flags=flags,
                                  reason=f"PMI {f['pmi_mean']:+.2f} (best {f['pmi_max']:+.2f})"))
        return out

    def _embedding(self, who: Sequence[Participant], turns: Sequence[Turn]) -> list[Components]:
        """No LLM: MiniLM cosine similarities (see `embedding_features`) mapped to [0, 1] by the fitted
        calibration `handraise.embedding` (logistic maps learnt on data/calibration/, never on the
        benchmark); without one, by the fixed (cos − 0.1) / 0.5, flagged `uncalibrated`. Novelty is always
        1 − the fixed map of the closest answer by another participant."""
        from engine.judgemaps import load_calibration

        cal = load_calibration(EMBEDDING, EMBEDDER_ID)
        out = []
        for p, f in zip(who, embedding_features(who, turns, self.config.context_turns, self._embedder), strict=True):
            if cal is None:
                relevance, confidence, flags = cos_scale(f["rel_cos"]), cos_scale(f["conf_cos"]), ["uncalibrated"]
            else:
                relevance, confidence = cal.apply("relevance", f), cal.apply("confidence", f)
                flags = [f"calibration:{cal.version}"]
            out.append(Components(model=p.id, relevance=round(relevance, 4), novelty=round(1 - cos_scale(
                f["answer_cos"]), 4), confidence=round(confidence, 4), reason=f"closest expertise: {f['expertise']}",
                flags=["embedding", *flags]))
        return out


EMBEDDING = "handraise.embedding"
EMBEDDER_ID = "minilm"


def cos_scale(cos: float) -> float:
    """The fixed cosine map: unrelated MiniLM texts sit near 0.1, close paraphrases above 0.6."""
    return clamp01((cos - 0.1) / 0.5)


def embedding_features(who: Sequence[Participant], turns: Sequence[Turn], context_turns: int, embedder: Any = None
                       ) -> list[dict[str, Any]]:
    """Per participant: `rel_cos` = cosine of the recent context to the profile; `conf_cos` = the best cosine
    of the context to one expertise item (named in `expertise`); `answer_cos` = the highest cosine of the
    profile to an answer already given by another participant in the context (−1 when there is none)."""
    import numpy as np

    from engine.embeddings import get_embedder

    embedder = embedder or get_embedder()
    recent = list(turns)[-context_turns:]
    context = " ".join(t.text for t in recent) or "(empty)"
    answers = [t for t in recent if t.speaker != "user"]
    texts = [context] + [p.profile_text() for p in who] + [a.text for a in answers]
    expertise = [(p.id, e) for p in who for e in (p.expertise or [p.role or p.name])]
    vectors = embedder.embed(texts + [e for _, e in expertise])
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    ctx = vectors[0]
    profiles = vectors[1:1 + len(who)]
    answer_vecs = vectors[1 + len(who):1 + len(who) + len(answers)]
    exp_vecs = vectors[1 + len(who) + len(answers):]
    out = []
    for i, p in enumerate(who):
        others = [j for j, a in enumerate(answers) if a.speaker != p.id]
        mine = [k for k, (pid, _) in enumerate(expertise) if pid == p.id]
        best = max(mine, key=lambda k: float(exp_vecs[k] @ ctx))
        out.append({"rel_cos": float(profiles[i] @ ctx), "conf_cos": float(exp_vecs[best] @ ctx),
                    "answer_cos": max((float(profiles[i] @ answer_vecs[j]) for j in others), default=-1.0),
                    "expertise": expertise[best][1]})
    return out


# -- orchestration -----------------------------------------------------------------------------------------------

ANSWER_SYSTEM = "You are {name}, {role}, in a group chat with a user and other assistants. Answer briefly and add " \
                "what only you can add."


@dataclass
class TurnState:
    """One user turn in flight: the hands, who decided what, and the answers."""

    turn_id: str
    index: int
    text: str
    mentions: Mentions
    hands: list[Hand]
    resolved: dict[str, Resolution]
    judge_call: JudgeCall
    answers: dict[str, str] = field(default_factory=dict)
    answer_tokens: dict[str, int] = field(default_factory=dict)
    answer_errors: dict[str, str] = field(default_factory=dict)
    answered: bool = False

    @property
    def waiting(self) -> list[Hand]:
        return pending(self.hands, self.resolved)


class Conversation:
    """User message → will judgment → hands (events) → decisions (user, auto rules, timeout) → the
    approved participants answer in parallel, streamed; the others are logged `SKIP (will=…, reason=…)`.
    Every step is an event; `telemetry` holds one row per hand; `records` feeds the what-if."""

    def __init__(self, participants: Sequence[Participant], models: Any, config: HandRaiseConfig | None = None,
                 *, emit: Any = None, embedder: Any = None, answer_max_tokens: int = 160) -> None:
        self.participants = {p.id: p for p in participants}
        self.config = config or HandRaiseConfig()
        self.judge = WillJudge(participants, models, self.config, embedder=embedder)
        self._models = models
        self.emit = emit or (lambda *_a, **_k: None)
        self.answer_max_tokens = answer_max_tokens
        self.turns: list[Turn] = []
        self.history = History()
        self.guard = LoopGuard()
        self.records: list[TurnRecord] = []
        self.telemetry: list[dict[str, Any]] = []
        self.states: list[TurnState] = []

    def names(self) -> dict[str, list[str]]:
        return {p.id: [p.name] for p in self.participants.values()}

    async def user_message(self, text: str) -> TurnState:
        index = len(self.states)
        turn_id = f"t{index + 1}"
        mentions = parse_mentions(text, self.names())
        self.turns.append(Turn("user", text))
        self.guard.allow(turn_id, "user")
        self.emit("user_message", turn=turn_id, text=text, mentions=sorted(mentions.models), mentionAll=mentions.all,
                  unknownMentions=list(mentions.unknown))
        facts = JudgeCall()
        components: list[Components] = []
        if self.config.mode != Mode.MENTION_ONLY:
            components, facts = await self.judge.judge(self.turns)
        hands = decide_hands(components, self.config, self.history, mentions, models=list(self.participants))
        resolved = auto_resolutions(hands, self.config)
        state = TurnState(turn_id=turn_id, index=index, text=text, mentions=mentions, hands=hands,
                          resolved=resolved, judge_call=facts)
        self.states.append(state)
        self.emit("hands", turn=turn_id, method=self.config.judge_method, mode=self.config.mode.value,
                  hands=[h.payload() for h in hands], latencyS=round(facts.latency_s, 4),
                  promptTokens=facts.prompt_tokens, completionTokens=facts.completion_tokens, calls=facts.calls,
                  callIds=facts.call_ids, timeoutS=self.config.card_timeout_s)
        for r in resolved.values():
            self._emit_decision(state, r)
        return state

    def _emit_decision(self, state: TurnState, r: Resolution) -> None:
        self.emit("hand_decision", turn=state.turn_id, participant=r.model, approved=r.approved, by=r.by, rule=r.rule)

    def act(self, state: TurnState, participant: str, action: Action) -> None:
        state.resolved = user_action(state.hands, state.resolved, participant, action)
        self._emit_decision(state, state.resolved[participant])

    def batch(self, state: TurnState, kind: str, at: float | None = None) -> None:
        before = set(state.resolved)
        state.resolved = batch_actions(state.hands, state.resolved, kind, at)
        for model in set(state.resolved) - before:
            self._emit_decision(state, state.resolved[model])

    def timeout(self, state: TurnState) -> None:
        before = set(state.resolved)
        state.resolved = timeout_resolutions(state.hands, state.resolved, self.config)
        for model in set(state.resolved) - before:
            self._emit_decision(state, state.resolved[model])

    def raise_again(self, state: TurnState, source: str) -> bool:
        """A second raise in the same user turn (after an answer, say): refused by the loop guard."""
        allowed = self.guard.allow(state.turn_id, source)
        if not allowed:
            self.emit("raise_refused", turn=state.turn_id, source=source, rule="one raise → approve → answer cycle "
                      "per user turn")
        return allowed

    async def answer(self, state: TurnState, on_chunk: Any = None) -> TurnState:
        """The approved participants answer in parallel (streamed through `on_chunk(participant, text)`);
        cards still waiting count as skipped by the user's silence only after `timeout()`, so call it or
        decide them first."""
        import asyncio

        from models.errors import ModelError

        if state.answered:
            raise ValueError(f"turn {state.turn_id} was already answered")
        if state.waiting:
            raise ValueError(f"cards still waiting: {', '.join(h.model for h in state.waiting)}")
        approved = [m for m, r in state.resolved.items() if r.approved]
        context = list(self.turns)

        async def one(pid: str) -> None:
            p = self.participants[pid]
            names = {q.id: q.name for q in self.participants.values()} | {"user": "User"}
            messages = [{"role": "system", "content": ANSWER_SYSTEM.format(name=p.name, role=p.role or "an assistant")},
                        {"role": "user", "content": _context_lines(context, names, self.config.context_turns)}]
            self.emit("answer_started", turn=state.turn_id, participant=pid)
            pieces: list[str] = []
            try:
                async for chunk in self.judge.model(p.model_id).stream(messages, temperature=0.7,
                                                                      max_tokens=self.answer_max_tokens, seed=7):
                    if chunk.text:
                        pieces.append(chunk.text)
                        if on_chunk:
                            on_chunk(pid, chunk.text)
                    if chunk.completion is not None:
                        state.answer_tokens[pid] = chunk.completion.usage.completion_tokens
            except ModelError as exc:
                state.answer_errors[pid] = f"{type(exc).__name__}: {exc.message}"
            state.answers[pid] = "".join(pieces).strip()
            self.emit("answer_finished", turn=state.turn_id, participant=pid, text=state.answers[pid],
                      tokens=state.answer_tokens.get(pid, 0), error=state.answer_errors.get(pid))

        await asyncio.gather(*(one(pid) for pid in approved))
        for h in state.hands:
            if not state.resolved[h.model].approved:
                self.emit("skip", turn=state.turn_id, participant=h.model, line=skip_line(h),
                          by=state.resolved[h.model].by)
        for pid in approved:  # answers join the conversation in the participants' order
            if state.answers.get(pid):
                self.turns.append(Turn(pid, state.answers[pid]))
        state.answered = True
        self._close_turn(state)
        return state

    def _close_turn(self, state: TurnState) -> None:
        spoke = [m for m, r in state.resolved.items() if r.approved and state.answers.get(m)]
        self.history.record(spoke, {h.model: h.raw_will for h in state.hands if h.status != HandStatus.NOT_JUDGED})
        users = {m: ("approve" if r.approved else "skip") for m, r in state.resolved.items()
                 if r.by in ("user", "batch")}
        self.records.append(TurnRecord(
            turn=state.index, text=state.text, mentions=sorted(state.mentions.models), mention_all=state.mentions.all,
            components=[Components(model=h.model, relevance=h.relevance, novelty=h.novelty, confidence=h.confidence,
                                   reason=h.reason, flags=h.flags) for h in state.hands
                        if h.status != HandStatus.NOT_JUDGED],
            models=list(self.participants), user_actions=users,
            timed_out=any(r.by == "timeout" for r in state.resolved.values())))
        n = max(1, len(state.hands))
        for h in state.hands:
            r = state.resolved[h.model]
            p = self.participants[h.model]
            self.telemetry.append({
                "turn": state.turn_id, "participant": h.model, "model": p.model_id, "will": h.will,
                "raw_will": h.raw_will, "relevance": h.relevance, "novelty": h.novelty, "confidence": h.confidence,
                "reason": h.reason, "status": h.status.value, "allowed": r.approved, "decided_by": r.by,
                "rule": r.rule, "cooldown_delta": h.cooldown_delta, "over_raise_factor": h.over_raise_factor,
                "mode": self.config.mode.value, "judge_method": self.config.judge_method,
                "judge_latency_s": round(state.judge_call.latency_s / n, 4),
                "judge_tokens": round((state.judge_call.prompt_tokens + state.judge_call.completion_tokens) / n, 1),
                "answer_tokens": state.answer_tokens.get(h.model, 0), "flags": ",".join(h.flags)})
        self.emit("turn_closed", turn=state.turn_id, spoke=spoke)


# -- the judge benchmark ------------------------------------------------------------------------------------------

ContextMode = Literal["1", "3", "5", "summary"]


class BenchTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: str
    text: str = Field(min_length=1)


class BenchItem(BaseModel):
    """A labelled multi-party dialogue: who should speak after its last message."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    language: str | None = None
    participants: list[Participant] | None = None  # default: DEFAULT_CAST
    context: list[BenchTurn] = Field(min_length=1)
    summary: str | None = None
    labels: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> BenchItem:
        ids = {p.id for p in self.cast()}
        unknown = sorted(set(self.labels) - ids) + sorted({t.speaker for t in self.context} - ids - {"user"})
        if unknown:
            raise ValueError(f"unknown participants: {', '.join(unknown)}")
        return self

    def cast(self) -> list[Participant]:
        return list(self.participants) if self.participants else list(DEFAULT_CAST)

    def turns(self, mode: ContextMode) -> list[Turn]:
        all_turns = [Turn(t.speaker, t.text) for t in self.context]
        if mode == "summary":
            earlier = [Turn("user", f"(Summary of the conversation so far: {self.summary})")] if (
                self.summary and len(all_turns) > 1) else []
            return earlier + all_turns[-1:]
        return all_turns[-int(mode):]


def parse_benchmark(content: str, source: str = "benchmark") -> list[BenchItem]:
    import json

    from pydantic import ValidationError

    items: list[BenchItem] = []
    problems: list[str] = []
    for number, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(BenchItem.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: not JSON ({exc.msg})")
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "item"
            problems.append(f"{source}:{number}: {where}: {err['msg']}")
    if len({i.id for i in items}) != len(items):
        problems.append(f"{source}: duplicate item ids")
    if problems:
        from engine.inputs import problem_lines

        raise ValueError("bad benchmark, nothing loaded:\n" + problem_lines(problems))
    if not items:
        raise ValueError(f"{source}: no items")
    return items


async def evaluate_item(item: BenchItem, models: Any, config: HandRaiseConfig, context: ContextMode,
                        repeat: int = 1, embedder: Any = None, model_ids: Sequence[str] | None = None
                        ) -> dict[str, Any]:
    """Judge one item `repeat` times: per repeat each participant's will and whether its hand went up,
    with the judgment's latency and tokens. `model_ids` re-seats the cast on other models (cycled)."""
    cast = item.cast()
    if model_ids:
        cast = [p.model_copy(update={"model_id": model_ids[i % len(model_ids)]}) for i, p in enumerate(cast)]
    turns = item.turns(context)
    judge = WillJudge(cast, models, config.model_copy(update={"context_turns": max(1, len(turns))}),
                      embedder=embedder)
    runs = []
    for _ in range(repeat):
        comps, facts = await judge.judge(turns)
        hands = decide_hands(comps, config)
        runs.append({"predictions": {h.model: {"will": h.will, "speak": h.status == HandStatus.RAISED,
                                               "reason": h.reason, "flags": h.flags} for h in hands},
                     "latency_s": round(facts.latency_s, 4), "calls": facts.calls,
                     "tokens": facts.prompt_tokens + facts.completion_tokens, "cost": round(facts.cost, 10),
                     "call_ids": facts.call_ids})
    return {"id": item.id, "language": item.language, "labels": item.labels, "runs": runs}


def benchmark_totals(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals computed only from the items' predictions: every (item, participant, repeat) with a label
    counts once; consistency is the share of labelled (item, participant) pairs whose decision was the
    same in every repeat; latency is per judgment (one per item and repeat), tokens and cost per decision
    (cost: the dollars recorded with the judgment calls; None for lines stored without it)."""
    import statistics

    tp = fp = fn = tn = 0
    same = pairs = 0
    latencies: list[float] = []
    tokens = decisions = 0
    cost: float | None = 0.0
    for item in items:
        for run in item["runs"]:
            latencies.append(float(run["latency_s"]))
            tokens += int(run["tokens"])
            decisions += len(run["predictions"])
            cost = None if cost is None or "cost" not in run else cost + float(run["cost"])
        for pid, gold in item["labels"].items():
            said = [bool(run["predictions"][pid]["speak"]) for run in item["runs"]]
            pairs += 1
            same += len(set(said)) == 1
            for s in said:
                tp += s and gold
                fp += s and not gold
                fn += (not s) and gold
                tn += (not s) and not gold
    n = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (0.0 if n else None)
    return {"decisions_scored": n, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "accuracy": round((tp + tn) / n, 4) if n else None,
            "precision": None if precision is None else round(precision, 4),
            "recall": None if recall is None else round(recall, 4), "f1": None if f1 is None else round(f1, 4),
            "consistency": round(same / pairs, 4) if pairs else None,
            "median_latency_s": round(statistics.median(latencies), 4) if latencies else None,
            "tokens_per_decision": round(tokens / decisions, 2) if decisions else None,
            "cost_total": None if cost is None else round(cost, 8),
            "cost_per_decision": round(cost / decisions, 10) if cost is not None and decisions else None}


async def run_benchmark(store: Any, items: Sequence[BenchItem], models: Any, config: HandRaiseConfig,
                        context: ContextMode, repeat: int = 1, model_ids: Sequence[str] | None = None,
                        name: str = "", on_item: Any = None) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Evaluate a benchmark as one stored run (an event per item, the totals as its summary)."""
    from engine.events import async_run_context

    lines: list[dict[str, Any]] = []
    settings = {"method": config.judge_method, "context": context, "repeat": repeat, "models": list(model_ids or []),
                "items": len(items), "config": config.model_dump(mode="json")}
    async with async_run_context(store, "handraise.eval", settings,
                                 name=name or f"handraise eval {config.judge_method} context {context}") as run:
        for item in items:
            line = await evaluate_item(item, models, config, context, repeat, model_ids=model_ids)
            lines.append(line)
            run.emit("handraise_eval_item", **line)
            if on_item:
                on_item(line)
        totals = benchmark_totals(lines)
        run.summary = totals
    return run.run_id, lines, totals


# -- calibration of the likelihood and embedding judges ----------------------------------------------------------


async def calibration_rows(items: Sequence[BenchItem], model: Any, context_turns: int = 3,
                           embedder: Any = None) -> list[dict[str, Any]]:
    """The raw features of both judges for every labelled participant of a calibration split."""
    from engine.likelihood import handraise_features

    rows = []
    for item in items:
        cast, turns = item.cast(), item.turns(str(context_turns) if context_turns in (1, 3, 5) else "3")  # type: ignore[arg-type]
        features = (await handraise_features(model, cast, turns, context_turns))[0] if model is not None else {}
        for p, emb in zip(cast, embedding_features(cast, turns, context_turns, embedder), strict=True):
            if p.id in item.labels:
                rows.append({"item": item.id, "participant": p.id, "label": bool(item.labels[p.id]),
                             **features.get(p.id, {}), **{k: v for k, v in emb.items() if k != "expertise"}})
    return rows


def fit_calibrations(rows: Sequence[dict[str, Any]], model_id: str | None, source: str, data_sha256: str,
                     config: HandRaiseConfig | None = None) -> list[Any]:
    """Maps fitted *through the will formula*: relevance = σ(a·x_r + b) and confidence = σ(c·x_c + d) are
    learnt jointly so that the seed's will (weights, novelty) crossing the seed's threshold separates the
    labelled speakers from the rest — P(speak) = σ(k·(will − threshold)), class-balanced log-loss with a
    small L2 penalty. The formula and the threshold stay the seed's; only the maps into them are fitted.
    Likelihood judge: x_r = PMI mean and its lead over the roster, x_c = best PMI. Embedding judge:
    x_r = context–profile cosine, x_c = best expertise cosine. Novelty is the fixed embedding novelty."""
    from engine.judgemaps import Calibration, new_version

    config = config or HandRaiseConfig()
    version = new_version()
    common = {"version": version, "fitted_on": source, "data_sha256": data_sha256, "n_items": len(rows),
              "fitted_at": version}
    out = [Calibration(name=EMBEDDING, model_id=EMBEDDER_ID, **common,
                       **_fit_will_maps(rows, ["rel_cos"], ["conf_cos"], config))]
    if model_id is not None:
        out.append(Calibration(name="handraise.likelihood", model_id=model_id, **common,
                               **_fit_will_maps(rows, ["pmi_mean", "pmi_rel"], ["pmi_max"], config)))
    return out


def _fit_will_maps(rows: Sequence[dict[str, Any]], rel: list[str], conf: list[str], config: HandRaiseConfig,
                   l2: float = 0.01) -> dict[str, Any]:
    import numpy as np
    from scipy.optimize import minimize

    from engine.judgemaps import FittedMap

    y = np.asarray([bool(r["label"]) for r in rows], dtype=float)
    if y.min() == y.max():
        raise ValueError("the calibration split needs participants who should speak and participants who should not")
    xr = np.asarray([[float(r[f]) for f in rel] for r in rows])
    xc = np.asarray([[float(r[f]) for f in conf] for r in rows])
    novelty = np.asarray([1 - cos_scale(float(r["answer_cos"])) for r in rows])
    w = config.weights
    total = w.relevance + w.novelty + w.confidence
    balance = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    nr, nc = len(rel), len(conf)

    def sig(z: Any) -> Any:
        return 1 / (1 + np.exp(-z))

    def will(t: Any) -> Any:
        r = sig(xr @ t[:nr] + t[nr])
        c = sig(xc @ t[nr + 1:nr + 1 + nc] + t[nr + 1 + nc])
        return (w.relevance * r + w.novelty * novelty + w.confidence * c) / total

    def loss(t: Any) -> float:
        p = np.clip(sig(np.exp(t[-1]) * (will(t) - config.threshold)), 1e-9, 1 - 1e-9)
        return float(-(balance * (y * np.log(p) + (1 - y) * np.log(1 - p))).mean() + l2 * np.sum(t[:-1] ** 2))

    start = np.zeros(nr + nc + 3)
    start[-1] = np.log(10.0)
    t = minimize(loss, start, method="L-BFGS-B").x
    predicted = will(t) >= config.threshold
    tp = int((predicted & (y == 1)).sum())
    precision = tp / max(1, int(predicted.sum()))
    recall = tp / max(1, int(y.sum()))
    return {"maps": {
        "relevance": FittedMap(kind="logistic", features=rel, coef=[float(v) for v in t[:nr]], intercept=float(t[nr])),
        "confidence": FittedMap(kind="logistic", features=conf, coef=[float(v) for v in t[nr + 1:nr + 1 + nc]],
                                intercept=float(t[nr + 1 + nc]))},
        "metrics": {"fit_f1": round(2 * precision * recall / max(1e-9, precision + recall), 4),
                    "fit_precision": round(precision, 4), "fit_recall": round(recall, 4),
                    "sharpness": round(float(np.exp(t[-1])), 3), "threshold": config.threshold},
        "notes": "relevance/confidence maps fitted jointly through the will formula (see fit_calibrations)"}
