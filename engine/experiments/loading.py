"""Reading an experiment definition: the YAML parsed and validated against the schema (`definition`), then
checked by its mechanism (`mechanisms`), every problem named by file, line and field. Above both, so the schema
needs no mechanism and a mechanism can use the schema."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml
from pydantic import ValidationError

from engine.experiments.adapters import mechanism
from engine.experiments.definition import DefinitionError, Experiment, field_path, line_of
from engine.inputs import InputError, read_text
from models import safe_yaml


def _clean_loc(loc: Sequence[str | int]) -> list[str | int]:
    # pydantic names union branches in the loc (space.x.list[any] / space.x.Range): drop them
    return [p for p in loc if not (isinstance(p, str) and (p.startswith("list[") or p == "Range"))]


def parse_definition(text: str, source: str = "<experiment>") -> Experiment:
    """A validated definition, or a DefinitionError naming `source:line: field: message` for each problem
    (mechanism-specific checks included: unknown parameters, bad values, settings that do not validate)."""
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
            message = str(err["msg"]).removeprefix("Value error, ")  # pydantic's wording for a validator's own
            key = (field_path(loc), message)
            if key in seen:
                continue
            seen.add(key)
            problems.append(f"{source}:{line_of(lines, loc)}: {field_path(loc)}: {message}")
        raise DefinitionError(problems) from None
    ranges = definition.range_problems()
    checks = ranges or mechanism(definition.mechanism).check(definition, source)  # never expand a huge range
    problems = [f"{source}:{line_of(lines, loc)}: {field_path(loc)}: {msg}" for loc, msg in checks]
    if problems:
        raise DefinitionError(problems)
    return definition


def load_definition(path: str | Path) -> Experiment:
    """`parse_definition` of a file, read by the checked reader (a regular file within the input limit:
    never /dev/zero, a FIFO or a 50 MB file)."""
    p = Path(path)
    try:
        text = read_text(p)
    except InputError as exc:
        raise DefinitionError([str(exc)]) from None
    definition = parse_definition(text, str(p))
    return definition.model_copy(update={"cases": str(definition.case_path(str(p)))})


def iter_problems(definition: Experiment) -> Iterator[str]:  # pragma: no cover - convenience for pages
    for loc, msg in mechanism(definition.mechanism).check(definition, "<page>"):
        yield f"{field_path(loc)}: {msg}"
