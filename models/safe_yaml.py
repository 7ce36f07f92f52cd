"""The one YAML loader for every file the project reads (experiments, catalogs, characters, jury configs,
scenarios): safe tags only, and bounded whatever the text.

- Aliases (`*name`) are refused: one is enough to build a billion-laughs bomb out of a few hundred bytes,
  and everything downstream (validation, line maps, digests) would walk the shared value again at every
  reference. Write the value out instead.
- At most `MAX_DEPTH` levels of nesting and `MAX_NODES` values, checked on the parser's event stream
  before any tree is built, so a hostile file is refused in milliseconds and never reaches Python's
  recursion limit.
- A key written twice in one mapping is refused with both lines (YAML itself forbids it; PyYAML keeps
  the last value silently).
- A value Python cannot hold (an integer of thousands of digits, a date like 2024-13-45) is an error at
  its line, not an unexpected exception.

Every refusal is a `yaml.MarkedYAMLError` (its `problem_mark` gives the line), so callers report it as
they report any YAML syntax error. `load_with_lines` also returns the line of every field.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError

MAX_DEPTH = 64
MAX_NODES = 200_000

Path = tuple[str | int, ...]


class YAMLLimitError(yaml.MarkedYAMLError):
    """A document refused for its shape (alias, depth, size, duplicate key), with the line it was found at."""

    def __init__(self, problem: str, mark: Any) -> None:  # a yaml.Mark, or libyaml's
        super().__init__(problem=problem, problem_mark=mark)


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed


def _check_shape(text: str) -> None:
    """Refuse aliases, deep nesting and too many values from the event stream: constant memory, no tree
    built, and (with libyaml) about a microsecond an event, so a hostile file costs milliseconds."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.AliasEvent):
            raise YAMLLimitError(
                f"alias *{event.anchor} is not accepted (aliases can expand without bound): write the value out",
                event.start_mark,
            )
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
            nodes += 1
            if nodes > MAX_NODES:
                raise YAMLLimitError(f"more than {MAX_NODES:,} values in one document", event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YAMLLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]  # the C or the Python loader, whichever is there
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # unhashable: the constructor says so below
                continue
            if first != key_node.start_mark.line + 1:
                raise YAMLLimitError(f"duplicate key {key!r} (first on line {first})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError) as exc:  # int('9'*5000), 2024-13-45, …
            raise ConstructorError(None, None, f"cannot read this value ({exc})", node.start_mark) from None


def _compose(text: str) -> tuple[_Loader, yaml.Node | None]:
    _check_shape(text)
    loader = _Loader(text)
    try:
        return loader, loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise


def load(text: str) -> Any:
    """The document as Python data (None for an empty one); a `yaml.YAMLError` for bad or refused YAML."""
    return load_with_lines(text)[0]


def load_with_lines(text: str) -> tuple[Any, dict[Path, int]]:
    """The document, and field path → line (1-based) of every written field (a mapping value: its key's line)."""
    loader, node = _compose(text)
    try:
        if node is None:
            return None, {}
        data = loader.construct_document(node)
    finally:
        loader.dispose()
    return data, line_map(node)


def line_map(node: yaml.Node) -> dict[Path, int]:
    """Field path → line of a composed document. Iterative, and each node is visited once (no aliases)."""
    out: dict[Path, int] = {}
    stack: list[tuple[yaml.Node, Path]] = [(node, ())]
    while stack:
        current, path = stack.pop()
        out.setdefault(path, current.start_mark.line + 1)
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
                out.setdefault((*path, name), key.start_mark.line + 1)  # the key's line names the field
                stack.append((value, (*path, name)))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(current.value))
    return out
