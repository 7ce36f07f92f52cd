"""The skip judge's labels (`LabelSpec` in its spec): an item is one message of a scope (`s1#7`), its label whether
it should have been replied to. Labels come from the Skip cache page; no run kind lists items for the queue."""

from __future__ import annotations

from engine.mechanism import LabelHooks


def item_key(**parts: object) -> str:
    """`s1#7`: the scope and the message."""
    return f"{parts['scope']}#{parts['message']}"


HOOKS = LabelHooks(item_key)
