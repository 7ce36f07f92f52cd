"""Structured output: one tolerant JSON extractor and schema validation that never trusts a number.

Providers constrain output natively (grammar, `format`, `response_format`, tool use, response schema);
this module is what every backend runs afterwards. Number ranges in a schema are not enforced by
every provider (llama.cpp grammars ignore them: Gemma 270M produced `confidence: 1e15`). A number
outside `minimum`/`maximum`, NaN or infinite is a failed field (`invalid:<path>`), never clamped into
the bound: clamping turned a 0–10 answer into the maximum.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, SupportsFloat, SupportsIndex

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_NUMBER_LIKE = re.compile(r"\s*(?:[-+]?(?:\d|\.\d|inf|nan)|$)", re.IGNORECASE)  # or nothing yet


class ExtractionError(ValueError):
    """No JSON value could be recovered from the text."""


def _loads(text: str, strict: bool = True) -> Any:
    try:
        return json.loads(text, strict=strict)
    except RecursionError as exc:  # absurdly deep nesting: treat as unparseable, not a crash
        raise ValueError("nesting too deep") from exc


def _close_truncated(text: str) -> str:
    """Close what a truncated JSON text left open: a string, then brackets, in order."""
    stack: list[str] = []
    in_string = False
    escaped = False
    string_start = 0
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            string_start = i
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    out = text
    if in_string and _NUMBER_LIKE.match(text, string_start + 1):
        out = text[:string_start]  # a number written as a string, cut ("0.95" → "0.9"), or nothing yet
    elif in_string:
        if escaped:
            out = out[:-1]
        out += '"'
    else:
        # A bare number or literal at the very end may itself be cut short (0.95 → 0.9, 10 → 1): drop it
        # rather than trust it; its key goes with it below.
        out = re.sub(r'([:\[,])\s*[^\s"{}\[\],:]+\s*$', r"\1", out)
    out = out.rstrip()
    # A dangling separator or a key without its value cannot be closed meaningfully: drop it.
    out = re.sub(r"(,|:)\s*$", "", out)
    out = re.sub(r',\s*"[^"]*"\s*$', "", out) if stack and stack[-1] == "}" else out
    out = re.sub(r'\{\s*"[^"]*"\s*$', "{", out)
    return out + "".join(reversed(stack))


def extract_json(text: str) -> tuple[Any, list[str]]:
    """Recover a JSON value from text that is almost JSON; returns (value, repair flags).

    Tries, in order: the text itself; a fenced block; first `{`/`[` to the last `}`/`]`;
    trailing commas removed; a truncated text closed. Raises ExtractionError if all fail.
    """
    if not isinstance(text, str):
        raise ExtractionError("model output is not text")
    stripped = text.strip()
    candidates: list[tuple[str, str | None]] = [(stripped, None)]
    for match in _FENCE.finditer(text):
        candidates.append((match.group(1).strip(), "fenced"))
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        closer = "}" if stripped[start] == "{" else "]"
        end = stripped.rfind(closer)
        if end > start:
            candidates.append((stripped[start : end + 1], "trimmed"))
        candidates.append((stripped[start:], "truncated"))
    tried: set[str] = set()
    for candidate, flag in candidates:
        for variant, extra in ((candidate, None), (_TRAILING_COMMA.sub(r"\1", candidate), "trailing_comma")):
            attempts = [(variant, extra)]
            if flag == "truncated":
                attempts = [(_close_truncated(variant), extra)]
            for attempt, extra_flag in attempts:
                if attempt in tried or not attempt:
                    continue
                tried.add(attempt)
                for strict in (True, False):
                    try:
                        value = _loads(attempt, strict=strict)
                    except ValueError:
                        continue
                    # Non-strict: raw newlines or tabs inside strings (grammars let them through).
                    loose = None if strict else "control_chars"
                    flags = [f"json_{f}" for f in (flag, extra_flag, loose) if f]
                    return value, flags
    raise ExtractionError("no JSON object found in the model output")


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        defs: dict[str, dict[str, Any]] = root.get("$defs", {})
        return defs.get(ref.split("/")[-1], schema)
    for key in ("allOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            # Optional[X] is anyOf [X, null]: check against the non-null branch.
            for option in options:
                resolved = _resolve(option, root)
                if resolved.get("type") != "null":
                    return resolved
    return schema


class InvalidOutputError(ValueError):
    """The answer has fields that cannot be used (out of range, NaN, infinite, wrong type, missing);
    `flags` names each failed field (`invalid:<path>`) so callers can show it."""

    def __init__(self, message: str, flags: list[str]) -> None:
        super().__init__(message)
        self.flags = flags


_REMOVED = object()  # an invalid number taken out of the value before validation

# What float() takes without a TypeError: numbers, numeric text, objects with __float__ or __index__.
FLOAT_LIKE = (str, bytes, bytearray, SupportsFloat, SupportsIndex)


def _as_number(value: object) -> float | None:
    """The number a JSON value stands for (numbers, and numeric strings), else None."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())
    except ValueError:
        return None
    except OverflowError:  # 10**400 does not fit a float: a failed field, not a crash
        return math.inf
    return None


def _bounds_problem(number: float, schema: dict[str, Any], integer: bool) -> str | None:
    """Why a number cannot stand in this field, or None when it can."""
    if not math.isfinite(number):
        return "not a finite number"
    if integer and number != int(number):
        return "not a whole number"
    low, high = schema.get("minimum"), schema.get("maximum")
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if (low is not None and number < low) or (xlow is not None and number <= xlow):
        return f"below the minimum {low if low is not None else xlow}"
    if (high is not None and number > high) or (xhigh is not None and number >= xhigh):
        return f"above the maximum {high if high is not None else xhigh}"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_numbers(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, problems: dict[str, str]) -> Any:
    """`value` with every number its schema cannot take removed: outside `minimum`/`maximum`, NaN or
    infinite, a fraction for an integer, a boolean for a number. Never clamped: a removed field is a
    failed field, recorded in `problems` (path → why); the caller decides what a failed field means."""
    schema = _resolve(schema, root)
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        out = {}
        for k, v in value.items():
            checked = check_numbers(v, props[k], root, f"{path}.{k}" if path else k, problems) if k in props else v
            if checked is not _REMOVED:
                out[k] = checked
        return out
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = [check_numbers(v, schema["items"], root, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return [None if v is _REMOVED else v for v in items]  # a hole keeps the others' positions; None fails
    if kind in ("number", "integer"):
        if value is None:
            return value  # null: valid only where the schema allows it, which validation decides
        number = _as_number(value)
        if number is None:  # a boolean, a word, a list: not a number at all
            problems[path] = f"{_short(value)} is not a number"
            return _REMOVED
        why = _bounds_problem(number, schema, kind == "integer")
        if why is not None:
            problems[path] = f"{_short(value)} is {why}"
            return _REMOVED
        return int(number) if kind == "integer" else number
    return value


def validate_object(schema_model: type[BaseModel], value: Any) -> tuple[dict[str, Any], list[str]]:
    """Validate an extracted value against the pydantic model. A number the schema cannot take is never
    clamped: it is removed and flagged `invalid:<path>`; if the model then still validates (the field
    was optional) the flag tells the caller, else InvalidOutputError names every failed field.

    Raises ValueError (InvalidOutputError for failed fields) with a readable message.
    """
    flags: list[str] = []
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0]
        flags.append("unwrapped_list")
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    schema = schema_for(schema_model)
    problems: dict[str, str] = {}
    value = check_numbers(value, schema, schema, "", problems)
    invalid = [f"invalid:{path}" for path in problems]
    try:
        obj = schema_model.model_validate(value)
    except ValidationError as exc:
        failed = [f"{path}: {why}" for path, why in problems.items()]
        others = [
            f"{_loc_path(err['loc'])}: {err['msg']}" for err in exc.errors() if _loc_path(err["loc"]) not in problems
        ]
        message = f"does not match {schema_model.__name__}: " + "; ".join(failed + others)
        if failed:
            raise InvalidOutputError(message, flags + invalid) from None
        raise ValueError(message) from None
    dumped = obj.model_dump(mode="json")
    for key, number in _walk_numbers(dumped):
        if not math.isfinite(number):
            raise InvalidOutputError(
                f"does not match {schema_model.__name__}: {key} is not a finite number",
                [*flags, *invalid, f"invalid:{key}"],
            )
    return dumped, flags + invalid


def _loc_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error location in this module's path notation (`scores[0].score`)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


def _walk_numbers(value: object, path: str = "") -> list[tuple[str, float]]:
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in _walk_numbers(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [item for i, v in enumerate(value) for item in _walk_numbers(v, f"{path}[{i}]")]
    if isinstance(value, float):
        return [(path, value)]
    return []


def parse_structured(schema_model: type[BaseModel], text: str) -> tuple[dict[str, Any], list[str]]:
    """Text → validated dict and flags. Raises ValueError (ExtractionError included) on failure."""
    value, flags = extract_json(text)
    parsed, more = validate_object(schema_model, value)
    return parsed, flags + more


@functools.lru_cache(maxsize=512)
def _schema_text(schema_model: type[BaseModel]) -> str:
    return json.dumps(schema_model.model_json_schema())


def schema_for(schema_model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, generated once per class (generating it took most of a structured call's
    own time); each caller gets its own copy."""
    schema: dict[str, Any] = json.loads(_schema_text(schema_model))
    return schema


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode wants every object closed and every property required."""

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("default", "title"):
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                out[key] = {name: fix(sub) for name, sub in value.items()}
            else:
                out[key] = fix(value)
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
            out["required"] = list(out["properties"].keys())
        return out

    fixed: dict[str, Any] = fix(json.loads(json.dumps(schema)))
    return fixed
