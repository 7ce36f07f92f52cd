"""Where a field of a parsed YAML or JSON document sits, for errors that read `file:line: field 'x': message`.

Validation runs on the parsed value; only when it fails is the text composed again (`yaml.compose`, which keeps
each node's position; JSON is YAML here) and the path of each error walked down from the root. Only that path
is walked, one node per step, so an aliased node is visited once per error however often it is referenced.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml
from pydantic import ValidationError

Loc = Sequence[str | int]


def field_name(loc: Loc) -> str:
    """`events[2].seq` for ('events', 2, 'seq'); an empty path is the whole document."""
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else f"{'.' if name else ''}{part}"
    return name or "(document)"


def compose(text: str) -> yaml.Node | None:
    """The node tree of a text that already parsed, for its positions; None when it cannot be composed."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None


def line_of(root: yaml.Node | None, loc: Loc) -> int | None:
    """The 1-based line of the deepest node along `loc` (a missing key: the line of the mapping that lacks it)."""
    if root is None:
        return None
    node = root
    for part in loc:
        found: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            found = next(
                (v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                None,
            )
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            found = node.value[part]
        if found is None:
            break
        node = found
    return int(node.start_mark.line) + 1


def where(source: str, line: int | None) -> str:
    return f"{source}:{line}" if line is not None else source


def validation_problems(
    source: str, exc: ValidationError, root: yaml.Node | None = None, *, line: int | None = None, prefix: Loc = ()
) -> list[str]:
    """One `file:line: field 'x': message` a validation error. `root` gives each field its own line; without
    it every problem gets `line` (a JSONL row's). `prefix` is where the validated value sits in the document."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = [*prefix, *err["loc"]]
        at = line_of(root, loc) if root is not None else line
        problems.append(f"{where(source, at)}: field '{field_name(loc)}': {err['msg']}")
    return problems
