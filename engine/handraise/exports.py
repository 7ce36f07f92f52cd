"""The handraise mechanism's export tables (the hands raised and the messages of a conversation),
named by its `MechanismSpec` (spec.py)."""

from __future__ import annotations

from typing import Any

from engine.exports.record import RunRecord
from engine.handraise.conversation import restore_conversation
from engine.handraise.decisions import skip_line
from engine.mechanism import ExportTable


def _conversation(record: RunRecord) -> Any:

    if not record.pairs("user_message"):
        return None
    try:
        return restore_conversation(record.run.config, record.pairs())
    except ValueError:
        return None  # not a conversation's config: its events are still in the `events` table


def hands(record: RunRecord) -> list[dict[str, Any]]:
    """One row per hand per answered turn: the page's telemetry."""
    conv = _conversation(record)
    return [] if conv is None else list(conv.telemetry)


def messages(record: RunRecord) -> list[dict[str, Any]]:
    """The chat: each user message, then each answer or skip line of its turn."""
    conv = _conversation(record)
    if conv is None:
        return []

    rows: list[dict[str, Any]] = []
    for state in conv.states:
        rows.append({"turn": state.turn_id, "speaker": "user", "kind": "message", "text": state.text})
        for h in state.hands:
            r = state.resolved.get(h.model)
            if r is not None and r.approved:
                rows.append(
                    {
                        "turn": state.turn_id,
                        "speaker": h.model,
                        "kind": "answer",
                        "text": state.answers.get(h.model, ""),
                        "tokens": state.answer_tokens.get(h.model),
                        "error": state.answer_errors.get(h.model),
                        "decided_by": r.by,
                    }
                )
            elif state.answered:
                rows.append(
                    {
                        "turn": state.turn_id,
                        "speaker": h.model,
                        "kind": "skip",
                        "text": skip_line(h),
                        "decided_by": None if r is None else r.by,
                    }
                )
    return rows


TABLES = (
    ExportTable("conversation_hands", "one row per hand per turn: will, components, decision", hands),
    ExportTable("conversation_messages", "the chat: messages, answers and skip lines", messages),
    ExportTable("handraise_eval_items", "one line per benchmark item", events=("handraise_eval_item",)),
)
