"""The tolerant extractor and schema validation: repairs, clamping, typed failures; fuzzed."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from models.structured import ExtractionError, extract_json, parse_structured, strict_schema, validate_object


class Verdict(BaseModel):
    should_respond: bool
    reason: str
    confidence: float = Field(ge=0.0, le=1.0)


class Scored(BaseModel):
    score: int = Field(ge=0, le=100)
    axes: list[float] = Field(default_factory=list)


class Nested(BaseModel):
    verdict: Verdict
    scores: list[Scored]
    note: str | None = None


@pytest.mark.parametrize(
    ("text", "expected", "flag"),
    [
        ('{"a": 1}', {"a": 1}, None),
        ('```json\n{"a": 1}\n```', {"a": 1}, "json_fenced"),
        ('Sure! Here it is: {"a": 1} Hope that helps.', {"a": 1}, "json_trimmed"),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}, "json_trailing_comma"),
        ('{"a": 1, "b": "unfinished', {"a": 1, "b": "unfinished"}, "json_truncated"),
        ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}, "json_truncated"),
        ('{"a": 1, "b":', {"a": 1}, "json_truncated"),
        ('{"a": 1, "b', {"a": 1}, "json_truncated"),
    ],
)
def test_extractor_repairs(text: str, expected: dict, flag: str | None) -> None:
    value, flags = extract_json(text)
    assert value == expected
    if flag:
        assert flag in flags
    else:
        assert flags == []


@pytest.mark.parametrize("text", ["", "no json here", "{{{{", "[" * 5000, "}", "{\"a\" 1}"])
def test_extractor_fails_typed(text: str) -> None:
    with pytest.raises(ExtractionError):
        extract_json(text)


def test_out_of_range_is_clamped_and_flagged() -> None:
    # What the bundled Gemma 270M really produced for a 0–1 field.
    parsed, flags = parse_structured(Verdict, '{"should_respond":true,"reason":"x","confidence":1000000000000000}')
    assert parsed["confidence"] == 1.0
    assert flags == ["clamped:confidence=1000000000000000->1"]
    parsed, flags = parse_structured(Verdict, '{"should_respond":false,"reason":"x","confidence":-3}')
    assert parsed["confidence"] == 0.0
    assert flags == ["clamped:confidence=-3->0"]


def test_clamping_reaches_nested_and_list_fields() -> None:
    text = json.dumps({
        "verdict": {"should_respond": True, "reason": "r", "confidence": 7},
        "scores": [{"score": 250, "axes": [0.5]}, {"score": -1}],
    })
    parsed, flags = parse_structured(Nested, text)
    assert parsed["verdict"]["confidence"] == 1.0
    assert [s["score"] for s in parsed["scores"]] == [100, 0]
    assert "clamped:verdict.confidence=7->1" in flags
    assert "clamped:scores[0].score=250->100" in flags


def test_numeric_strings_and_integer_rounding() -> None:
    parsed, flags = parse_structured(Scored, '{"score": "87.6"}')
    assert parsed["score"] == 88
    assert any(f.startswith("rounded:score") for f in flags)


@pytest.mark.parametrize(
    "text",
    [
        '{"should_respond": true, "reason": "x"}',  # missing field
        '{"should_respond": "maybe", "reason": "x", "confidence": 0.5}',
        '{"should_respond": true, "reason": "x", "confidence": NaN}',
        '[1, 2, 3]',
        '"just a string"',
    ],
)
def test_invalid_objects_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_structured(Verdict, text)


def test_infinite_values_are_clamped_when_bounded() -> None:
    parsed, _ = parse_structured(Verdict, '{"should_respond": true, "reason": "x", "confidence": Infinity}')
    assert parsed["confidence"] == 1.0


def test_single_element_list_is_unwrapped() -> None:
    parsed, flags = validate_object(Verdict, [{"should_respond": True, "reason": "r", "confidence": 0.4}])
    assert parsed["confidence"] == 0.4
    assert "unwrapped_list" in flags


def test_strict_schema_closes_objects_but_keeps_property_names() -> None:
    class WithTitle(BaseModel):
        title: str
        default: int = 3

    schema = strict_schema(WithTitle.model_json_schema())
    assert set(schema["properties"]) == {"title", "default"}
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["title", "default"]
    assert "title" not in schema  # the schema keyword, not the property, is dropped


# -- fuzzing: no input may crash; the outcome is a valid object or a ValueError ----------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_arbitrary_text(text: str) -> None:
    try:
        parsed, _ = parse_structured(Verdict, text)
    except ValueError:
        return
    Verdict.model_validate(parsed)
    assert 0.0 <= parsed["confidence"] <= 1.0


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from(["", "```json\n", "noise "]), st.integers(min_value=0, max_value=200))
def test_fuzz_json_like_text(value: object, prefix: str, cut: int) -> None:
    text = prefix + json.dumps(value)
    text = text[: max(1, len(text) - cut)] if cut % 3 == 0 else text
    for model in (Verdict, Nested, Scored):
        try:
            parsed, _ = parse_structured(model, text)
        except ValueError:
            continue
        model.model_validate(parsed)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries({
        "should_respond": st.booleans(),
        "reason": st.text(max_size=30),
        "confidence": st.floats(allow_nan=False) | st.integers(),
    })
)
def test_fuzz_any_number_is_clamped_into_range(obj: dict) -> None:
    parsed, flags = validate_object(Verdict, obj)
    assert 0.0 <= parsed["confidence"] <= 1.0
    number = float(obj["confidence"])
    if math.isfinite(number) and 0 <= number <= 1:
        assert flags == []
    else:
        assert flags and flags[0].startswith("clamped:confidence")


def test_raw_newlines_inside_strings_are_tolerated_and_flagged() -> None:
    # What the bundled model really wrote: a newline inside a JSON string (invalid strict JSON).
    value, flags = extract_json('{ "reason": "line one\nline two", "n": 1 }')
    assert value == {"reason": "line one\nline two", "n": 1}
    assert flags == ["json_control_chars"]
