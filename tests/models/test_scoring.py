"""`score_options`: the likelihood primitive, against the real bundled model, recorded and replayed."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from models.scoring import calibrate, normalise, split_trailing_space


def test_normalise_and_calibrate_arithmetic() -> None:
    probs = normalise([math.log(0.2), math.log(0.6)])
    assert probs == pytest.approx([0.25, 0.75])
    # Contextual calibration removes the template's prior: a baseline that favours the second option
    # as much as the input does leaves the two equal.
    assert calibrate(probs, [0.25, 0.75]) == pytest.approx([0.5, 0.5])
    assert normalise([-math.inf, -math.inf]) == [0.5, 0.5]
    assert split_trailing_space("Answer: ", "Yes") == ("Answer:", " Yes")


@pytest.mark.model
def test_prefix_reuse_changes_nothing_and_equals_a_full_evaluation(bundled_path: str) -> None:
    from models.backends.llamacpp import default_threads, load_llama, score_continuations

    llama, lock = load_llama(bundled_path, 4096, None, "alpaca")
    # JUDGELAB_THREADS sets the threads of prompt batches (all scoring) too, not only of generation: left to
    # llama-cpp-python, batches took every core and spun against the other test workers' models.
    assert llama.context_params.n_threads_batch == llama.context_params.n_threads == default_threads()
    conversation = 'Group chat:\nUser: "My Flask app returns 500 when the JSON body is empty."\n\n'
    prompts = [
        conversation + f"Question: Is the last message about {topic}?\nAnswer:"
        for topic in ("Python, debugging", "UI, colour", "statistics, papers")
    ]
    with lock:
        for prompt in prompts:  # each reuses the conversation the previous one left in the KV cache
            reused = score_continuations(llama, prompt, [" Yes", " No", " Maybe not"])
            fresh = score_continuations(llama, prompt, [" Yes", " No", " Maybe not"], reuse=False)
            assert reused.token_counts == fresh.token_counts
            assert reused.logprobs == pytest.approx(fresh.logprobs, abs=1e-3)
            assert all(x < 0 for x in reused.logprobs)
            assert reused.prompt_tokens == fresh.prompt_tokens


@pytest.mark.model
def test_an_option_scored_again_after_the_same_prompt_is_read_back_exactly(bundled_path: str) -> None:
    """The judges score the same content-free baselines for every case: an option after the same prompt tokens is
    read back from the loaded model's memo — the very numbers a decode gives — and never mixed up with the same
    option after another prompt."""
    from models.backends.llamacpp import _option_memo, load_llama, score_continuations

    llama, lock = load_llama(bundled_path, 4096, None, "alpaca")
    first, second = "Transcript shown as a good example:\n", "Transcript shown as a bad example:\n"
    options = ['"Hello."', '"Here is the report you asked for."']
    with lock:
        memo = _option_memo(llama)
        a = score_continuations(llama, first, options)
        size = len(memo)
        b = score_continuations(llama, second, options)  # the same options after another prompt: decoded
        assert len(memo) == size + len(options) and b.logprobs != a.logprobs
        again = score_continuations(llama, first, options)  # read back: nothing new in the memo
        assert len(memo) == size + len(options) and again.logprobs == a.logprobs
        assert again.token_counts == a.token_counts and again.prompt_tokens == a.prompt_tokens
        memo.clear()
        decoded = score_continuations(llama, first, options)  # decoded afresh: the same numbers, exactly
        assert decoded.logprobs == a.logprobs
        fresh = score_continuations(llama, first, options, reuse=False)  # the reference keeps no memo
        assert fresh.logprobs == pytest.approx(a.logprobs, abs=1e-3) and len(memo) == len(options)


@pytest.mark.model
def test_score_options_is_recorded_and_replays_exactly(store) -> None:
    from models.catalog import load_catalog
    from models.errors import ReplayMiss
    from models.registry import build_model

    spec = load_catalog().get("gemma3-270m")
    live = build_model(spec, call_log=store)
    prompt = 'Message: "Can someone review my SQL query?"\nThe last message is about'
    options = [" databases", " typography", " statistics"]

    async def both() -> tuple:
        a = await live.score_options(prompt, options, calibration='Message: "N/A"\nThe last message is about')
        replay = build_model(spec, replay_from=store, call_log=store)
        b = await replay.score_options(prompt, options, calibration='Message: "N/A"\nThe last message is about')
        return a, b, replay

    a, b, replay = asyncio.run(both())
    assert a.logprobs == b.logprobs and a.calibrated == b.calibrated and a.pmi == b.pmi
    assert b.replayed and not a.replayed
    assert sum(a.probabilities) == pytest.approx(1.0) and sum(a.calibrated or []) == pytest.approx(1.0)
    calls = [c for c in store.calls() if c.backend == "llamacpp"]
    assert len(calls) == 2  # the prompt and its content-free baseline
    assert all(json.loads(c.request_json)["options"] == options for c in calls)
    with pytest.raises(ReplayMiss):
        asyncio.run(replay.score_options("never scored", options))


def test_a_backend_without_logprobs_says_it_cannot_score() -> None:
    from models.catalog import ModelSpec, Profile
    from models.errors import CannotScore
    from models.registry import build_model

    spec = ModelSpec(id="claude-x", backend="anthropic", model="claude-x", profile=Profile(name="c"))
    model = build_model(spec)
    with pytest.raises(CannotScore, match="no log-probabilities"):
        asyncio.run(model.score_options("Question: ok?\nAnswer:", [" Yes", " No"]))
