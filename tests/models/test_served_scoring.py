"""Likelihood scoring through a real `llama_cpp.server` (`/v1/completions`, echo + logprobs) equals the bundled
Gemma scored in process. Its own module (and server), so `make test` runs it beside test_local_models.py on the
other worker: llama-cpp-python's server sorts Gemma's whole 262 144-token vocabulary in Python for every echoed
token, which makes this the suite's costliest test.

(SmolLM2 would cost a fifth, but llama-cpp-python 0.3.36's server echoes wrong log-probabilities for a prompt
without a BOS token, as SmolLM2's are: about -10 for every token, where in process " Paris" after "The capital of
France is" is -0.26.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from models.catalog import BUNDLED_MODEL_ID, load_catalog
from models.registry import ModelHub, build_model
from tests.models.servers import serve_llama, server_spec

pytestmark = [pytest.mark.model, pytest.mark.server]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def scoring_server(bundled_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_llama(bundled_path, BUNDLED_MODEL_ID, tmp_path_factory.mktemp("scoring-server")) as url:
        yield url


def test_scoring_through_a_real_llama_cpp_server_equals_the_local_backend(scoring_server: str, store) -> None:
    """The OpenAI-compatible path scores a raw prompt through `/v1/completions` with echo + logprobs: the
    same summed log-probabilities as the bundled model scored in process (one model, two transports), so a
    likelihood judge, which only sums and compares these, gives the same answer served either way; the scores
    are recorded and replayed. (A whole judge prompt through the server, a skip cue of about 300 tokens, took
    220 of this test's 270 s: the judges' own use of echoed log-probabilities is tested against a loopback
    server speaking the same shape, tests/models/test_api_scoring.py.)"""

    local = ModelHub(load_catalog()).get(BUNDLED_MODEL_ID)
    served = build_model(server_spec(scoring_server), call_log=store)
    assert served.can_score
    cases = [
        ("The capital of France is ", ["Paris", "London", "the city of Paris"]),
        ("Question: Is fire hot?\nAnswer:", [" Yes", " No"]),
        ('Message: "パスワードを忘れました"\nThis message is about', [" passwords", " cooking", " the weather"]),
    ]
    served_first = None
    for prompt, options in cases:
        a = run(local.score_options(prompt, options))
        b = run(served.score_options(prompt, options))
        if served_first is None:
            served_first = b
        assert b.token_counts == a.token_counts, prompt
        # llama.cpp's quantised kernels round differently for different batch shapes (the server evaluates
        # prompt and option in one batch; the local scorer decodes the option on top of a cached prompt):
        # measured up to 0.21 nats (1.2 %) on these items, the same ranking.
        assert b.logprobs == pytest.approx(a.logprobs, abs=0.2, rel=0.03), prompt
        assert b.best(calibrated=False) == a.best(calibrated=False)
    calls = [c for c in store.calls() if c.backend == "openai" and c.purpose != "probe"]
    assert calls and all(c.error is None for c in calls)
    replayed = build_model(server_spec(scoring_server), call_log=store, replay_from=store)
    again = run(replayed.score_options(*cases[0]))
    assert served_first is not None and again.replayed
    assert again.logprobs == pytest.approx(served_first.logprobs)  # what the server answered, read back
