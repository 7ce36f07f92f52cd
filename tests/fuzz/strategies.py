"""Model outputs for the parser fuzz: answers whose every field is known to be valid, invalid or missing,
written out as JSON, near-JSON (fences, prose, trailing commas, a list around it), cut short (with or
without the provider's `finish_reason=length`), or as arbitrary text.

Each drawn `Answer` carries its ground truth, computed here and not by the code under test: which fields
were valid, and the value each valid number had. The tests check the parsers against it.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# 10 000 generated outputs per parser in CI (JUDGELAB_FUZZ=1, set by .ci/run); a quick count by default.
FUZZ_EXAMPLES = (
    10_000 if os.environ.get("JUDGELAB_FUZZ") == "1" else int(os.environ.get("JUDGELAB_FUZZ_EXAMPLES", "400"))
)
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=False,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@dataclass(frozen=True)
class Num:
    low: float
    high: float
    integer: bool = False


@dataclass(frozen=True)
class Text:
    max_length: int = 60


@dataclass(frozen=True)
class Enum:
    values: tuple[str, ...]


@dataclass(frozen=True)
class Bool:
    pass


@dataclass(frozen=True)
class Obj:
    fields: dict[str, Any]


@dataclass
class Answer:
    text: str
    finish_reason: str | None
    obj: Any  # what was serialised (None for arbitrary text)
    valid: dict[str, bool] = field(default_factory=dict)  # dotted path → the field was present and valid
    numbers: dict[str, float] = field(default_factory=dict)  # dotted path → the valid number it held
    cut: bool = False  # the text was cut short
    arbitrary: bool = False  # not a serialised answer at all

    @property
    def truncated(self) -> bool:
        return self.finish_reason in ("length", "max_tokens", "MAX_TOKENS")

    @property
    def clean(self) -> bool:
        """Every field present and valid, the text whole, the provider did not stop at the token limit."""
        return not self.arbitrary and not self.cut and not self.truncated and all(self.valid.values())

    @property
    def numbers_valid(self) -> bool:
        return not self.arbitrary and all(ok for path, ok in self.valid.items() if path in self.numeric)

    numeric: frozenset[str] = frozenset()


def _as_float(value: Any) -> float | None:
    """The number a JSON value stands for, as Python reads it (numeric strings too); None if none."""
    if isinstance(value, bool):
        return None
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    except OverflowError:
        return math.inf


@functools.cache
def _valid(spec: Any) -> st.SearchStrategy[Any]:
    """Values the field takes (built once per spec: building strategies per draw dominates the cost)."""
    if isinstance(spec, Num):
        if spec.integer:
            base = st.integers(int(spec.low), int(spec.high))
            return base | base.map(str) | base.map(float)
        reals = st.floats(spec.low, spec.high) | st.sampled_from([spec.low, spec.high, (spec.low + spec.high) / 2])
        return reals | reals.map(repr)
    if isinstance(spec, Text):
        return st.text(max_size=min(spec.max_length, 24)) | st.just("x" * spec.max_length)
    if isinstance(spec, Enum):
        return st.sampled_from(spec.values)
    return st.booleans()


@functools.cache
def _invalid(spec: Any) -> st.SearchStrategy[Any]:
    """Values the field must refuse: out of range, NaN/inf, huge, negative, strings for numbers, wrong types."""
    if isinstance(spec, Num):
        above = st.floats(min_value=spec.high, exclude_min=True, allow_infinity=True)
        below = st.floats(max_value=spec.low, exclude_max=True, allow_infinity=True)
        ints = st.integers(min_value=int(spec.high) + 1) | st.integers(max_value=int(math.ceil(spec.low)) - 1)
        special = st.sampled_from(
            [
                spec.high + 1,
                spec.low - 1,
                spec.high * 10,
                10**400,
                -(10**30),
                1e15,
                1e308,
                float("nan"),
                float("inf"),
                -float("inf"),
            ]
        )
        numbers = above | below | ints | special
        words = st.sampled_from(["NaN", "Infinity", "-inf", "1e400", "high", "", "0x1", "½", "one"])
        others = st.sampled_from([True, False, None, [0.5], {"v": 0.5}])
        fractions = st.floats(spec.low, spec.high).filter(lambda v: v != int(v)) if spec.integer else st.nothing()
        return numbers | numbers.map(repr) | words | others | fractions
    if isinstance(spec, Text):
        return st.sampled_from([None, 7, ["x"]]) | st.integers(1, 40).map(lambda k: "y" * (spec.max_length + k))
    if isinstance(spec, Enum):
        return st.sampled_from([None, 3, "", "maybe", spec.values[0].upper() + "!", spec.values[0][:-1]])
    return st.sampled_from([None, 2, -1, "maybe", "", [], {}])


STATES = st.sampled_from(["valid", "valid", "invalid", "missing"])


def _value(spec: Any, path: str, valid: bool, truth: dict[str, bool], numbers: dict[str, float], draw: Any) -> Any:
    if isinstance(spec, Obj):
        if not valid and draw(st.booleans()):
            truth[path] = False
            return draw(st.sampled_from([None, "n/a", 3, [1, 2]]))
        return _object(spec, path, draw, truth, numbers, all_valid=valid)
    truth[path] = valid
    value = draw(_valid(spec) if valid else _invalid(spec))
    if isinstance(spec, Num) and valid:
        number = _as_float(value)
        assert number is not None, value  # a valid number always reads as one
        numbers[path] = number
    return value


def _object(
    spec: Obj, prefix: str, draw: Any, truth: dict[str, bool], numbers: dict[str, float], *, all_valid: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = list(spec.fields)
    turn = draw(st.integers(0, len(names) - 1))  # rotated: each field gets to be the last (where cuts land)
    for name in names[turn:] + names[:turn]:
        path = f"{prefix}.{name}" if prefix else name
        state = "valid" if all_valid else draw(STATES)
        if state == "missing":
            truth[path] = False
            continue
        out[name] = _value(spec.fields[name], path, state == "valid", truth, numbers, draw)
    return out


def _numeric_paths(spec: Obj, prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for name, sub in spec.fields.items():
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(sub, Num):
            paths.add(path)
        elif isinstance(sub, Obj):
            paths |= _numeric_paths(sub, path)
    return paths


PROSE = st.text(alphabet=st.characters(blacklist_characters='{}[]`"', blacklist_categories=["Cs"]), max_size=30)


@st.composite
def answers(draw: Any, spec: Obj, extra: dict[str, Any] | None = None) -> Answer:
    """A model's answer to a request for `spec`: mostly serialised objects (half of them wholly valid),
    sometimes arbitrary text; written plainly or as near-JSON, and sometimes cut."""
    finish = draw(st.sampled_from([None, "stop", "length", None, "stop", "max_tokens"]))
    numeric = frozenset(_numeric_paths(spec))
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.text(max_size=200) | st.sampled_from(["", "{", "}", "[]", "null", "[" * 3000, "{" * 500]))
        return Answer(text=text, finish_reason=finish, obj=None, arbitrary=True, numeric=numeric)
    truth: dict[str, bool] = {}
    numbers: dict[str, float] = {}
    obj = _object(spec, "", draw, truth, numbers, all_valid=draw(st.booleans()))
    for key, value in (extra or {}).items():
        obj.setdefault(key, value)
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()), allow_nan=True)
    form = draw(st.sampled_from(["plain", "fence", "prose", "comma", "list", "pretty"]))
    if form == "fence":
        text = f"```json\n{text}\n```"
    elif form == "prose":
        text = f"{draw(PROSE)} {text} {draw(PROSE)}"
    elif form == "comma" and text.endswith("}") and len(obj) > 0:
        text = text[:-1] + ",}"
    elif form == "list":
        text = f"[{text}]"
    elif form == "pretty":
        text = json.dumps(obj, ensure_ascii=False, allow_nan=True, indent=2)
    cut = draw(st.integers(0, 3)) == 0 and len(text) > 1
    if cut:
        text = text[: draw(st.integers(1, len(text) - 1))]
    return Answer(text=text, finish_reason=finish, obj=obj, valid=truth, numbers=numbers, cut=cut, numeric=numeric)
