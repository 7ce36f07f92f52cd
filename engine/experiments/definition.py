"""An experiment definition: a mechanism, a case set, base settings, a parameter space (lists, ranges or a
search), the models or panels, repeats and a seed — written as YAML and validated with errors that name
the file, the line and the field.

The space is expanded into cells (the grid × repeats). Every parameter belongs to one of two cost classes
(`engine.experiments.adapters`): decision parameters are re-decided from recorded raw judgments with no
model call; call parameters need model calls, which the call store answers when the same request was made
before.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PlainValidator, Tag, model_validator
from pydantic_core import PydanticCustomError

from engine.config import get_settings
from engine.registry import mechanisms
from models import safe_yaml

ROOT = Path(__file__).resolve().parents[2]
MAX_RANGE_VALUES = 100_000  # values of one range (the cell cap, JUDGELAB_MAX_CELLS, bounds their product)
CallMode = Literal["replay_fallthrough", "replay", "live"]


def max_cells() -> int:
    """The cell cap (JUDGELAB_MAX_CELLS)."""

    return get_settings().max_cells


class DefinitionError(ValueError):
    """A definition that cannot run: every problem, each as `file:line: field: message`."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("bad experiment definition:\n" + "\n".join(f"  {p}" for p in self.problems))


class Range(BaseModel):
    """`{from: 0.3, to: 0.8, step: 0.1}` or `{from: 0.3, to: 0.8, num: 6}` (both ends included). In a search,
    only the bounds count (and `step` or `log` when given)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: float = Field(alias="from")
    stop: float = Field(alias="to")
    step: float | None = Field(None, gt=0)
    num: int | None = Field(None, ge=1, le=MAX_RANGE_VALUES)
    log: bool = False
    integer: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> Range:
        if not (math.isfinite(self.start) and math.isfinite(self.stop)):
            raise ValueError("from and to must be finite numbers")
        if self.stop < self.start:
            raise ValueError("to must not be below from")
        if self.step is not None and self.num is not None:
            raise ValueError("give step or num, not both")
        self.count()  # refused here, before any value is made
        return self

    def _step(self) -> float:
        if self.num is not None:
            return (self.stop - self.start) / (self.num - 1) if self.num > 1 else 1.0
        return self.step if self.step is not None else (self.stop - self.start) or 1.0

    def count(self) -> int:
        """How many values the range has before `integer` merges equal ones: arithmetic, so a range of
        10^300 values is refused in microseconds (and an overflow is a message, not an OverflowError)."""
        if self.num is not None:
            return self.num
        span = self.stop - self.start
        step = self._step()
        steps = span / step if math.isfinite(span) else math.inf
        if not math.isfinite(steps) or steps >= MAX_RANGE_VALUES:
            shown = f"{int(steps) + 1}" if steps < 1e15 else (f"{steps:.3g}" if math.isfinite(steps) else "too many")
            raise ValueError(
                f"the range expands to {shown} values (at most 100 000): "
                f"from {self.start:g} to {self.stop:g} by {step:g}"
            )
        return int(math.floor(steps + 1e-9)) + 1

    def quick_length(self) -> bool:
        """Whether `length()` is arithmetic (else it walks the values once: an integer range by ~1)."""
        return (
            not self.integer
            or self.count() == 1
            or (self._step() < 0.999 and max(abs(self.start), abs(self.stop)) < 1e12)
        )

    def length(self) -> int:
        """The number of values `values()` gives, without building them: `count()`, less the values that
        `integer` rounds onto one another (counted in one pass, never stored)."""
        n = self.count()
        if not self.integer or n == 1:
            return n
        step = self._step()
        if step < 0.999 and max(abs(self.start), abs(self.stop)) < 1e12:
            # consecutive values differ by less than 1, so the rounded values step by 0 or 1: every integer
            # between the first and the last rounded value is hit
            return int(round(self._value(n - 1))) - int(round(self._value(0))) + 1
        distinct, last = 0, None
        for i in range(n):  # rounded values never decrease: count the changes
            here = int(round(self._value(i)))
            if here != last:
                distinct, last = distinct + 1, here
        return distinct

    def _value(self, i: int) -> float:
        if self.num is not None:
            return self.start if self.num == 1 else self.start + (self.stop - self.start) * i / (self.num - 1)
        return self.start + i * self._step()

    def values(self) -> list[float | int]:
        n = self.count()
        out = [self._value(i) for i in range(n)]
        if self.integer:
            return sorted({int(round(v)) for v in out})
        return [round(v, 10) for v in out]


class Search(BaseModel):
    """Optuna (TPE) over the decision space: maximise (or minimise) `metric` in `n_trials` trials."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(min_length=1)
    direction: Literal["maximize", "minimize"] = "maximize"
    n_trials: int = Field(30, ge=1, le=100_000)
    sampler: Literal["tpe"] = "tpe"


def _space_kind(value: Any) -> str:
    return "list[any]" if isinstance(value, list) else "Range"


# A list or a range, told apart by its shape, so a bad range gets the range's error only (the tags are the
# names `_clean_loc` drops from a field's path).
SpaceValues = Annotated[
    Annotated[list[Any], Tag("list[any]")] | Annotated[Range, Tag("Range")], Discriminator(_space_kind)
]


def _registered_mechanism(value: object) -> str:
    """A registered mechanism with an experiment adapter; refused as a `Literal` of their names would be."""
    names = [s.name for s in mechanisms() if s.experiment]
    if isinstance(value, str) and value in names:
        return value
    quoted = [repr(n) for n in names]
    expected = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    mechanism: Annotated[str, PlainValidator(_registered_mechanism)]
    cases: str = Field(
        min_length=1, description="the case set: a path (relative to the YAML file, else to the project root)"
    )
    limit: int | None = Field(None, ge=1, description="only the first N cases")
    base: dict[str, Any] = Field(default_factory=dict, description="settings every cell starts from")
    space: dict[str, SpaceValues] = Field(default_factory=dict, description="parameter → values or a range")
    search: Search | None = None
    models: list[str] = Field(default_factory=list, description="a sweep over models (a call parameter)")
    panels: list[str] = Field(default_factory=list, description="jury: a sweep over catalog panels")
    repeats: int = Field(1, ge=1, le=1000)
    seed: int = 0
    metric: str | None = Field(None, description="the metric that marks the best cell (default: the mechanism's)")
    calls: CallMode = Field(
        "replay_fallthrough",
        description="replay_fallthrough: a request made before is "
        "answered from the call store, a new one by the model; replay: only recorded answers; "
        "live: always the model",
    )
    delay_s: float = Field(0.0, ge=0, le=60, description="latency injected into each replayed call (benchmarks)")
    concurrency: int = Field(4, ge=1, le=1024, description="cells whose calls run at once")
    per_model_concurrency: dict[str, int] = Field(
        default_factory=dict, description="at most N calls at once to a model (its cells wait)"
    )

    @model_validator(mode="after")
    def _shape(self) -> Experiment:
        for name, values in self.space.items():
            if isinstance(values, list) and not values:
                raise ValueError(f"space.{name}: no values")
        if "model" in self.space and self.models:
            raise ValueError("give models or space.model, not both")
        if "panel" in self.space and self.panels:
            raise ValueError("give panels or space.panel, not both")
        if self.panels and self.mechanism != "jury":
            raise ValueError("panels: only the jury has panels")
        return self

    def range_problems(self) -> list[tuple[tuple[str, str], str]]:
        """The grid's ranges too long to expand (counted, never built; a search only samples them)."""
        if self.search is not None:
            return []
        problems = []
        for name, values in self.space.items():
            if isinstance(values, Range):
                try:
                    values.count()  # arithmetic: a range of 10^300 values is a message, never built
                except ValueError as exc:
                    problems.append((("space", name), str(exc)))
        return problems

    def axes(self) -> dict[str, list[Any]]:
        """The grid's axes, in the order written: every space entry expanded, plus models / panels."""
        out: dict[str, list[Any]] = {}
        for name, values in self.space.items():
            out[name] = values.values() if isinstance(values, Range) else list(values)
        if self.models:
            out["model"] = list(self.models)
        if self.panels:
            out["panel"] = list(self.panels)
        return out

    def axis_lengths(self) -> dict[str, int]:
        """Each axis's number of values, in the order written, without building any."""
        out: dict[str, int] = {}
        for name, values in self.space.items():
            out[name] = values.length() if isinstance(values, Range) else len(values)
        if self.models:
            out["model"] = len(self.models)
        if self.panels:
            out["panel"] = len(self.panels)
        return out

    def cell_count(self) -> int:
        """The grid × the repeats (a search: its trials), by arithmetic: nothing is built."""
        return self._count(None)[0]

    def _count(self, above: int | None) -> tuple[int, bool]:
        """(count, complete). With `above`, counting stops once the count exceeds it; the axes that take a
        pass over their values (integer ranges) are counted last, so a hostile grid costs microseconds."""
        if self.search is not None:
            return self.search.n_trials, True
        quick: list[int] = [self.repeats, len(self.models) or 1, len(self.panels) or 1]
        slow: list[Range] = []
        for values in self.space.values():
            if isinstance(values, Range) and not values.quick_length():
                slow.append(values)
            else:
                quick.append(values.length() if isinstance(values, Range) else len(values))
        total = math.prod(quick)
        for r in slow:
            if above is not None and total > above:
                return total, False
            total *= r.length()
        return total, True

    def size_problem(self, cap: int | None = None) -> tuple[tuple[str | int, ...], str] | None:
        """(field, message) when the experiment has more cells than the cap (JUDGELAB_MAX_CELLS), else None.
        Checked at validation, before any cell, value list or case is made."""
        cap = max_cells() if cap is None else cap
        count, complete = self._count(cap)
        if count <= cap:
            return None
        if self.search is not None:
            return ("search", "n_trials"), f"{count} trials: more than the cap of {cap} cells (JUDGELAB_MAX_CELLS)"
        shape = [
            f"{name} {len(v) if not isinstance(v, Range) else v.length() if v.quick_length() else v.count()}"
            for name, v in self.space.items()
        ]
        shape += [f"model {len(self.models)}"] if self.models else []
        shape += [f"panel {len(self.panels)}"] if self.panels else []
        shape += [f"repeats {self.repeats}"] if self.repeats > 1 else []
        where: tuple[str | int, ...] = (
            ("space",) if self.space else ("models",) if self.models else ("panels",) if self.panels else ("repeats",)
        )
        return where, (
            f"{'' if complete else 'at least '}{count} cells ({' × '.join(shape)}): more than the cap of {cap} "
            "cells (JUDGELAB_MAX_CELLS); sweep fewer values, or raise the cap"
        )

    def case_path(self, source: str | None = None) -> Path:
        path = Path(self.cases).expanduser()
        if path.is_absolute():
            return path
        if source and not source.startswith("<"):
            beside = Path(source).resolve().parent / path
            if beside.exists():
                return beside
        return ROOT / path

    def digest(self) -> str:
        return hashlib.sha256(
            json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True, default=str).encode()
        ).hexdigest()[:12]


@dataclass(frozen=True)
class Cell:
    """One point of the grid at one repeat. `group` is the key of its calls: cells that differ only in
    decision parameters share one recording."""

    index: int
    params: dict[str, Any]
    repeat: int
    group: str
    call_params: dict[str, Any] = field(default_factory=dict)
    decision_params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.index, "repeat": self.repeat, "group": self.group, "params": self.params}


def group_key(call_params: Mapping[str, Any], repeat: int) -> str:
    text = json.dumps({"params": dict(call_params), "repeat": repeat}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Group:
    """The cells that share one recording: one value of every call parameter, at one repeat."""

    key: str
    repeat: int
    call_params: dict[str, Any]
    position: tuple[int, ...]  # the value index of each call axis


class Cells(Sequence[Cell]):
    """The grid (axes in the order written, the last varying fastest) × the repeats, made on demand: cell `i`
    is computed from its index, and a group's cells are walked without building the others. Only the axes'
    values are held (their product is bounded by the cell cap), never the cells."""

    def __init__(self, axes: Mapping[str, Sequence[Any]], repeats: int, decision: frozenset[str]) -> None:
        self.names = list(axes)
        self.values = [list(axes[n]) for n in self.names]
        self.repeats = repeats
        self.decision = decision
        self.grid = math.prod(len(v) for v in self.values)
        self._strides = [math.prod(len(v) for v in self.values[k + 1 :]) for k in range(len(self.values))]
        self.call_axes = [k for k, n in enumerate(self.names) if n not in decision]
        self.decision_axes = [k for k, n in enumerate(self.names) if n in decision]
        self.group_size = math.prod(len(self.values[k]) for k in self.decision_axes)

    def __len__(self) -> int:
        return self.grid * self.repeats

    def _cell(self, index: int, repeat: int, position: Sequence[int], group: str | None = None) -> Cell:
        params = {n: self.values[k][position[k]] for k, n in enumerate(self.names)}
        calls = {k: v for k, v in params.items() if k not in self.decision}
        return Cell(
            index=index,
            params=params,
            repeat=repeat,
            group=group if group is not None else group_key(calls, repeat),
            call_params=calls,
            decision_params={k: v for k, v in params.items() if k in self.decision},
        )

    def cell(self, index: int) -> Cell:
        if not 0 <= index < len(self):
            raise IndexError(f"cell {index} of {len(self)}")
        repeat, rest = divmod(index, self.grid) if self.grid else (0, 0)
        position = [(rest // stride) % len(v) for stride, v in zip(self._strides, self.values, strict=True)]
        return self._cell(index, repeat, position)

    @overload
    def __getitem__(self, index: int) -> Cell: ...
    @overload
    def __getitem__(self, index: slice) -> list[Cell]: ...
    def __getitem__(self, index: int | slice) -> Cell | list[Cell]:
        if isinstance(index, slice):
            return [self.cell(i) for i in range(*index.indices(len(self)))]
        return self.cell(index + len(self) if index < 0 else index)

    def __iter__(self) -> Iterator[Cell]:
        index = 0
        for repeat in range(self.repeats):
            for position in itertools.product(*(range(len(v)) for v in self.values)):
                yield self._cell(index, repeat, position)
                index += 1

    @property
    def group_count(self) -> int:
        return len(self) // self.group_size if self.group_size else 0

    def groups(self) -> Iterator[Group]:
        """The groups in the order of their first cell."""
        for repeat in range(self.repeats):
            for position in itertools.product(*(range(len(self.values[k])) for k in self.call_axes)):
                calls = {self.names[k]: self.values[k][i] for k, i in zip(self.call_axes, position, strict=True)}
                yield Group(group_key(calls, repeat), repeat, calls, tuple(position))

    def members(self, group: Group) -> Iterator[Cell]:
        """A group's cells, in index order, made one at a time."""
        full = [0] * len(self.values)
        for k, i in zip(self.call_axes, group.position, strict=True):
            full[k] = i
        for position in itertools.product(*(range(len(self.values[k])) for k in self.decision_axes)):
            for k, i in zip(self.decision_axes, position, strict=True):
                full[k] = i
            index = group.repeat * self.grid + sum(i * s for i, s in zip(full, self._strides, strict=True))
            yield self._cell(index, group.repeat, full, group.key)


def expand(definition: Experiment, decision: frozenset[str]) -> Cells:
    """The grid (axes in the order written, the last varying fastest) × the repeats, as a lazy sequence of
    cells; a DefinitionError when it has more than JUDGELAB_MAX_CELLS (checked before any value is built)."""
    problem = definition.model_copy(update={"search": None}).size_problem()
    if problem is not None:
        raise DefinitionError([f"{field_path(problem[0])}: {problem[1]}"])
    return Cells(definition.axes(), definition.repeats, decision)


# -- YAML with line numbers --------------------------------------------------------------------------------


def line_map(text: str) -> dict[tuple[str | int, ...], int]:
    """Field path → line of a YAML document (`models.safe_yaml`: no aliases, bounded depth and size)."""
    return safe_yaml.load_with_lines(text)[1]


def line_of(lines: Mapping[tuple[str | int, ...], int], loc: Sequence[str | int]) -> int:
    """The line of the deepest written field on `loc`'s path (1 when nothing of it was written)."""
    path = tuple(loc)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get((), 1)


def field_path(loc: Sequence[str | int]) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        elif p in ("list[any]", "Range") or "[" in str(p):
            continue
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "(document)"
