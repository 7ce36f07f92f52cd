"""The Hand raise page's demo: its messages judged with the default cast and settings, every raised hand
approved, the answers streamed."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.demo import PageDemo, log, recording_hub
from engine.handraise.cast import DEFAULT_CAST, Participant
from engine.handraise.conversation import (
    ConversationConfig,
    answer_turn,
    close_conversation,
    conversation_turn,
    open_conversation,
)
from engine.handraise.decisions import HandRaiseConfig, Mode, Weights
from engine.store import Store
from models.catalog import load_catalog

# Tried in order; the first that shows what the page is for is kept.
CONVERSATION_MESSAGES = [
    [
        "My Python API returns a KeyError when it reads the database config — how do I debug it?",
        "Which statistics should we report in the evaluation of the experiments?",
    ],
    ["Can someone review the colour and typography of our new UI?", "How do we evaluate it with users?"],
]


def page_cast() -> list[Any]:
    """The Hand raise page's default cast, rebuilt as the page rebuilds it from its table."""

    return [
        Participant(
            id=p.id,
            model_id=p.model_id,
            answer_model=p.answer_model,
            name=p.name,
            icon=p.icon,
            role=p.role,
            expertise=[e.strip() for e in ", ".join(p.expertise).split(",") if e.strip()],
        )
        for p in DEFAULT_CAST
    ]


def page_handraise_config() -> Any:
    """The Hand raise page's default settings (likelihood judge, threshold 0.6)."""

    return HandRaiseConfig(
        weights=Weights(relevance=0.5, novelty=0.3, confidence=0.2),
        threshold=0.6,
        mode=Mode(list(Mode)[0].value),
        judge_method="likelihood",
        judge_model=load_catalog().ids[0],
        cooldown_enabled=True,
        cooldown_per_turn=0.1,
        brainstorm_max_speakers=2,
        card_timeout_s=None,
        timeout_action="skip",
        auto_approve_at=None,
    )


async def record_conversation(store: Store, messages: list[str]) -> tuple[str, dict[str, Any]]:
    """The page's flow: each message judged (`conversation_turn`, answer=False), every card approved ("Approve
    all"), the approved answers streamed (`answer_turn`)."""

    session = open_conversation(
        ConversationConfig(participants=page_cast(), config=page_handraise_config()), recording_hub(store), store
    )
    raised = approved = 0
    for text in messages:
        turn = await conversation_turn(session, text, answer=False)
        raised += len(turn.waiting)
        if turn.waiting:
            session.conversation.batch(turn, "approve_all")
        approved += sum(r.approved for r in turn.resolved.values())
        await answer_turn(session, turn, on_chunk=lambda _pid, _text: None)
    close_conversation(session)
    return session.run_id, {"raised": raised, "approved": approved}


def record_page(store: Store) -> PageDemo:
    """The first messages that raise a hand and get one approved."""

    for messages in CONVERSATION_MESSAGES:
        run_id, facts = asyncio.run(record_conversation(store, messages))
        log(f"conversation {messages}: {facts}")
        if facts["raised"] and facts["approved"]:
            break
    return PageDemo(
        title="Hand raise",
        inputs=messages,
        run_ids=[run_id],
        note="Send the messages in this order with the default settings; approve the raised hands "
        f"({facts['raised']} raised, {facts['approved']} approved when recorded).",
    )
