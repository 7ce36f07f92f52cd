"""Labels as data: a researcher's own judgment of one item of a mechanism, stored in the `labels` table.

A label names the mechanism, the run and the item (`item_key`, the one way keys are built, so pages, the
queue and the outcomes agree), the value, an optional note, who gave it and when, and where it came from
(an approval on a hand-raise card, an override of a verdict, a manual mark, an import). Its `context` holds
what the judge saw and predicted at labelling time — for the hand raise, the judge's raw features — so the
agreement and a refit read the labels alone, with no model call.

Labels are untrusted text (a note, a jury verdict, an imported key): they are validated here (lengths, no
NUL, values each mechanism accepts) and shown as text wherever they are shown.

Which mechanisms take labels, the values each accepts, the value its judge's probability is of and how its items'
keys are built are each mechanism's `LabelSpec` (`engine.mechanism`, the `labels` of its spec), listed in the
"labels" order of mechanisms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.config import get_settings
from engine.mechanism import LabelSpec
from engine.registry import mechanisms
from engine.store import LabelRow, NewLabel, Store, aware, utcnow

SOURCES = ("approval", "override", "manual", "import")

MAX_KEY = 200
MAX_LABEL = 64
MAX_NOTE = 2000
MAX_USER = 64
MAX_RUN_ID = 64
MAX_CONTEXT_BYTES = 64_000


class LabelError(ValueError):
    """A bad label: the message names the field."""


def label_specs() -> dict[str, LabelSpec]:
    """Every mechanism that takes labels, with its `LabelSpec`, in registration order."""
    return {spec.name: spec.labels for spec in mechanisms() if spec.labels is not None}


def label_mechanisms() -> tuple[str, ...]:
    """The names of the mechanisms that take labels, in the labels' order."""
    return tuple(label_specs())


def _unknown(mechanism: object, known: Mapping[str, LabelSpec]) -> LabelError:
    return LabelError(f"mechanism: {mechanism!r} is not one of {', '.join(known)}")


def label_spec(mechanism: str) -> LabelSpec:
    """The label section of `mechanism`'s spec; LabelError naming the known ones otherwise."""
    specs = label_specs()
    if not isinstance(mechanism, str) or mechanism not in specs:
        raise _unknown(mechanism, specs)
    return specs[mechanism]


def label_values(mechanism: str) -> tuple[str, ...] | None:
    """The values a label of `mechanism` accepts; None: any short non-empty text (a jury verdict of the case's
    set)."""
    return label_spec(mechanism).values


def positive_value(mechanism: str) -> str:
    """The value `mechanism`'s judge probability is the probability of ("" when it has none)."""
    return label_spec(mechanism).positive


@dataclass(frozen=True, slots=True)
class Label:
    """One stored label (the read side of a `labels` row)."""

    id: int
    mechanism: str
    run_id: str | None
    item_key: str
    label: str
    note: str
    user: str
    source: str
    created_at: datetime
    context: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The exported shape (`labels export`, `import` reads it back)."""
        return {
            "mechanism": self.mechanism,
            "run_id": self.run_id,
            "item_key": self.item_key,
            "label": self.label,
            "note": self.note,
            "user": self.user,
            "source": self.source,
            "created_at": self.created_at.isoformat(),
            "context": self.context,
        }


def _from_row(row: LabelRow) -> Label:
    return Label(
        id=int(row.id or 0),
        mechanism=row.mechanism,
        run_id=row.run_id,
        item_key=row.item_key,
        label=row.label,
        note=row.note,
        user=row.user_name,
        source=row.source,
        created_at=aware(row.created_at),
        context=row.context,
    )


def _text(name: str, value: object, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise LabelError(f"{name}: must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise LabelError(f"{name}: holds a NUL character")
    if not empty and not value.strip():
        raise LabelError(f"{name}: must not be empty")
    if len(value) > limit:
        raise LabelError(f"{name}: longer than {limit} characters ({len(value)})")
    _encodable(name, value)
    return value if empty else value.strip()


def _encodable(name: str, value: str) -> None:
    """Refuse a lone surrogate (a JSON escape such as \\ud800 that is half a character): no database can store
    it as text."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LabelError(f"{name}: holds {value[exc.start]!r}, half a character (a lone surrogate)") from None


class LabelChecker:
    """The rules of `check_label`, with what they read looked up once (the mechanisms' label specs, the default
    user): an import checks a hundred thousand rows with one. Repeated texts (mechanism, value, source, user,
    run) come back as one shared string each, so a big import holds each once."""

    def __init__(self) -> None:
        self.specs = label_specs()
        self._user: str | None = None
        self._shared: dict[str, str] = {}
        self._stamped: datetime | None = None

    def _stamp(self) -> datetime:
        """Now, but later than the last row this checker stamped: rows without a time are told apart by it (their
        `dedup_key`), and a coarse clock (or a fast loop) could give two of them one microsecond — the second
        would then be taken for the first and dropped as "already present"."""
        now = utcnow()
        if self._stamped is not None and now <= self._stamped:
            now = self._stamped + timedelta(microseconds=1)
        self._stamped = now
        return now

    def _share(self, value: str) -> str:
        if len(self._shared) < 50_000:
            return self._shared.setdefault(value, value)
        return self._shared.get(value, value)

    def check(
        self,
        *,
        mechanism: object,
        item_key: object,
        label: object,
        run_id: object = None,
        note: object = "",
        source: object = "manual",
        user: object = None,
        context: object = None,
        created_at: datetime | None = None,
    ) -> NewLabel:
        """A validated, unsaved label; LabelError naming the field otherwise. Without `created_at` it is stamped
        now and marked untimed (`NewLabel.timed`: an import's row whose file gave no time)."""
        spec = self.specs.get(mechanism) if isinstance(mechanism, str) else None
        if spec is None:
            raise _unknown(mechanism, self.specs)
        key = _text("item_key", item_key, MAX_KEY)
        value = _text("label", label, MAX_LABEL)
        allowed = spec.values
        if allowed is not None:
            lowered = value.lower()
            value = next((v for v in allowed if v == lowered), "")
            if not value:
                raise LabelError(f"label: {lowered!r} is not a {mechanism} label ({' / '.join(allowed)})")
        if source not in SOURCES:
            raise LabelError(f"source: {source!r} is not one of {', '.join(SOURCES)}")
        run = None if run_id in (None, "") else _text("run_id", run_id, MAX_RUN_ID)
        who = self.default_user if user in (None, "") else _text("user", user, MAX_USER)
        noted = _text("note", "" if note is None else note, MAX_NOTE, empty=True)
        return NewLabel(
            mechanism=self._share(mechanism),  # type: ignore[arg-type]  # a key of `specs`, so a str
            run_id=None if run is None else self._share(run),
            item_key=key,
            label=self._share(value) if allowed is None else value,
            note=noted,
            user_name=self._share(who),
            source=SOURCES[SOURCES.index(source)],
            created_at=created_at or self._stamp(),
            context_json=context_text(context),
            timed=created_at is not None,
        )

    @property
    def default_user(self) -> str:
        if self._user is None:
            self._user = default_user()
        return self._user


def context_text(context: object) -> str:
    """A label's context as stored: a JSON object, keys sorted, every number finite, at most
    MAX_CONTEXT_BYTES; LabelError naming `context` otherwise."""
    if context is None:
        return "{}"
    if not isinstance(context, Mapping):
        raise LabelError(f"context: must be an object, got {type(context).__name__}")
    try:
        text = json.dumps(context, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except ValueError as exc:
        if "Out of range float" in str(exc):
            raise LabelError("context: holds a non-finite number") from None
        raise LabelError(f"context: not JSON: {exc}") from None
    except (TypeError, RecursionError) as exc:
        raise LabelError(f"context: not JSON: {str(exc)[:120] or 'nested too deeply'}") from None
    _encodable("context", text)
    if len(text) * 4 > MAX_CONTEXT_BYTES and len(text.encode("utf-8")) > MAX_CONTEXT_BYTES:
        raise LabelError(f"context: larger than {MAX_CONTEXT_BYTES} bytes")
    return text


def check_label(
    *,
    mechanism: object,
    item_key: object,
    label: object,
    run_id: object = None,
    note: object = "",
    source: object = "manual",
    user: object = None,
    context: object = None,
) -> LabelRow:
    """A validated, unsaved row; LabelError naming the field otherwise (one label: an import checks its rows
    with one `LabelChecker`)."""
    new = LabelChecker().check(
        mechanism=mechanism,
        item_key=item_key,
        label=label,
        run_id=run_id,
        note=note,
        source=source,
        user=user,
        context=context,
    )
    return LabelRow(
        mechanism=new.mechanism,
        run_id=new.run_id,
        item_key=new.item_key,
        label=new.label,
        note=new.note,
        user_name=new.user_name,
        source=new.source,
        created_at=new.created_at,
        context_json=new.context_json,
    )


def default_user() -> str:
    """Settings' local user name (JUDGELAB_USER, else the OS user name)."""
    return get_settings().resolved_user[:MAX_USER]


def add_label(
    store: Store,
    *,
    mechanism: str,
    item_key: str,
    label: str,
    run_id: str | None = None,
    note: str = "",
    source: str = "manual",
    user: str | None = None,
    context: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Label:
    """Record one label. A later label for the same (mechanism, run, item, user) supersedes the earlier one:
    both are kept, `list_labels(latest=True)` gives the newest."""
    row = check_label(
        mechanism=mechanism,
        item_key=item_key,
        label=label,
        run_id=run_id,
        note=note,
        source=source,
        user=user,
        context=context,
    )
    if created_at is not None:
        row.created_at = created_at.astimezone(UTC) if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    return _from_row(store.add_labels([row])[0])


def latest_only(labels: list[Label]) -> list[Label]:
    """The newest label of each (mechanism, run, item, user), in the order they were given."""
    newest: dict[tuple[str, str | None, str, str], Label] = {}
    for lab in labels:
        newest[(lab.mechanism, lab.run_id, lab.item_key, lab.user)] = lab
    return sorted(newest.values(), key=lambda lab: lab.id)


def list_labels(
    store: Store,
    *,
    mechanism: str | None = None,
    run_id: str | None = None,
    user: str | None = None,
    latest: bool = True,
    limit: int | None = None,
    run_ids: list[str] | None = None,
) -> list[Label]:
    """Labels, oldest first; `latest` keeps the newest of each item and user; `limit` the last N."""
    rows = store.label_tuples(mechanism=mechanism, run_id=run_id, user=user, run_ids=run_ids)
    # One parse of every context at once: 10,000 small json.loads calls cost more than the figures themselves.
    contexts = json.loads("[" + ",".join(t[-1] or "{}" for t in rows) + "]")
    if latest:  # the newest row of each (mechanism, run, item, user), before any Label is built
        newest = {(t[1], t[2], t[3], t[6]): i for i, t in enumerate(rows)}
        keep = sorted(newest.values())
        rows, contexts = [rows[i] for i in keep], [contexts[i] for i in keep]
    found = [
        Label(
            id=int(t[0]),
            mechanism=t[1],
            run_id=t[2],
            item_key=t[3],
            label=t[4],
            note=t[5],
            user=t[6],
            source=t[7],
            created_at=t[8] if t[8].tzinfo else t[8].replace(tzinfo=UTC),
            context=c if isinstance(c, dict) else {},
        )
        for t, c in zip(rows, contexts, strict=True)
    ]
    return found[-limit:] if limit else found


def count_labels(store: Store, *, mechanism: str | None = None, run_id: str | None = None) -> int:
    """How many items are labelled (the newest label of each item and user counts once)."""
    return len(list_labels(store, mechanism=mechanism, run_id=run_id))


def delete_label(store: Store, label_id: int) -> None:
    store.delete_label(label_id)


def item_key(mechanism: str, **parts: object) -> str:
    """The one way to build an item's key, the mechanism's own (`LabelHooks.key`): e.g. handraise `t3/coder`
    (turn, participant; an eval item: item, participant), jury `pw-leak` (case), director `line4` / `row4` (line or
    row), confidence `q:<sha1[:12]>` (query), skip `s1#7` (scope, message)."""
    specs = label_specs()
    if not isinstance(mechanism, str) or mechanism not in specs:
        raise _unknown(mechanism, specs)
    try:
        return str(specs[mechanism].hooks().key(**parts))
    except KeyError as exc:
        raise LabelError(f"item_key: {mechanism} needs {exc.args[0]!r}") from None
