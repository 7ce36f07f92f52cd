"""An experiment definition: a mechanism, a case set, base settings, a parameter space (lists, ranges or a
search), the models or panels, repeats and a seed — written as YAML and validated with errors that name
the file, the line and the field.

The space is expanded into cells (the grid × repeats). Every parameter belongs to one of two cost classes
(`engine.experiments.mechanisms`): decision parameters are re-decided from recorded raw judgments with no
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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models import safe_yaml

ROOT = Path(__file__).resolve().parents[2]
CallMode = Literal["replay_fallthrough", "replay", "live"]
MAX_RANGE_VALUES = 100_000  # one range's values; the whole grid has its own cap
_HUGE = 10**18  # a count beyond any cap (also what an infinite one counts as)


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
        return self

    def _step(self) -> float:
        return self.step if self.step is not None else (self.stop - self.start) or 1.0

    def count(self) -> int:
        """How many values the range has, computed without building them (a span of 1e300 in steps of
        1e-300 is a count above any cap, not an OverflowError)."""
        if self.num is not None:
            return self.num
        steps = (self.stop - self.start) / self._step()
        if not math.isfinite(steps) or steps >= _HUGE:
            return _HUGE
        return int(math.floor(steps + 1e-9)) + 1

    def too_many(self) -> str | None:
        """Why the range is too long to expand, or None."""
        count = self.count()
        if count <= MAX_RANGE_VALUES:
            return None
        amount = "more than 10^18" if count >= _HUGE else f"{count:,}"
        return f"the range expands to {amount} values (at most {MAX_RANGE_VALUES:,})"

    def values(self) -> list[float | int]:
        if problem := self.too_many():  # a Range built without validation
            raise ValueError(problem)
        count = self.count()
        if self.num is not None:
            n = self.num
            out = [self.start] if n == 1 else [self.start + (self.stop - self.start) * i / (n - 1) for i in range(n)]
        else:
            step = self._step()
            out = [self.start + i * step for i in range(count)]
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


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    mechanism: Literal["handraise", "jury", "confidence", "skip", "director"]
    cases: str = Field(
        min_length=1, description="the case set: a path (relative to the YAML file, else to the project root)"
    )
    limit: int | None = Field(None, ge=1, description="only the first N cases")
    base: dict[str, Any] = Field(default_factory=dict, description="settings every cell starts from")
    space: dict[str, list[Any] | Range] = Field(default_factory=dict, description="parameter → values or a range")
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
        return [
            (("space", name), problem)
            for name, values in self.space.items()
            if isinstance(values, Range) and (problem := values.too_many())
        ]

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


def expand(definition: Experiment, decision: frozenset[str]) -> list[Cell]:
    """The grid (axes in the order written, the last varying fastest) × the repeats."""
    axes = definition.axes()
    names = list(axes)
    cells: list[Cell] = []
    for repeat in range(definition.repeats):
        for values in itertools.product(*(axes[n] for n in names)):
            params = dict(zip(names, values, strict=True))
            calls = {k: v for k, v in params.items() if k not in decision}
            cells.append(
                Cell(
                    index=len(cells),
                    params=params,
                    repeat=repeat,
                    group=group_key(calls, repeat),
                    call_params=calls,
                    decision_params={k: v for k, v in params.items() if k in decision},
                )
            )
    return cells


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


def _field(loc: Sequence[str | int]) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        elif p in ("list[any]", "Range") or "[" in str(p):
            continue
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "(document)"


def _clean_loc(loc: Sequence[str | int]) -> list[str | int]:
    # pydantic names union branches in the loc (space.x.list[any] / space.x.Range): drop them
    return [p for p in loc if not (isinstance(p, str) and (p.startswith("list[") or p == "Range"))]


def parse_definition(text: str, source: str = "<experiment>") -> Experiment:
    """A validated definition, or a DefinitionError naming `source:line: field: message` for each problem
    (mechanism-specific checks included: unknown parameters, bad values, settings that do not validate)."""
    from engine.experiments.mechanisms import mechanism

    try:
        data, lines = safe_yaml.load_with_lines(text)  # aliases, deep nesting, duplicate keys: refused
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise DefinitionError([f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})"]) from None
    if not isinstance(data, dict):
        raise DefinitionError([f"{source}:1: (document): an experiment is a mapping (name, mechanism, cases, …)"])
    try:
        definition = Experiment.model_validate(data)
    except ValidationError as exc:
        problems = []
        seen: set[tuple[str, str]] = set()
        for err in exc.errors():
            loc = _clean_loc(err["loc"])
            key = (_field(loc), err["msg"])
            if key in seen:
                continue
            seen.add(key)
            problems.append(f"{source}:{line_of(lines, loc)}: {_field(loc)}: {err['msg']}")
        raise DefinitionError(problems) from None
    ranges = definition.range_problems()
    checks = ranges or mechanism(definition.mechanism).check(definition, source)  # never expand a huge range
    problems = [f"{source}:{line_of(lines, loc)}: {_field(loc)}: {msg}" for loc, msg in checks]
    if problems:
        raise DefinitionError(problems)
    return definition


def load_definition(path: str | Path) -> Experiment:
    """`parse_definition` of a file, read by the checked reader (a regular file within the input limit:
    never /dev/zero, a FIFO or a 50 MB file)."""
    from engine.inputs import InputError, read_text

    p = Path(path)
    try:
        text = read_text(p)
    except InputError as exc:
        raise DefinitionError([str(exc)]) from None
    definition = parse_definition(text, str(p))
    return definition.model_copy(update={"cases": str(definition.case_path(str(p)))})


def iter_problems(definition: Experiment) -> Iterator[str]:  # pragma: no cover - convenience for pages
    from engine.experiments.mechanisms import mechanism

    for loc, msg in mechanism(definition.mechanism).check(definition, "<page>"):
        yield f"{_field(loc)}: {msg}"
