"""Structured output: one tolerant JSON extractor and schema validation that clamps, never trusts.

Providers constrain output natively (grammar, `format`, `response_format`, tool use, response schema);
this module is what every backend runs afterwards. Number ranges in a schema are not enforced by
every provider (llama.cpp grammars ignore them: Gemma 270M produced `confidence: 1e15`), so numbers
outside `minimum`/`maximum` are clamped and a flag says so.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


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
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    out = text
    if in_string:
        if escaped:
            out = out[:-1]
        out += '"'
    out = out.rstrip()
    # A dangling separator or a key without its value cannot be closed meaningfully: drop it.
    out = re.sub(r'(,|:)\s*$', "", out)
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
        return root.get("$defs", {}).get(ref.split("/")[-1], schema)
    for key in ("allOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            # Optional[X] is anyOf [X, null]: clamp against the non-null branch.
            for option in options:
                resolved = _resolve(option, root)
                if resolved.get("type") != "null":
                    return resolved
    return schema


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def clamp_to_schema(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, flags: list[str]) -> Any:
    """Return `value` with every number outside its schema bounds clamped; flags name each one."""
    schema = _resolve(schema, root)
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        return {
            k: clamp_to_schema(v, props[k], root, f"{path}.{k}" if path else k, flags) if k in props else v
            for k, v in value.items()
        }
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [clamp_to_schema(v, schema["items"], root, f"{path}[{i}]", flags) for i, v in enumerate(value)]
    if kind in ("number", "integer"):
        number = _as_number(value)
        if number is None:
            return value
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if math.isnan(number):
            return value  # left for validation to refuse
        clamped = number
        if low is not None and number < low:
            clamped = float(low)
        if high is not None and number > high:
            clamped = float(high)
        if clamped != number:
            flags.append(f"clamped:{path}={value!r}->{clamped:g}")
        elif not math.isfinite(number):
            return value
        if kind == "integer":
            rounded = round(clamped)
            if rounded != clamped:
                flags.append(f"rounded:{path}={clamped:g}->{rounded}")
            return rounded
        return clamped
    return value


def validate_object(schema_model: type[BaseModel], value: Any) -> tuple[dict[str, Any], list[str]]:
    """Validate an extracted value against the pydantic model, clamping out-of-range numbers first.

    Raises ValueError with a readable message when the value cannot be made valid.
    """
    flags: list[str] = []
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0]
        flags.append("unwrapped_list")
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    schema = schema_model.model_json_schema()
    value = clamp_to_schema(value, schema, schema, "", flags)
    try:
        obj = schema_model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(f"does not match {schema_model.__name__}: {problems}") from None
    dumped = obj.model_dump(mode="json")
    for key, number in _walk_numbers(dumped):
        if not math.isfinite(number):
            raise ValueError(f"does not match {schema_model.__name__}: {key} is not a finite number")
    return dumped, flags


def _walk_numbers(value: Any, path: str = "") -> list[tuple[str, float]]:
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


def schema_for(schema_model: type[BaseModel]) -> dict[str, Any]:
    return schema_model.model_json_schema()


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

    return fix(json.loads(json.dumps(schema)))
