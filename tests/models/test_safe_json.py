"""The checked JSON reader (models/safe_json.py): deep nesting, duplicate keys, huge numbers and long texts are
one-line refusals in milliseconds; ordinary JSON reads as `json.loads` reads it."""

from __future__ import annotations

import json
import time

import pytest

from models import safe_json
from models.safe_json import JSONInputError


def test_ordinary_json_reads_as_json_loads() -> None:
    text = '{"a": [1, 2.5, {"b": "[{not brackets}]"}], "c": null, "d": "\\"[", "e": true}'
    assert safe_json.loads(text) == json.loads(text)
    nested = "[" * 64 + "]" * 64
    assert safe_json.loads(nested) == json.loads(nested)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"deep": ' + "[" * 5000 + "]" * 5000 + "}", "deep: nested more than 64 levels deep"),
        ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"x": {"k": 1, "k": 1}}', "duplicate key 'k'"),
        ('{"n": ' + "9" * 5000 + "}", "a number of more than 4,300 digits"),
        ('{"a": 1', "not JSON: Expecting ',' delimiter"),
        ('"' + "x" * 2000 + '"', "longer than 1,000 bytes"),
    ],
)
def test_hostile_json_is_refused_in_one_line(text: str, message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(JSONInputError) as caught:
        safe_json.loads(text, max_bytes=1000 if "x" * 2000 in text else safe_json.MAX_BYTES)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert time.perf_counter() - started < 0.5


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"text": "[" * 10_000})
    assert safe_json.loads(text) == {"text": "[" * 10_000}


def test_the_byte_limit_counts_utf8_bytes() -> None:
    text = json.dumps("é" * 400, ensure_ascii=False)  # 402 characters, 802 bytes
    assert safe_json.loads(text, max_bytes=900) == "é" * 400
    with pytest.raises(JSONInputError, match="longer than 700 bytes"):
        safe_json.loads(text, max_bytes=700)
