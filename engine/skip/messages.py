"""The messages the checker reads: a conversation scope (a channel, or a thread in it), which messages are
unreplied and eligible for a judgment, where they come from (`MessageSource`) and an in-memory source
(`ListSource`) for the simulator and the tests."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from engine.skip.config import ResponseConfig


def scope_key(channel_id: str, thread_ts: str | None) -> str:
    return f"{channel_id}:{thread_ts or 'top'}"


@dataclass(frozen=True)
class Message:
    id: str
    channel_id: str
    thread_ts: str | None
    author: str
    text: str
    at: datetime
    is_bot: bool = False

    @property
    def scope(self) -> str:
        return scope_key(self.channel_id, self.thread_ts)


def unreplied(messages: Sequence[Message]) -> list[Message]:
    """Messages of one scope after the bot's last message there."""
    for i in range(len(messages) - 1, -1, -1):  # the bot's last message, from the end: none follows it
        if messages[i].is_bot:
            return list(messages[i + 1 :])
    return list(messages)


def eligible(messages: Sequence[Message], now: datetime, cfg: ResponseConfig) -> list[Message]:
    """Unreplied messages older than min_wait and not older than max_message_age."""
    low, high = cfg.min_wait_seconds, cfg.max_message_age_seconds
    return [m for m in unreplied(messages) if low <= (now - m.at).total_seconds() <= high]


def latest_eligible(messages: Sequence[Message], now: datetime, cfg: ResponseConfig) -> int | None:
    """The index of the last of `eligible(messages, now, cfg)` (None: none is), read from the end of a scope's
    history in arrival order: the bot's last message ends the search (what precedes it was answered), and so does
    the first message older than max_message_age (every earlier one is older still). What the checker asks of
    every scope at every check, without building the lists `eligible` returns."""
    low, high = cfg.min_wait_seconds, cfg.max_message_age_seconds
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.is_bot:
            return None
        age = (now - message.at).total_seconds()
        if age > high:
            return None
        if low <= age:
            return i
    return None


class MessageSource(Protocol):
    def scopes(self, now: datetime) -> list[str]: ...

    def history(self, scope: str, now: datetime) -> list[Message]: ...

    def post_reply(self, scope: str, now: datetime, reason: str) -> None: ...


class ListSource:
    """Messages held in memory, per scope, in arrival order; the bot's replies are added as messages.
    What the simulator and the tests feed the checker."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._by_scope: dict[str, list[Message]] = {}
        self._times: dict[str, list[datetime]] = {}  # each scope's arrival times, beside its messages
        self._replies = 0
        for message in sorted(messages, key=lambda m: m.at):
            self.add(message)

    def add(self, message: Message) -> None:
        times = self._times.setdefault(message.scope, [])
        at = bisect.bisect_right(times, message.at)  # after the messages of the same instant: arrival order
        times.insert(at, message.at)
        self._by_scope.setdefault(message.scope, []).insert(at, message)

    def scopes(self, now: datetime) -> list[str]:
        return [s for s, times in self._times.items() if times and times[0] <= now]

    def history(self, scope: str, now: datetime) -> list[Message]:
        msgs = self._by_scope.get(scope, [])  # kept in arrival order: the messages up to `now` are a prefix
        return msgs[: bisect.bisect_right(self._times.get(scope, []), now)]

    def post_reply(self, scope: str, now: datetime, reason: str) -> None:
        channel, thread = scope.split(":", 1)
        self._replies += 1
        self.add(
            Message(
                id=f"bot-{self._replies}",
                channel_id=channel,
                thread_ts=None if thread == "top" else thread,
                author="bot",
                text=reason,
                at=now,
                is_bot=True,
            )
        )
