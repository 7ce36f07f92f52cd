"""How the history names a hand-raise run (`engine.mechanism.RunHooks`): a conversation by its first message."""

from __future__ import annotations

from engine.mechanism import RunHooks
from engine.quoting import short_text
from engine.store import Run


def about(run: Run, first: str | None) -> str:
    if run.kind != "handraise.conversation":
        return ""
    return f"“{short_text(first, 88)}”" if first else "conversation, no message yet"


HOOKS = RunHooks(about, first_event="user_message", generic_names=lambda run: ("conversation",))
