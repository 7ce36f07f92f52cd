"""The conversation: a user message, the will judgment, the hands and their decisions, then the approved
participants' answers, each step an event."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    timeout_resolutions,
    user_action,
)
from engine.handraise.judge import JudgeCall, WillJudge
from models.source import ModelLookup

if TYPE_CHECKING:
    from engine.embeddings import Embedder
    from engine.events import Emit


def _context_lines(turns: Sequence[Turn], names: Mapping[str, str], limit: int) -> str:
    shown = list(turns)[-limit:]
    return "\n".join(f"{names.get(t.speaker, t.speaker)}: {t.text}" for t in shown) or "(empty)"


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

    def __init__(self, participants: Sequence[Participant], models: ModelLookup, config: HandRaiseConfig | None = None,
                 *, emit: Emit | None = None, embedder: Embedder | None = None, answer_max_tokens: int = 160) -> None:
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

    async def answer(self, state: TurnState, on_chunk: Callable[[str, str], object] | None = None) -> TurnState:
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
