"""The tolerant extractor and schema validation: repairs, failed fields (never clamped), typed failures."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from models.structured import (
    ExtractionError,
    InvalidOutputError,
    extract_json,
    parse_structured,
    strict_schema,
    validate_object,
)


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
        # a bare number at the cut may itself be cut short (2 of 25): dropped, never trusted
        ('{"a": {"b": [1, 2', {"a": {"b": [1]}}, "json_truncated"),
        ('{"a": 1, "b": 0.9', {"a": 1}, "json_truncated"),
        ('{"a": 1, "b": tr', {"a": 1}, "json_truncated"),
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


@pytest.mark.parametrize("text", ["", "no json here", "{{{{", "[" * 5000, "}", '{"a" 1}'])
def test_extractor_fails_typed(text: str) -> None:
    with pytest.raises(ExtractionError):
        extract_json(text)


def test_out_of_range_is_a_failed_field_never_clamped() -> None:
    # What the bundled Gemma 270M really produced for a 0–1 field: an error naming the field, not 1.0.
    for text, why in [
        ('{"should_respond":true,"reason":"x","confidence":1000000000000000}', "above the maximum 1"),
        ('{"should_respond":false,"reason":"x","confidence":-3}', "below the minimum 0"),
        ('{"should_respond":false,"reason":"x","confidence":7}', "above the maximum 1"),
        ('{"should_respond":false,"reason":"x","confidence":true}', "is not a number"),
        ('{"should_respond":false,"reason":"x","confidence":"NaN"}', "not a finite number"),
        ('{"should_respond":false,"reason":"x","confidence":Infinity}', "not a finite number"),
    ]:
        with pytest.raises(InvalidOutputError, match=f"confidence: .*{why}") as info:
            parse_structured(Verdict, text)
        assert info.value.flags == ["invalid:confidence"]


def test_failed_fields_are_named_in_nested_and_list_fields() -> None:
    text = json.dumps(
        {
            "verdict": {"should_respond": True, "reason": "r", "confidence": 7},
            "scores": [{"score": 250, "axes": [0.5]}, {"score": -1}],
        }
    )
    with pytest.raises(InvalidOutputError) as info:
        parse_structured(Nested, text)
    assert set(info.value.flags) == {"invalid:verdict.confidence", "invalid:scores[0].score", "invalid:scores[1].score"}
    assert "scores[0].score: 250 is above the maximum 100" in str(info.value)


def test_an_invalid_optional_field_is_flagged_and_left_out() -> None:
    class Optional01(BaseModel):
        reason: str
        confidence: float | None = Field(default=None, ge=0, le=1)

    parsed, flags = parse_structured(Optional01, '{"reason": "r", "confidence": 12}')
    assert parsed == {"reason": "r", "confidence": None} and flags == ["invalid:confidence"]


def test_numeric_strings_in_range_are_read_and_fractions_for_integers_fail() -> None:
    parsed, flags = parse_structured(Scored, '{"score": "87"}')
    assert parsed["score"] == 87 and flags == []
    parsed, _ = parse_structured(Verdict, '{"should_respond": true, "reason": "x", "confidence": "0.25"}')
    assert parsed["confidence"] == 0.25
    # 99.6 rounded would be the maximum: a fraction for an integer is a failed field
    with pytest.raises(InvalidOutputError, match="score: 99.6 is not a whole number"):
        parse_structured(Scored, '{"score": 99.6}')
    with pytest.raises(InvalidOutputError, match="not a finite number"):  # does not fit a float: no crash
        parse_structured(Scored, '{"score": 1' + "0" * 400 + "}")


@pytest.mark.parametrize(
    "text",
    [
        '{"should_respond": true, "reason": "x"}',  # missing field
        '{"should_respond": "maybe", "reason": "x", "confidence": 0.5}',
        '{"should_respond": true, "reason": "x", "confidence": NaN}',
        "[1, 2, 3]",
        '"just a string"',
    ],
)
def test_invalid_objects_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_structured(Verdict, text)


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
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
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
    st.fixed_dictionaries(
        {
            "should_respond": st.booleans(),
            "reason": st.text(max_size=30),
            "confidence": st.floats(allow_nan=True) | st.integers() | st.booleans(),
        }
    )
)
def test_fuzz_any_number_outside_the_range_fails_the_field(obj: dict) -> None:
    number = obj["confidence"]
    valid = not isinstance(number, bool) and math.isfinite(number) and 0 <= number <= 1
    try:
        parsed, flags = validate_object(Verdict, obj)
    except InvalidOutputError as exc:
        assert not valid and exc.flags == ["invalid:confidence"]
        return
    assert valid and flags == [] and parsed["confidence"] == number


def test_raw_newlines_inside_strings_are_tolerated_and_flagged() -> None:
    # What the bundled model really wrote: a newline inside a JSON string (invalid strict JSON).
    value, flags = extract_json('{ "reason": "line one\nline two", "n": 1 }')
    assert value == {"reason": "line one\nline two", "n": 1}
    assert flags == ["json_control_chars"]


def test_an_answer_cut_at_max_tokens_is_a_failed_answer_recorded_and_replayable() -> None:
    import asyncio

    from models import MemoryCallLog
    from models.backends.replay import ReplayModel, replay_spec
    from models.errors import StructuredOutputError
    from models.types import RawResult
    from tests.fakes.scripted import FnModel

    log = MemoryCallLog()
    # Complete-looking JSON, but the provider says it stopped at the token limit: "0.9" may be "0.95".
    cut = FnModel(
        lambda r: RawResult(text='{"should_respond": true, "reason": "x", "confidence": 0.9}', finish_reason="length"),
        call_log=log,
    )
    with pytest.raises(StructuredOutputError, match="cut off at max_tokens") as info:
        asyncio.run(cut.complete("q", schema=Verdict, max_tokens=20))
    assert info.value.flags == ["truncated"] and (info.value.raw_text or "").startswith('{"should_respond"')
    record = log.records[0]
    assert record.error_type == "StructuredOutputError" and record.finish_reason == "length"
    assert record.flags == ["truncated"]
    # Replayed, the recorded answer fails the same way (it is not a replay miss).
    replay = ReplayModel(replay_spec(cut.spec), source=log)
    with pytest.raises(StructuredOutputError) as again:
        asyncio.run(replay.complete("q", schema=Verdict, max_tokens=20))
    assert (again.value.message, again.value.flags) == (info.value.message, info.value.flags)

    def answering(result: RawResult) -> FnModel:
        return FnModel(lambda r: result)

    for reason in ("max_tokens", "MAX_TOKENS"):  # Anthropic's and Gemini's names for it
        model = answering(
            RawResult(text='{"should_respond": true, "reason": "x", "confidence": 0.9}', finish_reason=reason)
        )
        with pytest.raises(StructuredOutputError, match="cut off"):
            asyncio.run(model.complete("q", schema=Verdict))
