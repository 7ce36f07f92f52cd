"""Fuzz every parser of a model's output — FUZZ_EXAMPLES generated outputs each (10 000 in CI): the
structured-JSON validator, the hand raise's template fill and self-judgment, the jury's evaluation and
statement, the director's rubric, the skip judge and the confidence self-evaluation.

Each must never raise (beyond its documented typed error), never give a value outside its range, never
use a value that was invalid, cut or missing (so never the maximum from an invalid answer), and flag
every fallback. The mechanisms run as in production: a scripted transport (`FnModel`) returns the drawn
text and finish reason; parsing, validation and fallbacks are the production code.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
from hypothesis import given
from pydantic import BaseModel, Field

from models.structured import InvalidOutputError, parse_structured
from models.types import RawResult
from tests.fakes.scripted import FnModel
from tests.fuzz.strategies import FUZZ, Answer, Bool, Enum, Num, Obj, Text, answers

LOOP = asyncio.new_event_loop()


@pytest.fixture(scope="module", autouse=True)
def _loop() -> Iterator[None]:
    yield
    LOOP.close()


def run(coro: Any) -> Any:
    return LOOP.run_until_complete(coro)


def model_answering(a: Answer) -> FnModel:
    return FnModel(lambda request: RawResult(text=a.text, finish_reason=a.finish_reason))


def dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[part]
    return value


# -- 1. the structured-JSON validator ------------------------------------------------------------------------


class Axes(BaseModel):
    safety: int = Field(ge=0, le=100)
    clarity: float = Field(ge=0, le=1)


class Probe(BaseModel):
    should_respond: bool
    reason: str = Field(max_length=60)
    confidence: float = Field(ge=0, le=1)
    score: int = Field(ge=0, le=100)
    verdict: Literal["pass", "review", "fail"]
    axes: Axes


PROBE = Obj(
    {
        "should_respond": Bool(),
        "reason": Text(60),
        "confidence": Num(0, 1),
        "score": Num(0, 100, True),
        "verdict": Enum(("pass", "review", "fail")),
        "axes": Obj({"safety": Num(0, 100, True), "clarity": Num(0, 1)}),
    }
)
NUMERIC = ("confidence", "score", "axes.safety", "axes.clarity")


@FUZZ
@given(answers(PROBE))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_structured_json(a: Answer) -> None:
    try:
        parsed, flags = parse_structured(Probe, a.text)
    except InvalidOutputError as exc:  # the documented typed errors (ValueError subclasses) only
        assert exc.flags and all(f.startswith("invalid:") or f == "unwrapped_list" for f in exc.flags)
        # a flagged field was really invalid: nothing valid is refused (unless the cut left half of it)
        assert a.cut or all(not a.valid.get(f.split(":", 1)[1], True) for f in exc.flags if f.startswith("invalid:"))
        assert not (a.clean or (a.truncated and not a.cut and all(a.valid.values()) and not a.arbitrary))
        return
    except ValueError:
        assert not (not a.arbitrary and not a.cut and all(a.valid.values())), "a valid answer was refused"
        return
    Probe.model_validate(parsed)
    for path in NUMERIC:  # every number used is the valid number written, never a clamped or cut one
        assert a.valid.get(path) and dig(parsed, path) == a.numbers[path], (path, a)
    assert 0 <= parsed["confidence"] <= 1 and 0 <= parsed["score"] <= 100
    assert not any(f.startswith("invalid:") for f in flags)


# -- 2. the hand raise's template fill ------------------------------------------------------------------------

IDS = ["coder", "designer"]
DIGITS = Num(0, 9, True)
FILL = Obj({pid: Obj({"relevance": DIGITS, "novelty": DIGITS, "confidence": DIGITS, "reason": Text(8)}) for pid in IDS})


def _template_number(value: Any) -> float | None:
    """What the skeleton reads as a score: an int or float 0–9 (strings and booleans are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and 0 <= number <= 9 else None


@FUZZ
@given(answers(FILL))
def test_fuzz_template_fill(a: Answer) -> None:
    from engine.handraise.decisions import failure_flags
    from engine.handraise.judge import FIELDS, parse_template_fill

    comps = parse_template_fill(a.text, IDS)
    assert [c.model for c in comps] == IDS
    try:  # what the text holds, read independently (the skeleton is strict JSON: no repairs)
        written = json.loads(a.text)
    except (ValueError, RecursionError):
        written = None
    written = written if isinstance(written, dict) else None
    present = [(pid, f, v[f]) for pid, v in (written or {}).items() if isinstance(v, dict) for f in FIELDS if f in v]
    any_invalid = any(_template_number(value) is None for _, _, value in present)
    for c in comps:
        values = {f: getattr(c, f) for f in FIELDS}
        assert all(0.0 <= v <= 1.0 for v in values.values())
        failed = failure_flags(c.flags)
        if written is None or any_invalid:  # unparseable, or an invalid number anywhere: all fall back
            assert failed and values == {f: 0.0 for f in FIELDS}
            continue
        mine = written.get(c.model)
        for f in FIELDS:
            if isinstance(mine, dict) and f in mine:
                assert values[f] == mine[f] / 9  # the digit read as n/9, nothing else
            else:
                assert values[f] == 0.0 and failed
        if not failed:
            assert isinstance(mine, dict) and all(f in mine for f in FIELDS)


# -- 3. the hand raise's self-judgment ------------------------------------------------------------------------

SELF = Obj(
    {
        "decision": Enum(("RESPOND", "SKIP")),
        "relevance": Num(0, 1),
        "novelty": Num(0, 1),
        "confidence": Num(0, 1),
        "reason": Text(60),
    }
)


@FUZZ
@given(answers(SELF))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_self_judgment(a: Answer) -> None:
    from engine.handraise.cast import DEFAULT_CAST, Turn
    from engine.handraise.decisions import HandRaiseConfig, HandStatus, decide_hands, failure_flags
    from engine.handraise.judge import FIELDS, WillJudge

    config = HandRaiseConfig(judge_method="self", threshold=0.0)  # any will would raise the hand
    p = DEFAULT_CAST[0]
    comps, _ = run(WillJudge([p], {p.model_id: model_answering(a)}, config).judge([Turn("user", "hi")]))
    c = comps[0]
    hand = decide_hands(comps, config)[0]
    values = {f: getattr(c, f) for f in FIELDS}
    assert all(0.0 <= v <= 1.0 for v in values.values()) and 0.0 <= hand.will <= 1.0
    if failure_flags(c.flags):
        assert values == {f: 0.0 for f in FIELDS} and hand.will == 0.0
        assert not a.clean
    else:
        assert not a.truncated and all(a.valid.get(f) for f in FIELDS)
        assert values == {f: a.numbers[f] for f in FIELDS}
    if a.truncated or a.arbitrary or not a.numbers_valid:
        assert failure_flags(c.flags) and (hand.status != HandStatus.RAISED or hand.will == 0.0)


# -- 4. the jury's evaluation (phase 1) and statement (a discussion round) -------------------------------------

AXES = Obj({"safety": Num(0, 100, True), "security": Num(0, 100, True), "task_completion": Num(0, 100, True)})
JUROR = Obj(
    {
        "reasoning": Text(600),
        "statement": Text(600),
        "verdict": Enum(("safe_pass", "needs_review", "unsafe_fail")),
        "score": Num(0, 100, True),
        "axes": AXES,
        "confidence": Num(0, 1),
    }
)
JUROR_NUMBERS = ("score", "confidence", "axes.safety", "axes.security", "axes.task_completion")


def _check_juror(e: Any, a: Answer, text_field: str) -> None:
    assert 0 <= e.score <= 100 and 0 <= e.confidence <= 1 and all(0 <= v <= 100 for v in e.axes.values())
    needed = [p for p in a.valid if p != ("statement" if text_field == "reasoning" else "reasoning")]
    clean = not a.arbitrary and not a.cut and not a.truncated and all(a.valid[p] for p in needed)
    if e.fallback:
        assert not clean and e.fallback_reason
        return
    assert not a.truncated and all(a.valid.get(p) for p in JUROR_NUMBERS)
    assert e.score == a.numbers["score"] and e.confidence == a.numbers["confidence"]
    assert {k: float(v) for k, v in e.axes.items()} == {k: a.numbers[f"axes.{k}"] for k in e.axes}


@FUZZ
@given(answers(JUROR))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_jury_evaluation_and_statement(a: Answer) -> None:
    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import NO_VERDICT, JurorSeat
    from engine.jury.runner import Jury

    seat = JurorSeat(juror_id="j", model_id="m", role_name="Juror")
    config = JuryConfig(max_discussion_rounds=1, consensus_threshold=2.0, final_judgment_method="majority_vote")
    result = run(Jury([seat], {"m": model_answering(a)}, config).run(JuryCase(id="c", content="Agent: hi")))
    phase1 = result.phase1_evaluations[0]
    statement = result.discussion_rounds[0].statements[0]
    _check_juror(phase1, a, "reasoning")
    if not phase1.fallback:
        _check_juror(statement.updated_evaluation, a, "statement")
    else:  # a statement either works (a first verdict: no change of position) or is a fallback again
        assert not statement.position_changed
        _check_juror(statement.updated_evaluation, a, "statement")
    latest = result.final_evaluations()[0]
    if latest.fallback:  # a failed juror never votes: a one-seat panel without it has no verdict
        assert result.final_verdict == NO_VERDICT and result.final_score is None
    else:
        assert result.final_verdict == latest.verdict and result.final_score == latest.score


# -- 5. the director's rubric --------------------------------------------------------------------------------

RUBRIC = Obj(
    {
        **{k: Num(1, 5, True) for k in ("frame", "roleplay", "connectivity", "density", "naturalness")},
        "comment": Text(120),
    }
)


@functools.cache
def _yana() -> Any:
    from engine.director.config import load_character

    return load_character("yana")


@FUZZ
@given(answers(RUBRIC))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_director_rubric(a: Answer) -> None:
    from engine.director.rubric import RUBRIC_CRITERIA, DirectorRubric, rubric_status
    from engine.director.status import Status

    result = run(DirectorRubric(model_answering(a)).score("えー、ほんと？", _yana()))
    if result.failed:  # the failure policy (WARN by default), flagged — never a PASS from a broken answer
        assert result.status == Status.WARN and result.average is None and "rubric_failed" in result.flags
        assert not a.clean
        return
    assert not a.truncated and all(a.valid.get(k) for k in RUBRIC_CRITERIA)
    assert result.scores == {k: a.numbers[k] for k in RUBRIC_CRITERIA}
    assert all(1 <= v <= 5 for v in result.scores.values())
    flat = len(set(result.scores.values())) == 1  # a flat scale never RETRYs a line on its own (issue 37)
    expected = rubric_status(sum(result.scores.values()) / 5)
    assert result.status == (min(expected, Status.WARN) if flat else expected)
    assert ("flat_scale" in result.flags) is flat


# -- 6. the skip judge ------------------------------------------------------------------------------------------

SKIP = Obj({"should_respond": Bool(), "reason": Text(200), "confidence": Num(0, 1)})


@FUZZ
@given(answers(SKIP))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_skip_judge(a: Answer) -> None:
    from engine.skip.config import JudgmentSkipConfig
    from engine.skip.decisions import calculate_skip_seconds
    from engine.skip.judges import ModelJudge
    from engine.skip.messages import Message

    now = datetime(2026, 1, 1, tzinfo=UTC)
    history = [Message(id="m1", channel_id="C", thread_ts=None, author="aki", text="誰か助けて", at=now)]
    outcome = run(ModelJudge(model_answering(a)).judge(history, now))
    result = outcome.result
    assert result is not None and outcome.error is None and 0.0 <= result.confidence <= 1.0
    written = a.numbers["confidence"] if a.valid.get("confidence") and not a.truncated and not a.arbitrary else None
    # the confidence is the one written, or the flagged fallback 0.0 — never a clamped or cut number
    assert result.confidence == written or (result.confidence == 0.0 and result.flags)
    if result.cacheable:  # only a cleanly parsed confidence may set a skip window
        assert written is not None and result.confidence == written and not result.flags
    if a.truncated or a.arbitrary or not a.valid.get("confidence"):
        assert not result.cacheable  # so never a 12-hour skip from a broken answer
    if a.clean:
        assert result.cacheable
        assert calculate_skip_seconds(result.confidence, JudgmentSkipConfig()) in (600, 3600, 43200)


# -- 7. the confidence self-evaluation -------------------------------------------------------------------------

SELF_EVAL = Obj({"accuracy": Num(0, 1), "relevance": Num(0, 1), "style": Num(0, 1), "reason": Text(160)})


@FUZZ
@given(answers(SELF_EVAL))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_confidence_self_evaluation(a: Answer) -> None:
    from engine.confidence.judges import LLMSelfEvaluator

    factor = run(LLMSelfEvaluator(model_answering(a)).evaluate("What is 2+2?", "4"))
    assert 0.0 <= factor.value <= 1.0
    if factor.flagged:  # the seed's default, flagged: never mistaken for a judgment
        assert factor.value == LLMSelfEvaluator.FALLBACK and not a.clean
        return
    assert not a.truncated and all(a.valid.get(k) for k in ("accuracy", "relevance", "style"))
    expected = (a.numbers["accuracy"] + a.numbers["relevance"] + a.numbers["style"]) / 3
    assert factor.value == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-12)
