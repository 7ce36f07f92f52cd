"""Fuzz the likelihood path — FUZZ_EXAMPLES generated backend answers (10 000 in CI): the option
log-probabilities a backend (or a replayed record) hands to `score_options`, then the calibration, the
fitted maps and the skip judge built on them. Invalid log-probabilities (NaN, +inf, positive, a wrong
count) must be a typed error, never a probability; valid ones must give probabilities in [0, 1] that sum
to 1, and a judge must keep every number in its range."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from models.base import ChatModel
from models.catalog import ModelSpec, Profile
from models.errors import ModelError
from models.types import RawResult, Request, ScoreResult
from tests.fuzz.strategies import FUZZ

LOGPROB = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-50, 0), st.just(-math.inf), st.just(0.0))


class Scripted(ChatModel):
    """A transport whose scores are whatever the strategy drew."""

    backend = "scripted"
    can_score = True

    def __init__(self, results: list[ScoreResult]) -> None:
        super().__init__(ModelSpec(id="fuzz", backend="openai", model="fuzz", profile=Profile(name="f")))
        self.results = results

    async def _generate(self, request: Request, schema: Any) -> RawResult:
        raise NotImplementedError

    async def _score(self, request: Request) -> ScoreResult:
        return self.results.pop(0)


def _valid(logprobs: list[float], n: int) -> bool:
    return (
        len(logprobs) == n
        and all(math.isfinite(x) or x == -math.inf for x in logprobs)
        and all(x <= 1e-6 for x in logprobs)
    )


@FUZZ
@given(
    st.lists(LOGPROB, min_size=0, max_size=5), st.lists(st.floats(-30, 0), min_size=2, max_size=2), st.integers(1, 4)
)
def test_score_options_never_passes_an_invalid_logprob(logprobs: list[float], baseline: list[float], n: int) -> None:
    ChatModel._BASELINES.clear()
    options = [f" o{i}" for i in range(n)]
    base = ScoreResult(logprobs=(baseline * 3)[:n], token_counts=[1] * n)
    model = Scripted([ScoreResult(logprobs=logprobs, token_counts=[1] * len(logprobs)), base])
    try:
        scores = asyncio.run(model.score_options("p", options, calibration="q"))
    except ModelError as exc:
        assert not _valid(logprobs, n), exc
        return
    assert _valid(logprobs, n)
    for probs in (scores.probabilities, scores.calibrated or []):
        assert all(0 <= p <= 1 for p in probs) and math.isclose(sum(probs), 1.0, rel_tol=1e-9)


@example([0.0, -math.inf, 0.0, 0.0], [-0.53125, 0.0, 0.0, 0.0])  # CI: p = 0.4986 shown as 0.50
@FUZZ
@given(
    st.lists(st.one_of(st.floats(-60, 0), st.just(-math.inf)), min_size=4, max_size=4),
    st.lists(st.one_of(st.floats(-60, 0), st.just(-math.inf)), min_size=4, max_size=4),
)
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_likelihood_skip_judge_stays_in_range(logprobs: list[float], baseline: list[float]) -> None:
    from engine.skip.judges import LikelihoodJudge
    from engine.skip.likelihood import SKIP_CUES
    from engine.skip.messages import Message

    ChatModel._BASELINES.clear()
    # One scored prompt and its content-free baseline per cue: the drawn values, cycled to the cue's option
    # count and rotated per cue, so every cue's options get a different mix of them.
    results = []
    for k, (_, _, yes, no) in enumerate(SKIP_CUES):
        for drawn in (logprobs, baseline):
            values = [drawn[(k + i) % len(drawn)] for i in range(len(yes) + len(no))]
            results.append(ScoreResult(logprobs=values, token_counts=[2] * len(values)))
    model = Scripted(results)
    model.spec = model.spec.model_copy(update={"id": "gemma3-270m"})  # the shipped map applies
    now = datetime(2026, 1, 5, tzinfo=UTC)
    outcome = asyncio.run(
        LikelihoodJudge(model).judge(
            [Message(id="m", channel_id="C", thread_ts=None, author="a", text="hi", at=now)], now
        )
    )
    if outcome.result is None:  # an option with no probability at all: an uncached error, never a guess
        assert outcome.error and "invalid likelihood" in outcome.error
        return
    result = outcome.result
    assert 0.5 <= result.confidence <= 1.0
    assert "p(respond) = " in result.reason
    shown = float(result.reason.split("= ")[1].split(" ")[0])  # p, rounded to two places for the reader
    # The decision is p >= 0.5 on the exact p; the shown p is on the decision's side up to its rounding
    # (p = 0.4986 shows as 0.50 and does not respond), and confidence is max(p, 1 - p).
    assert shown >= 0.5 if result.should_respond else shown <= 0.5
    assert math.isclose(result.confidence, max(shown, 1 - shown), abs_tol=0.0051)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_fitted_maps_refuse_non_finite_features(bad: float) -> None:
    from engine.judgemaps import load_calibration

    cal = load_calibration("skip.likelihood", "gemma3-270m")
    assert cal is not None
    with pytest.raises(ValueError, match="non-finite"):
        cal.apply("respond", dict.fromkeys(cal.maps["respond"].features, 0.0) | {"pmi_need": bad})
