"""The director's four statuses, ordered by severity: a line's status is the most severe of its parts."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class Status(IntEnum):
    """Ordered by severity, so the combined status is the max. MODIFY is for internal use (§1)."""

    PASS = 0
    WARN = 1
    MODIFY = 2
    RETRY = 3

    def __str__(self) -> str:
        return self.name


def worst(statuses: Sequence[Status]) -> Status:
    return max(statuses, default=Status.PASS)
