"""How the history names and reads a hand-raise run (`engine.mechanism.RunHooks`): a conversation by its first
message; a conversation has no end of its own, and its turns are its messages."""

from __future__ import annotations

from engine.mechanism import RunHooks
from engine.quoting import short_text
from engine.store import Run

CONVERSATION_KIND = "handraise.conversation"


def about(run: Run, first: str | None) -> str:
    if run.kind != CONVERSATION_KIND:
        return ""
    return f"“{short_text(first, 88)}”" if first else "conversation, no message yet"


HOOKS = RunHooks(
    about,
    first_event="user_message",
    generic_names=lambda run: ("conversation",),
    open_ended=lambda run: run.kind == CONVERSATION_KIND,
)
