"""What the run history is searched by: a `RunFilter` and the SQL conditions it becomes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    or_,
)
from sqlmodel import col

from engine.store.tables import LlmCall, Run, RunTag


@dataclass(frozen=True)
class RunFilter:
    """What the history searches by; every field left empty matches every run. `text` matches, case
    insensitively, each of its words in the run's id, name, kind, error or config text; `model` a run
    that called that model or names it in its config; dates are inclusive, compared in UTC."""

    text: str = ""
    kinds: tuple[str, ...] = ()
    kind_prefix: str = ""
    exclude_kinds: tuple[str, ...] = ()  # e.g. an experiment's cells, which the history lists under it
    statuses: tuple[str, ...] = ()
    model: str = ""
    config_hash: str = ""  # a prefix of the hash
    tags: tuple[str, ...] = ()  # runs carrying every one of these
    started_from: datetime | None = None
    started_to: datetime | None = None


def _utc(value: datetime) -> datetime:
    """A bound for a time column: in UTC (a value without a zone is taken as UTC already)."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _conditions(where: RunFilter) -> list[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = []
    for word in where.text.split():
        found.append(
            or_(
                *(
                    c.icontains(word, autoescape=True)
                    for c in (col(Run.id), col(Run.name), col(Run.kind), col(Run.error), col(Run.config_json))
                )
            )
        )
    if where.kinds:
        found.append(col(Run.kind).in_(where.kinds))
    if where.kind_prefix:
        found.append(col(Run.kind).startswith(where.kind_prefix, autoescape=True))
    if where.exclude_kinds:
        found.append(col(Run.kind).not_in(where.exclude_kinds))
    if where.statuses:
        found.append(col(Run.status).in_(where.statuses))
    if where.model:
        called = exists().where(and_(col(LlmCall.run_id) == col(Run.id), col(LlmCall.model_id) == where.model))
        named = col(Run.config_json).contains(json.dumps(where.model, ensure_ascii=False), autoescape=True)
        found.append(or_(called, named))
    if where.config_hash:
        found.append(col(Run.config_hash).startswith(where.config_hash.strip().lower(), autoescape=True))
    for tag in where.tags:
        found.append(exists().where(and_(col(RunTag.run_id) == col(Run.id), col(RunTag.tag) == tag)))
    if where.started_from is not None:
        found.append(col(Run.started_at) >= _utc(where.started_from))
    if where.started_to is not None:
        found.append(col(Run.started_at) <= _utc(where.started_to))
    return found
