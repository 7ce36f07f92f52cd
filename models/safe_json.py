"""The one checked JSON reader for a line or a cell of a user's file (labels: a JSONL line, a CSV context cell),
bounded whatever the text, the way `models.safe_yaml` bounds YAML:

- At most `max_bytes` of UTF-8 in one text (a label line's limit is its caller's).
- At most `MAX_DEPTH` levels of nesting, counted on the brackets outside strings before anything is parsed,
  so 5,000 nested arrays are refused in microseconds and never reach Python's recursion limit.
- A key written twice in one object is refused, naming the key (JSON allows it and Python keeps the last
  value silently; the YAML reader refuses it too).
- A value Python cannot hold (an integer of thousands of digits) is an error, not an unexpected exception.

Every refusal is a `JSONInputError`: a ValueError whose message is one line saying what is wrong; the caller
prefixes the file, line and field.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
MAX_BYTES = 1_000_000
_OPENERS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a whole string (skipped), or a bracket


class JSONInputError(ValueError):
    """A JSON text refused: not JSON, too large, nested too deeply, a duplicate key. One line."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONInputError(f"duplicate key {key[:60]!r} (JSON keeps only the last; write it once)")
            seen.add(key)
    return found


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def _check_depth(text: str, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth`, naming the top-level field it is under (the last string seen at
    the top level before it: its key)."""
    if text.count("[") + text.count("{") <= max_depth:  # the usual case: too few brackets to be too deep
        return
    depth, field = 0, ""
    for match in _OPENERS.finditer(text):
        token = match.group()
        if token[0] == '"':
            if depth == 1:
                field = token
        elif token in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONInputError(f"{_name(field)}nested more than {max_depth} levels deep")
        else:
            depth -= 1


def _name(token: str) -> str:
    try:
        name = json.loads(token) if token else ""
    except ValueError:
        name = token.strip('"')
    return f"{name[:60]}: " if isinstance(name, str) and name else ""


def _check_size(text: str, max_bytes: int) -> None:
    if len(text) * 4 <= max_bytes:  # no text of this many characters can be over the limit
        return
    size = len(text) if len(text) > max_bytes else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JSONInputError(f"longer than {max_bytes:,} bytes")


def loads(text: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`, checked: JSONInputError (one line) for a text over the limits, a duplicate key,
    or anything that is not JSON."""
    _check_size(text, max_bytes)
    _check_depth(text, max_depth)
    try:
        return _DECODER.decode(text)
    except JSONInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:  # unreachable past the depth check; kept so no text can raise it
        raise JSONInputError("nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        if "integer string conversion" in str(exc):
            raise JSONInputError("not JSON: a number of more than 4,300 digits") from None
        raise JSONInputError(f"not JSON: {str(exc).splitlines()[0][:120]}") from None
