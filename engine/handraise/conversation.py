"""The conversation: a user message, the will judgment, the hands and their decisions, then the approved
participants' answers, each step an event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import runctx
from engine.config import get_settings
from engine.events import RUN_FINISHED, RUN_STARTED, EventBus, StoreSink
from engine.handraise.answers import ANSWER_MAX_TOKENS, speaker_names, write_answer
from engine.handraise.cast import Participant, Turn
from engine.handraise.decisions import (
    Action,
    Components,
    Hand,
    HandRaiseConfig,
    HandStatus,
    History,
    LoopGuard,
    Mentions,
    Mode,
    Resolution,
    TurnRecord,
    auto_resolutions,
    batch_actions,
    decide_hands,
    parse_mentions,
    pending,
    skip_line,
    stored_config,
    timeout_resolutions,
    user_action,
)
from engine.handraise.judge import JudgeCall, WillJudge
from engine.labelstore import LabelError, add_label, item_key
from engine.store import StoreError
from models.recording import RunCancelled, call_context
from models.source import ModelLookup

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from engine.events import Emit, EventSink
    from engine.store import Store


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
    # What tidying cut from each answer (`tidy_answer`: repeat, speaker, open_code, sentence), and why a
    # participant answered with its own model instead of its answering model.
    answer_cuts: dict[str, list[str]] = field(default_factory=dict)
    answer_fallbacks: dict[str, str] = field(default_factory=dict)
    answering: set[str] = field(default_factory=set)  # approved participants whose answer has started
    answered: bool = False
    # Set when the turn was cancelled: "judging" (no hands; the turn ends there) or "answering" (the cards
    # still waiting are skipped, the answers keep what they streamed); `cancel_reason` says why.
    cancelled: Literal["judging", "answering"] | None = None
    cancel_reason: str = ""

    @property
    def waiting(self) -> list[Hand]:
        return pending(self.hands, self.resolved)


class Conversation:
    """User message → will judgment → hands (events) → decisions (user, auto rules, timeout) → the
    approved participants answer in parallel, streamed; the others are logged `SKIP (will=…, reason=…)`.
    Every step is an event; `telemetry` holds one row per hand; `records` feeds the what-if."""

    def __init__(
        self,
        participants: Sequence[Participant],
        models: ModelLookup,
        config: HandRaiseConfig | None = None,
        *,
        emit: Emit | None = None,
        embedder: TextEmbedder | None = None,
        answer_max_tokens: int = ANSWER_MAX_TOKENS,
    ) -> None:
        self.participants = {p.id: p for p in participants}
        self.config = config or HandRaiseConfig()
        self.judge = WillJudge(participants, models, self.config, embedder=embedder)
        self.emit = emit or (lambda *_a, **_k: None)
        self.answer_max_tokens = answer_max_tokens
        self.turns: list[Turn] = []
        self.history = History()
        self.guard = LoopGuard()
        self.records: list[TurnRecord] = []
        self.telemetry: list[dict[str, Any]] = []
        self.states: list[TurnState] = []
        # Called with each decision the *user* made on a hand (a Speak/Skip on its card, an @mention): the
        # session records it as a label (engine/labels); None records nothing (a restored conversation).
        self.labeller: Callable[[TurnState, Hand, bool, str], None] | None = None

    def names(self) -> dict[str, list[str]]:
        return {p.id: [p.name] for p in self.participants.values()}

    async def user_message(self, text: str) -> TurnState:
        index = len(self.states)
        turn_id = f"t{index + 1}"
        mentions = parse_mentions(text, self.names())
        self.turns.append(Turn("user", text))
        self.guard.allow(turn_id, "user")
        self.emit(
            "user_message",
            turn=turn_id,
            text=text,
            mentions=sorted(mentions.models),
            mentionAll=mentions.all,
            unknownMentions=list(mentions.unknown),
        )
        facts = JudgeCall()
        components: list[Components] = []
        if self.config.mode != Mode.MENTION_ONLY:
            try:
                components, facts = await self.judge.judge(self.turns)
            except RunCancelled as exc:  # the turn ends here, stored as cancelled; the conversation goes on
                cancelled = TurnState(
                    turn_id=turn_id,
                    index=index,
                    text=text,
                    mentions=mentions,
                    hands=[],
                    resolved={},
                    judge_call=facts,
                    answered=True,
                    cancelled="judging",
                    cancel_reason=str(exc) or "cancelled",
                )
                self.states.append(cancelled)
                self.emit("turn_cancelled", turn=turn_id, stage="judging", reason=cancelled.cancel_reason)
                raise
        hands = decide_hands(components, self.config, self.history, mentions, models=list(self.participants))
        resolved = auto_resolutions(hands, self.config)
        state = TurnState(
            turn_id=turn_id, index=index, text=text, mentions=mentions, hands=hands, resolved=resolved, judge_call=facts
        )
        self.states.append(state)
        self.emit(
            "hands",
            turn=turn_id,
            method=self.config.judge_method,
            mode=self.config.mode.value,
            hands=[h.payload() for h in hands],
            latencyS=round(facts.latency_s, 4),
            promptTokens=facts.prompt_tokens,
            completionTokens=facts.completion_tokens,
            calls=facts.calls,
            callIds=facts.call_ids,
            timeoutS=self.config.card_timeout_s,
        )
        for r in resolved.values():
            self._emit_decision(state, r)
        for h in hands:
            if h.status == HandStatus.MENTIONED and h.model in mentions.models:
                self._label(state, h, True, "mention")
        return state

    def _label(self, state: TurnState, hand: Hand, speak: bool, by: str) -> None:
        if self.labeller is not None:
            self.labeller(state, hand, speak, by)

    def _emit_decision(self, state: TurnState, r: Resolution) -> None:
        self.emit("hand_decision", turn=state.turn_id, participant=r.model, approved=r.approved, by=r.by, rule=r.rule)

    def act(self, state: TurnState, participant: str, action: Action) -> None:
        state.resolved = user_action(state.hands, state.resolved, participant, action)
        self._emit_decision(state, state.resolved[participant])
        hand = next(h for h in state.hands if h.model == participant)
        self._label(state, hand, action == "approve", "user")

    def batch(self, state: TurnState, kind: str, at: float | None = None) -> None:
        before = set(state.resolved)
        state.resolved = batch_actions(state.hands, state.resolved, kind, at)
        # In the order they were decided (not a set's): a stored conversation is rebuilt in that order.
        for model in [m for m in state.resolved if m not in before]:
            self._emit_decision(state, state.resolved[model])

    def timeout(self, state: TurnState) -> None:
        before = set(state.resolved)
        state.resolved = timeout_resolutions(state.hands, state.resolved, self.config)
        for model in [m for m in state.resolved if m not in before]:
            self._emit_decision(state, state.resolved[model])

    def raise_again(self, state: TurnState, source: str) -> bool:
        """A second raise in the same user turn (after an answer, say): refused by the loop guard."""
        allowed = self.guard.allow(state.turn_id, source)
        if not allowed:
            self.emit(
                "raise_refused",
                turn=state.turn_id,
                source=source,
                rule="one raise → approve → answer cycle per user turn",
            )
        return allowed

    def cancel_turn(self, state: TurnState, reason: str = "cancelled by the user") -> None:
        """Stop a judged turn: every card still waiting is skipped (by "cancel"), every approved participant
        whose answer has not started gets none. Answers under way stop at their next call or token (the run
        control's cancel) and keep what they streamed; `close_answers` then closes the turn as usual, so the
        conversation goes on. The turn is stored with a `turn_cancelled` event."""
        if state.answered or state.cancelled:
            return
        state.cancelled, state.cancel_reason = "answering", reason
        for hand in list(state.waiting):
            state.resolved[hand.model] = Resolution(model=hand.model, approved=False, by="cancel", rule=reason)
            self._emit_decision(state, state.resolved[hand.model])
        for pid, r in state.resolved.items():
            if r.approved and pid not in state.answering and pid not in state.answers:
                state.answering.add(pid)
                state.answers[pid] = ""
                state.answer_errors[pid] = f"cancelled: {reason}"
                self.emit(
                    "answer_finished",
                    turn=state.turn_id,
                    participant=pid,
                    text="",
                    tokens=0,
                    error=f"cancelled: {reason}",
                )
        self.emit("turn_cancelled", turn=state.turn_id, stage="answering", reason=reason)

    async def answer(self, state: TurnState, on_chunk: Callable[[str, str], object] | None = None) -> TurnState:
        """The approved participants answer in parallel (streamed through `on_chunk(participant, text)`);
        cards still waiting count as skipped by the user's silence only after `timeout()`, so call it or
        decide them first."""

        if state.answered:
            raise ValueError(f"turn {state.turn_id} was already answered")
        if state.waiting:
            raise ValueError(f"cards still waiting: {', '.join(h.model for h in state.waiting)}")
        approved = [m for m, r in state.resolved.items() if r.approved and m not in state.answering]
        await asyncio.gather(*(self.answer_one(state, pid, on_chunk) for pid in approved))
        return self.close_answers(state)

    async def answer_one(
        self, state: TurnState, pid: str, on_chunk: Callable[[str, str], object] | None = None
    ) -> None:
        """One approved participant answers, streamed, as soon as it is approved (other cards may still
        wait). The answers join the conversation together, in `close_answers`."""
        if state.answered or pid in state.answering:
            raise ValueError(f"{pid} already answered turn {state.turn_id}")
        resolution = state.resolved.get(pid)
        if resolution is None or not resolution.approved:
            raise ValueError(f"{pid} was not approved to answer turn {state.turn_id}")
        state.answering.add(pid)
        context = list(self.turns)  # the user turn and what came before: answers join only at the close
        p = self.participants[pid]
        names = {q.id: q.name for q in self.participants.values()} | {"user": "User"}
        answerer, fallback = self._answerer(p)
        self.emit("answer_started", turn=state.turn_id, participant=pid, model=answerer)
        written = await write_answer(
            self.judge.model(answerer),
            p,
            context,
            names,
            speaker_names(list(self.participants.values())),
            context_turns=self.config.context_turns,
            max_tokens=self.answer_max_tokens,
            on_chunk=(lambda text: on_chunk(pid, text)) if on_chunk else None,
        )
        state.answers[pid] = written.tidy.text
        state.answer_cuts[pid] = written.tidy.cuts
        if written.tokens:
            state.answer_tokens[pid] = written.tokens
        if written.error:
            state.answer_errors[pid] = written.error
        if fallback:
            state.answer_fallbacks[pid] = fallback
        self.emit(
            "answer_finished",
            turn=state.turn_id,
            participant=pid,
            text=state.answers[pid],
            tokens=state.answer_tokens.get(pid, 0),
            error=state.answer_errors.get(pid),
            model=answerer,
            cuts=written.tidy.cuts,
            raw=written.raw if written.tidy.cuts else None,
            fallback=fallback,
        )

    def _answerer(self, p: Participant) -> tuple[str, str | None]:
        """The model that writes `p`'s answer: its answering model, or — when the models at hand do not know
        that one (a catalog without SmolLM2) — its own model, with the reason (stored with the answer)."""
        wanted = p.answering_model()
        if wanted == p.model_id:
            return wanted, None
        try:
            self.judge.model(wanted)
        except KeyError:
            return p.model_id, f"answering model {wanted} is not in the catalog: {p.model_id} answered"
        return wanted, None

    def close_answers(self, state: TurnState) -> TurnState:
        """Every card decided and every approved answer in: log the skips, add the answers to the
        conversation (in the participants' order) and close the turn."""
        if state.answered:
            raise ValueError(f"turn {state.turn_id} was already answered")
        if state.waiting:
            raise ValueError(f"cards still waiting: {', '.join(h.model for h in state.waiting)}")
        approved = [m for m, r in state.resolved.items() if r.approved]
        missing = [m for m in approved if m not in state.answers]
        if missing:
            raise ValueError(f"answers still missing: {', '.join(missing)}")
        for h in state.hands:
            if not state.resolved[h.model].approved:
                self.emit(
                    "skip", turn=state.turn_id, participant=h.model, line=skip_line(h), by=state.resolved[h.model].by
                )
        for pid in approved:  # answers join the conversation in the participants' order
            if state.answers.get(pid):
                self.turns.append(Turn(pid, state.answers[pid]))
        state.answered = True
        self._close_turn(state)
        return state

    def _close_turn(self, state: TurnState) -> None:
        spoke = [m for m, r in state.resolved.items() if r.approved and state.answers.get(m)]
        self.history.record(spoke, {h.model: h.raw_will for h in state.hands if h.status != HandStatus.NOT_JUDGED})
        users = {
            m: ("approve" if r.approved else "skip") for m, r in state.resolved.items() if r.by in ("user", "batch")
        }
        self.records.append(
            TurnRecord(
                turn=state.index,
                text=state.text,
                mentions=sorted(state.mentions.models),
                mention_all=state.mentions.all,
                components=[
                    Components(
                        model=h.model,
                        relevance=h.relevance,
                        novelty=h.novelty,
                        confidence=h.confidence,
                        reason=h.reason,
                        flags=h.flags,
                    )
                    for h in state.hands
                    if h.status != HandStatus.NOT_JUDGED
                ],
                models=list(self.participants),
                user_actions=users,
                timed_out=any(r.by == "timeout" for r in state.resolved.values()),
            )
        )
        n = max(1, len(state.hands))
        for h in state.hands:
            r = state.resolved[h.model]
            p = self.participants[h.model]
            self.telemetry.append(
                {
                    "turn": state.turn_id,
                    "participant": h.model,
                    "model": p.model_id,
                    "will": h.will,
                    "raw_will": h.raw_will,
                    "relevance": h.relevance,
                    "novelty": h.novelty,
                    "confidence": h.confidence,
                    "reason": h.reason,
                    "status": h.status.value,
                    "allowed": r.approved,
                    "decided_by": r.by,
                    "rule": r.rule,
                    "cooldown_delta": h.cooldown_delta,
                    "over_raise_factor": h.over_raise_factor,
                    "mode": self.config.mode.value,
                    "judge_method": self.config.judge_method,
                    "judge_latency_s": round(state.judge_call.latency_s / n, 4),
                    "judge_tokens": round((state.judge_call.prompt_tokens + state.judge_call.completion_tokens) / n, 1),
                    "answer_tokens": state.answer_tokens.get(h.model, 0),
                    "flags": ",".join(h.flags),
                }
            )
        self.emit("turn_closed", turn=state.turn_id, spoke=spoke)


def restore_conversation(
    run_config: Mapping[str, Any], events: Iterable[tuple[str, Mapping[str, Any]]], models: ModelLookup | None = None
) -> Conversation:
    """A stored conversation rebuilt from its run's config and events, with no model call: its turns, hands,
    decisions, answers, telemetry and what-if records, exactly as the live conversation held them. A turn
    whose cards were never all decided, or never answered, is left open. `models` is only needed to go on
    talking. Raises ValueError when the config or an event is not a conversation's."""

    try:
        participants = [Participant.model_validate(p) for p in run_config.get("participants", [])]
        config = stored_config(run_config.get("config", {}))
    except (ValidationError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a stored conversation's config: {exc}") from None
    if not participants:
        raise ValueError("not a stored conversation's config: it has no participants")
    conv = Conversation(participants, {} if models is None else models, config)  # no models: no new turn
    by_turn: dict[str, TurnState] = {}
    try:
        for type_, payload in events:
            _restore_event(conv, by_turn, type_, payload)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a stored conversation event cannot be read back: {type(exc).__name__}: {exc}") from None
    return conv


def _restore_event(conv: Conversation, by_turn: dict[str, TurnState], type_: str, p: Mapping[str, Any]) -> None:
    if type_ == "user_message":
        turn_id = str(p["turn"])
        conv.turns.append(Turn("user", str(p["text"])))
        conv.guard.allow(turn_id, "user")
        mentions = Mentions(
            models=frozenset(p.get("mentions", [])),
            all=bool(p.get("mentionAll")),
            unknown=tuple(p.get("unknownMentions", [])),
        )
        opened = TurnState(
            turn_id=turn_id,
            index=len(conv.states),
            text=str(p["text"]),
            mentions=mentions,
            hands=[],
            resolved={},
            judge_call=JudgeCall(),
        )
        conv.states.append(opened)
        by_turn[turn_id] = opened
        return
    state = by_turn.get(str(p.get("turn")))
    if state is None:
        return  # not a turn event (run_started, run_finished, …)
    if type_ == "hands":
        state.hands = [
            Hand(
                model=h["model"],
                relevance=h["relevance"],
                novelty=h["novelty"],
                confidence=h["confidence"],
                raw_will=h["raw_will"],
                will=h["will"],
                status=HandStatus(h["status"]),
                cooldown_delta=h.get("cooldown_delta", 0.0),
                over_raise_factor=h.get("over_raise_factor", 1.0),
                reason=h.get("reason", ""),
                flags=list(h.get("flags", [])),
                features={str(k): float(v) for k, v in (h.get("features") or {}).items()},
            )
            for h in p["hands"]
        ]
        state.judge_call = JudgeCall(
            latency_s=float(p.get("latencyS", 0.0)),
            prompt_tokens=int(p.get("promptTokens", 0)),
            completion_tokens=int(p.get("completionTokens", 0)),
            calls=int(p.get("calls", 0)),
            call_ids=list(p.get("callIds", [])),
        )
    elif type_ == "hand_decision":
        model = str(p["participant"])
        state.resolved[model] = Resolution(
            model=model, approved=bool(p["approved"]), by=p["by"], rule=p.get("rule", "")
        )
    elif type_ == "answer_finished":
        pid = str(p["participant"])
        state.answers[pid] = str(p.get("text") or "")
        state.answer_tokens[pid] = int(p.get("tokens") or 0)
        if p.get("error"):
            state.answer_errors[pid] = str(p["error"])
        if isinstance(p.get("cuts"), list):
            state.answer_cuts[pid] = [str(c) for c in p["cuts"]]
        if p.get("fallback"):
            state.answer_fallbacks[pid] = str(p["fallback"])
    elif type_ == "turn_cancelled":
        state.cancelled = "judging" if p.get("stage") == "judging" else "answering"
        state.cancel_reason = str(p.get("reason") or "")
        if state.cancelled == "judging":
            state.answered = True  # no hands: the turn ended there
    elif type_ == "turn_closed":
        # What `answer` does after the answers: they join the conversation, the turn is recorded.
        for pid in (m for m, r in state.resolved.items() if r.approved):
            if state.answers.get(pid):
                conv.turns.append(Turn(pid, state.answers[pid]))
        state.answered = True
        conv._close_turn(state)


# -- the conversation as a run: one entry point per user turn, called alike by the page and the CLI -------------


class ConversationConfig(BaseModel):
    """`handraise.conversation`: who takes part and every decision setting; the run's stored config."""

    model_config = ConfigDict(extra="forbid")

    participants: list[Participant] = Field(min_length=1)
    config: HandRaiseConfig = Field(default_factory=HandRaiseConfig)

    @model_validator(mode="after")
    def _unique(self) -> ConversationConfig:
        if len({p.id for p in self.participants}) != len(self.participants):
            raise ValueError("participant ids must be unique")
        return self


@dataclass
class ConversationSession:
    """An open conversation run: its id, the store its events go to, and the conversation itself."""

    run_id: str
    store: Store
    conversation: Conversation
    emit: Emit
    closed: bool = False


def open_conversation(
    config: ConversationConfig,
    models: ModelLookup,
    store: Store,
    *,
    sinks: list[EventSink] | None = None,
    name: str = "conversation",
    embedder: TextEmbedder | None = None,
) -> ConversationSession:
    """Open a `handraise.conversation` run — created with its config and a `run_started` event, as
    `engine.events.run_context` opens one; it spans many turns (`conversation_turn`) and many page scripts, so
    `close_conversation` finishes it."""

    stored = config.model_dump(mode="json")
    run = store.create_run("handraise.conversation", stored, name=name)
    bus = EventBus(run.id, [StoreSink(store), *(sinks or [])])
    bus.emit(RUN_STARTED, kind="handraise.conversation", name=name, config=stored)
    conversation = Conversation(config.participants, models, config.config, emit=bus.emit, embedder=embedder)
    session = ConversationSession(run_id=run.id, store=store, conversation=conversation, emit=bus.emit)
    if get_settings().auto_labels:
        conversation.labeller = _labeller(session)
    return session


def hand_context(state: TurnState, hand: Hand, config: HandRaiseConfig) -> dict[str, Any]:
    """What the judge saw and predicted for a hand, stored with its label: the raw features (a refit reads them
    with no model call), the components and will, the cut, and the map they went through."""
    version = next((f.split(":", 1)[1] for f in hand.flags if f.startswith("calibration:")), None)
    ensemble = next((f.split(":", 1)[1] for f in hand.flags if f.startswith(("ensemble:", "self_map:"))), None)
    return {
        "features": dict(hand.features),
        "relevance": hand.relevance,
        "novelty": hand.novelty,
        "confidence": hand.confidence,
        "raw_will": hand.raw_will,
        "will": hand.will,
        "threshold": config.threshold,
        "predicted": "speak" if hand.will >= config.threshold else "skip",
        "judge_method": config.judge_method,
        "judge_model": config.judge_model,
        "map_id": ensemble or (config.judge_model if version else None),
        "map_version": version,
        "participant": hand.model,
        "text": state.text[:240],
    }


def _labeller(session: ConversationSession) -> Callable[[TurnState, Hand, bool, str], None]:
    """Records the user's decisions on hands as `handraise` labels (source `approval`): a failure to record is
    logged and never stops the conversation."""

    def label(state: TurnState, hand: Hand, speak: bool, by: str) -> None:
        conv = session.conversation
        try:
            add_label(
                session.store,
                mechanism="handraise",
                run_id=session.run_id,
                item_key=item_key("handraise", turn=state.turn_id, participant=hand.model),
                label="speak" if speak else "skip",
                source="approval",
                context=hand_context(state, hand, conv.config) | {"by": by},
            )
        except (LabelError, StoreError) as exc:
            logging.getLogger(__name__).warning("label of %s/%s not recorded: %s", state.turn_id, hand.model, exc)

    return label


Decider = Callable[[TurnState], Awaitable[None]]
BatchDecision = Literal["approve_all", "skip_all"]


def decide_all(session: ConversationSession, kind: BatchDecision) -> Decider:
    """A decider that approves (or skips) every waiting card at once: the CLI's `--decide`."""

    async def decide(state: TurnState) -> None:
        session.conversation.batch(state, kind)

    return decide


async def conversation_turn(
    session: ConversationSession,
    text: str,
    *,
    decide: Decider | None = None,
    answer: bool = True,
    on_chunk: Callable[[str, str], None] | None = None,
) -> TurnState:
    """One user turn, from the message to the answers: the will judgment, the hands and what decides itself
    (mentions, mode, standing rules), then the cards through `decide` (the page's buttons, the CLI's
    policy), then the approved participants' answers, streamed through `on_chunk(participant, text)`.
    Without `decide` (or when cards still wait after it), or with `answer=False` (a page that streams the
    answers itself), the turn comes back unanswered: `answer_turn` ends it once every card is decided. Every
    model call is attributed to the conversation's run."""

    conv = session.conversation
    with call_context(run_id=session.run_id, purpose=f"handraise.judge:{conv.config.judge_method}"):
        runctx.progress(total=2, step="judging the will to speak")
        state = await conv.user_message(text)
        runctx.progress(advance=1, step=f"{len(state.waiting)} card(s) waiting" if state.waiting else "decided")
    if state.waiting and decide is not None:
        await decide(state)
    if state.waiting or not answer:
        return state
    return await answer_turn(session, state, on_chunk=on_chunk)


async def answer_turn(
    session: ConversationSession, state: TurnState, *, on_chunk: Callable[[str, str], None] | None = None
) -> TurnState:
    """The approved participants of a decided turn answer (in parallel, streamed); the turn closes."""

    approved = [m for m, r in state.resolved.items() if r.approved]
    with call_context(run_id=session.run_id, purpose="handraise.answer"):
        runctx.progress(total=2, done=1, step=f"{len(approved)} answer(s)")
        await session.conversation.answer(state, on_chunk=on_chunk)
        runctx.progress(done=2, step="turn closed")
    return state


def turn_json(state: TurnState) -> dict[str, Any]:
    """A turn as stored and compared: the message, every hand, who decided what, and the answers; `cancelled`
    (the stage a cancel stopped) only on a cancelled turn, so a finished turn keeps the shape stored before."""
    turn: dict[str, Any] = {
        "turn": state.turn_id,
        "text": state.text,
        "mentions": sorted(state.mentions.models),
        "hands": [h.payload() for h in state.hands],
        "decisions": {m: {"approved": r.approved, "by": r.by, "rule": r.rule} for m, r in state.resolved.items()},
        "answers": dict(state.answers),
        "answer_errors": dict(state.answer_errors),
        "answered": state.answered,
    }
    if state.cancelled:
        turn["cancelled"] = state.cancelled
    return turn


def token_figures(conv: Conversation) -> dict[str, Any]:
    """Tokens spent (judgments + answers) against the baseline in which every participant answers every
    turn; a participant that did not answer is counted at the mean answer length of this conversation."""
    judge = sum(s.judge_call.prompt_tokens + s.judge_call.completion_tokens for s in conv.states)
    answers = [t for s in conv.states for t in s.answer_tokens.values()]
    spent_answers = sum(answers)
    mean_answer = spent_answers / len(answers) if answers else 0.0
    slots = sum(len(conv.participants) for s in conv.states if s.answered and s.cancelled != "judging")
    baseline = spent_answers + mean_answer * (slots - len(answers))
    return {
        "judge_tokens": judge,
        "answer_tokens": spent_answers,
        "spent_tokens": judge + spent_answers,
        "baseline_tokens": round(baseline),
        "answers": len(answers),
        "baseline_answers": slots,
    }


def conversation_summary(conv: Conversation) -> dict[str, Any]:
    return {
        "turns": len(conv.states),
        "answers": sum(len(s.answers) for s in conv.states),
        **token_figures(conv),
        "result": [turn_json(s) for s in conv.states],
    }


def close_conversation(session: ConversationSession) -> dict[str, Any]:
    """Finish the conversation's run with its summary (once; closing again changes nothing)."""

    summary = conversation_summary(session.conversation)
    if not session.closed:
        session.emit(RUN_FINISHED, summary=summary)
        session.store.finish_run(session.run_id, summary=summary)
        session.closed = True
    return summary
