"""The run history: headline figures of a stored run, and two runs of one kind compared (a config diff plus
their headline figures side by side). Searching, tagging, renaming and deleting are the store's
(`Store.search_runs`, `RunFilter`, `set_tags`, `rename_run`, `delete_run`); this module only reads."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.store import Run

Scalar = str | int | float | bool | None
# Summary keys that hold a whole result object: its figures are already top-level summary keys.
WHOLE_RESULTS = frozenset({"result"})
MAX_DEPTH = 2  # summary figures come from this many levels of nesting ("with_cache.judge_calls")


def flatten(value: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted path, leaf) for every leaf of a JSON-like value; list items are `[i]`. An empty dict or
    list is a leaf of its own, so a config that gains one is still a change."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{i}]")
    else:
        yield prefix, value


@dataclass(frozen=True)
class ConfigChange:
    path: str
    change: Literal["changed", "added", "removed"]
    a: object = None
    b: object = None


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ConfigChange]:
    """Every leaf that differs between two configs, in the order the first config lists them (then what
    only the second has)."""
    left, right = dict(flatten(a)), dict(flatten(b))
    changes: list[ConfigChange] = []
    for path, value in left.items():
        if path not in right:
            changes.append(ConfigChange(path, "removed", a=value))
        elif not _same(value, right[path]):
            changes.append(ConfigChange(path, "changed", a=value, b=right[path]))
    changes += [ConfigChange(path, "added", b=value) for path, value in right.items() if path not in left]
    return changes


def _same(x: object, y: object) -> bool:
    # 1 and 1.0 are one setting; True and 1 are not.
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    return bool(x == y)


def _summary_figures(summary: Mapping[str, Any], prefix: str = "", depth: int = 1) -> Iterator[tuple[str, Scalar]]:
    for key, value in summary.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, bool | int | float | str) or value is None:
            yield name, value
        elif isinstance(value, Mapping) and depth < MAX_DEPTH and key not in WHOLE_RESULTS:
            yield from _summary_figures(value, name, depth + 1)


def headline(run: Run, totals: Mapping[str, Any] | None = None) -> dict[str, Scalar]:
    """The figures a run is judged by: status, duration, calls, errors, tokens and cost (what replayed calls
    would have cost, when any were replayed), then the scalar figures of its summary."""
    t = totals or {}
    figures: dict[str, Scalar] = {
        "status": run.status,
        "duration_s": None if run.duration_s is None else round(run.duration_s, 3),
        "calls": int(t.get("calls", 0)),
        "errors": int(t.get("errors", 0)),
        "tokens": int(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0)),
        "cost": float(t.get("cost", 0.0) or 0.0),
    }
    if t.get("would_cost") is not None:
        figures["would_cost"] = float(t["would_cost"])
    for name, value in _summary_figures(run.summary):
        figures.setdefault(name, value)
    return figures


@dataclass(frozen=True)
class RunComparison:
    a: Run
    b: Run
    changes: list[ConfigChange]
    figures: list[tuple[str, Scalar, Scalar]]  # name, a's value, b's value (None where a run has none)


class NotComparable(ValueError):
    """Two runs of different kinds: their configs and figures mean different things."""


def compare_runs(a: Run, b: Run, totals: Mapping[str, Mapping[str, Any]] | None = None) -> RunComparison:
    """Two runs of one kind: what their configs change, and their headline figures side by side."""
    if a.kind != b.kind:
        raise NotComparable(f"{a.id} is a {a.kind} run and {b.id} a {b.kind} run — compare two runs of one kind")
    totals = totals or {}
    left, right = headline(a, totals.get(a.id)), headline(b, totals.get(b.id))
    names = list(left) + [n for n in right if n not in left]
    return RunComparison(
        a=a, b=b, changes=config_diff(a.config, b.config), figures=[(n, left.get(n), right.get(n)) for n in names]
    )


def cell(value: object, limit: int = 200) -> str:
    """A config or figure value as one line of text (JSON for anything but a string), cut at `limit`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
