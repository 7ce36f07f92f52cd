"""What an experiment knows of a mechanism (`Mechanism`, the base of every mechanism's adapter, which lives in its
package as `engine/<mechanism>/experiment.py`): its two cost classes (decision parameters, re-decided from a
recording with no call; call parameters, which need a recording of their own), how one group of cells is recorded
and one cell decided, and the checks every definition goes through (unknown parameters and metrics, bad values
reported at their own line, an empty case set)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from engine.experiments.definition import Experiment, Range

Loc = tuple[str | int, ...]  # where in a definition a problem is: its field, and a list's position
Models = Callable[[str], Any]  # a model id → a ChatModel


class Mechanism(ABC):
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


def _check_common(m: Mechanism, definition: Experiment, extra_base: frozenset[str]) -> list[tuple[Loc, str]]:
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


def _validate_each(
    definition: Experiment, build: Callable[[dict[str, Any]], Any], names: Sequence[str]
) -> list[tuple[Loc, str]]:
    """Build the settings from the base alone and with each written value of `names`, so a bad value is
    reported at its own line."""
    problems: list[tuple[Loc, str]] = []
    try:
        build({})
    except (ValidationError, ValueError) as exc:
        return [(("base",) + error_location(exc), error_message(exc))]
    for name in names:
        for i, value in enumerate(axis_values(definition, name)):
            try:
                build({name: value})
            except (ValidationError, ValueError) as exc:
                where = axis_location(definition, name)
                problems.append(
                    (
                        (*where, i)
                        if isinstance(definition.space.get(name), list) or where[0] in ("models", "panels")
                        else where,
                        f"{value!r}: {error_message(exc)}",
                    )
                )
    return problems


def error_location(exc: Exception) -> Loc:
    if isinstance(exc, ValidationError):
        return tuple(str(p) for p in exc.errors()[0]["loc"])
    return ()


def error_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else str(err["msg"])
    return str(exc)
