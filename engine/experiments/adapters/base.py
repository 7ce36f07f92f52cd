"""What an experiment knows of a mechanism (`ExperimentAdapter`, the base of every mechanism's adapter, which lives
in its package as `engine/<mechanism>/experiment.py`): its two cost classes (decision parameters, re-decided from a
recording with no call; call parameters, which need a recording of their own), how one group of cells is recorded
and one cell decided, and the checks every definition goes through (unknown parameters and metrics, bad values
reported at their own line, an empty case set)."""

from __future__ import annotations

import itertools
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from engine.experiments.definition import Experiment, Range, max_cells

Loc = tuple[str | int, ...]  # where in a definition a problem is: its field, and a list's position
Models = Callable[[str], Any]  # a model id → a ChatModel


class ExperimentAdapter(ABC):
    """A mechanism as experiments see it. Each one writes its parameters, metrics, settings, cases, decision
    and recording's JSON; the rest has defaults that fit a mechanism whose cells make no model call (no call
    parameters, no models, a recording made from the cases alone), which one with calls overrides."""

    name: str
    decision: frozenset[str]
    calls: frozenset[str] = frozenset()
    base_keys: frozenset[str] = frozenset()  # settings of `base` that are neither decision nor call parameters
    metrics: tuple[str, ...]
    default_metric: str

    @abstractmethod
    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
        """The mechanism's settings: `params` over `base` (raises on a bad value)."""

    def build(self, definition: Experiment, extra: dict[str, Any]) -> Any:
        """Everything `check` validates for one written value (`extra` over the base): by default the settings."""
        return self.config(definition.base, extra)

    def check(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        """Every problem of a definition for this mechanism, as (field, message). The cell cap comes first
        and alone: a grid above it is refused before any value, case or setting is built."""
        size = definition.size_problem()
        if size is not None:
            return [size]
        return self.checks(definition, source)

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = _check_common(self, definition, self.base_keys)
        names = [n for n in definition.axes() if n in self.decision | self.calls]
        return problems + _validate_each(definition, lambda extra: self.build(definition, extra), names)

    @abstractmethod
    def load_cases(self, definition: Experiment) -> list[Any]: ...

    def models_of(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[str]:
        """The catalog models a group of cells calls: none by default."""
        return []

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        models: Models,
        store: Any,
        run_id: str,
    ) -> Any:
        """What a group of cells is decided from: by default made from the cases alone (`record_cases`)."""
        return await self.record_cases(definition, cases)

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{self.name}: record_cases, or a record of its own")

    @abstractmethod
    def decide(self, definition: Experiment, recording: Any, decision_params: Mapping[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def recording_json(self, recording: Any) -> dict[str, Any]: ...


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"weights.relevance": 0.6} → {"weights": {"relevance": 0.6}} (merged with what is already nested)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        here = out
        for part in parts[:-1]:
            here = here.setdefault(part, {})
        if isinstance(value, Mapping) and isinstance(here.get(parts[-1]), dict):
            here[parts[-1]].update(value)
        else:
            here[parts[-1]] = value
    return out


def axis_values(definition: Experiment, name: str) -> list[Any]:
    if name == "model":
        return list(definition.models) or _space_list(definition, name)
    if name == "panel":
        return list(definition.panels) or _space_list(definition, name)
    return _space_list(definition, name)


def _space_list(definition: Experiment, name: str) -> list[Any]:
    values = definition.space.get(name)
    if values is None:
        return []
    if isinstance(values, Range):
        try:
            return values.values()
        except ValueError:
            return []
    return list(values)


def axis_location(definition: Experiment, name: str) -> Loc:
    if name == "model" and definition.models:
        return ("models",)
    if name == "panel" and definition.panels:
        return ("panels",)
    return ("space", name)


def _check_common(m: ExperimentAdapter, definition: Experiment, extra_base: frozenset[str]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    known = m.decision | m.calls
    for name in definition.space:
        if name not in known:
            problems.append(
                (
                    ("space", name),
                    f"unknown parameter of {m.name}; decision parameters (no calls): "
                    f"{', '.join(sorted(m.decision))}; call parameters: {', '.join(sorted(m.calls))}",
                )
            )
        elif isinstance(definition.space[name], Range):
            try:
                definition.space[name].values()  # type: ignore[union-attr]
            except ValueError as exc:
                problems.append((("space", name), str(exc)))
    for name in definition.base:
        if name not in known | extra_base:
            problems.append((("base", name), f"unknown setting of {m.name}"))
    metrics = set(m.metrics)
    if definition.metric is not None and definition.metric not in metrics:
        problems.append((("metric",), f"unknown metric; one of {', '.join(m.metrics)}"))
    if definition.search is not None:
        if definition.search.metric not in metrics:
            problems.append((("search", "metric"), f"unknown metric; one of {', '.join(m.metrics)}"))
        calls = [n for n in definition.axes() if n not in m.decision]
        if calls:
            problems.append(
                (
                    ("search",),
                    f"a search runs over decision parameters only; {', '.join(calls)} "
                    "need model calls (sweep them as a grid)",
                )
            )
        if not definition.space:
            problems.append((("space",), "a search needs a space of decision parameters"))
    try:
        cases = m.load_cases(definition)
        if not cases:
            problems.append((("cases",), "the case set is empty"))
    except (OSError, ValueError) as exc:
        problems.append((("cases",), str(exc).replace("\n", " ")))
    return problems


SHOWN_COMBINATIONS = 5  # refused combinations named one a line; the rest are counted


def _validate_each(
    definition: Experiment, build: Callable[[dict[str, Any]], Any], names: Sequence[str]
) -> list[tuple[Loc, str]]:
    """Build the settings from the base alone, then for every combination of the grid (the base merged with that
    combination's values, as its cells run). A value no combination accepts is reported at its own line (as
    `tone_pass: 5` is, whatever the others); a combination refused only as a whole by name and index, as its
    cell is numbered (`combination 3 (tone_pass=1, tone_warn=2): tone_warn must not exceed tone_pass`). A value
    refused only against the base (`tone_warn: 3` beside `tone_pass: [3]`) is accepted."""
    try:
        build({})
    except (ValidationError, ValueError) as exc:
        return [(("base",) + error_location(exc), error_message(exc))]
    axes = [(name, axis_values(definition, name)) for name in names]
    alone: dict[tuple[int, int], str] = {}  # (axis, position) → why the value is refused beside the base
    mistyped: dict[tuple[int, int], str] = {}  # a text or a yes/no the settings would quietly read as a number
    for k, (name, values) in enumerate(axes):
        for i, value in enumerate(values):
            try:
                built = build({name: value})
            except (ValidationError, ValueError) as exc:
                alone[(k, i)] = f"{value!r}: {error_message(exc)}"
                continue
            read = _read_back(built, name)
            if isinstance(value, str | bool) and isinstance(read, int | float) and not isinstance(read, bool):
                what = "yes/no" if isinstance(value, bool) else "text"
                mistyped[(k, i)] = f"{value!r}: {name}: a {what} where a number is expected — write {read!r}"
    if len(axes) < 2 or (definition.search is not None and math.prod(len(v) for _, v in axes) > max_cells()):
        accepted: set[tuple[int, int]] = set()  # nothing to combine (or a search too wide to enumerate)
        refused: list[tuple[int, tuple[int, ...]]] = []
    else:
        accepted, refused = _combinations(axes, build)
    always = [key for key in alone if key not in accepted]  # refused in every combination: its own line
    named = {key: alone[key] for key in always} | mistyped
    problems = [(_value_location(definition, axes[k][0], i), named[(k, i)]) for k, i in sorted(named)]
    bad = set(always)
    shown = [r for r in refused if not any((k, i) in bad for k, i in enumerate(r[1]))]
    for index, position in shown[:SHOWN_COMBINATIONS]:
        combination = {name: vals[i] for (name, vals), i in zip(axes, position, strict=True)}
        try:
            build(combination)  # again, for its error (not kept while the grid was walked)
        except (ValidationError, ValueError) as exc:
            shown_values = ", ".join(f"{name}={_short(value)}" for name, value in combination.items())
            problems.append((("space",), f"combination {index} ({shown_values}): {error_message(exc)}"))
    if len(shown) > SHOWN_COMBINATIONS:
        problems.append(
            (("space",), f"{len(shown) - SHOWN_COMBINATIONS} more combinations the settings refuse (first shown above)")
        )
    return problems


def _combinations(
    axes: Sequence[tuple[str, Sequence[Any]]], build: Callable[[dict[str, Any]], Any]
) -> tuple[set[tuple[int, int]], list[tuple[int, tuple[int, ...]]]]:
    """Every distinct combination of the axes' values built once (a value written twice on an axis is built
    once): the (axis, position) pairs some combination accepts, and the refused combinations (index of its first
    cell in grid order, positions; not the error: tens of thousands could be refused, and an exception kept
    holds its traceback). Bounded by the cell cap, which the grid passed before this runs."""
    names = [name for name, _ in axes]
    distinct: list[list[tuple[Any, list[int]]]] = []  # per axis: (value, the positions it is written at)
    for _, values in axes:
        where: dict[str, tuple[Any, list[int]]] = {}
        for i, value in enumerate(values):
            where.setdefault(json.dumps(value, sort_keys=True, default=repr), (value, []))[1].append(i)
        distinct.append(list(where.values()))
    strides = [math.prod(len(v) for _, v in axes[k + 1 :]) for k in range(len(axes))]
    accepted: set[tuple[int, int]] = set()
    refused: list[tuple[int, tuple[int, ...]]] = []
    for choice in itertools.product(*distinct):
        try:
            build({name: value for name, (value, _) in zip(names, choice, strict=True)})
        except (ValidationError, ValueError):
            first = tuple(positions[0] for _, positions in choice)
            refused.append((sum(i * s for i, s in zip(first, strides, strict=True)), first))
        else:
            accepted.update((k, i) for k, (_, positions) in enumerate(choice) for i in positions)
    return accepted, refused


def _read_back(built: Any, name: str) -> Any:
    """The value the built settings hold for a (dotted) parameter, or None where they do not hold it."""
    for part in name.split("."):
        built = getattr(built, part, None)
    return built


def _value_location(definition: Experiment, name: str, i: int) -> Loc:
    where = axis_location(definition, name)
    listed = isinstance(definition.space.get(name), list) or where[0] in ("models", "panels")
    return (*where, i) if listed else where


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def error_location(exc: Exception) -> Loc:
    if isinstance(exc, ValidationError):
        return tuple(str(p) for p in exc.errors()[0]["loc"])
    return ()


def error_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")  # pydantic's wording for a validator's own
        return f"{where}: {message}" if where else message
    return str(exc)
