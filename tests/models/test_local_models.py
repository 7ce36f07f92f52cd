"""The real bundled Gemma 3 270M: through llama-cpp-python directly, and through a real
`llama_cpp.server` on 127.0.0.1 with the OpenAI backend. Record → replay is checked on both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from engine.events import run_context
from models.catalog import BUNDLED_MODEL_ID, ModelSpec, Profile, load_catalog
from models.errors import ReplayMiss, StructuredOutputError
from models.probe import PROBE_MESSAGES, ProbeJudgment
from models.registry import ModelHub, build_model
from tests.models.servers import serve_llama, server_spec

pytestmark = [pytest.mark.model, pytest.mark.server]  # the bundled model, and llama_cpp.server


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_bundled_model_structured_judgment_is_valid_and_recorded(store) -> None:
    hub = ModelHub(load_catalog(), call_log=store)
    model = hub.get(BUNDLED_MODEL_ID)
    with run_context(store, "test.local", {"model": BUNDLED_MODEL_ID}) as handle:
        completion = run(model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=128))
    judgment = ProbeJudgment.model_validate(completion.parsed)
    assert 0.0 <= judgment.confidence <= 1.0
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.latency_s > 0
    calls = store.calls(handle.run_id)
    assert len(calls) == 1
    call = calls[0]
    assert call.id == completion.call_id
    assert call.backend == "llamacpp" and call.purpose == "test.local" and call.error is None
    assert call.prompt_tokens == completion.usage.prompt_tokens
    assert call.completion_tokens == completion.usage.completion_tokens
    assert call.latency_s == pytest.approx(completion.latency_s)
    assert call.raw_text == completion.text
    # The grammar does not bound numbers; an out-of-range one is a failed field (a StructuredOutputError,
    # see the replay test), never clamped: what comes back parsed holds only repairs of the JSON text.
    for flag in completion.flags:
        assert flag.startswith("json_")


def test_bundled_model_is_deterministic_at_temperature_zero(store) -> None:
    model = ModelHub(load_catalog(), call_log=store).get(BUNDLED_MODEL_ID)
    first = run(model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=96))
    second = run(model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=96))
    assert first.text == second.text


def test_bundled_model_streams_and_records(store) -> None:
    model = ModelHub(load_catalog(), call_log=store).get(BUNDLED_MODEL_ID)

    async def consume() -> tuple[list[str], Any]:
        pieces, final = [], None
        async for chunk in model.stream("Explain what a jury does.", max_tokens=24):
            if chunk.completion:
                final = chunk.completion
            elif chunk.text:
                pieces.append(chunk.text)
        return pieces, final

    pieces, final = run(consume())
    assert len(pieces) > 1
    assert final.text == "".join(pieces)
    assert final.usage.completion_tokens > 0
    assert store.calls()[-1].raw_text == final.text


def test_record_then_replay_gives_identical_completions(store) -> None:
    hub = ModelHub(load_catalog(), call_log=store)
    live, replay = hub.get(BUNDLED_MODEL_ID), hub.get(BUNDLED_MODEL_ID, replay=True)
    prompts = ["Is the sky green? Answer as JSON.", "Should a bot greet a new member? Answer as JSON."]

    async def outcome(model: Any, prompt: str) -> tuple[Any, ...]:
        """A completion, or the failed field it came back with: either is recorded and replays the same."""
        try:
            c = await model.complete(prompt, schema=ProbeJudgment, max_tokens=64)
        except StructuredOutputError as exc:
            return ("failed", exc.message, exc.flags, exc.raw_text)
        assert c.backend == ("replay" if model is replay else "llamacpp")
        return ("ok", c.text, c.parsed, c.usage, c.flags, c.cost)

    async def both() -> tuple[list[Any], list[Any]]:
        recorded = [await outcome(live, p) for p in prompts]
        replayed = [await outcome(replay, p) for p in prompts]
        return recorded, replayed

    recorded, replayed = run(both())
    assert recorded == replayed
    # The bundled model answers `confidence: 1e15` to the second prompt: a failed field, named, not 1.0.
    assert recorded[1][0] == "failed" and recorded[1][2] == ["invalid:confidence"]
    assert "confidence: 1000000000000000 is above the maximum 1.0" in recorded[1][1]
    # A request never recorded is a typed miss, not a guess.
    with pytest.raises(ReplayMiss):
        run(replay.complete("never asked", schema=ProbeJudgment, max_tokens=64))
    # Replays are recorded too (backend=replay) but never serve as a source for later replays.
    assert sum(1 for c in store.calls() if c.backend == "replay") == 3


@pytest.fixture(scope="module")
def llama_server(bundled_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama-cpp-python OpenAI-compatible server serving the bundled Gemma on 127.0.0.1."""
    with serve_llama(bundled_path, "gemma3-270m", tmp_path_factory.mktemp("llama-server")) as url:
        yield url


def test_openai_backend_against_real_llama_cpp_server(llama_server: str, store) -> None:
    from models.registry import check_availability

    spec = server_spec(llama_server)
    assert run(check_availability(spec)).available
    model = build_model(spec, call_log=store)
    completion = run(model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=128))
    judgment = ProbeJudgment.model_validate(completion.parsed)
    assert 0.0 <= judgment.confidence <= 1.0
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    call = store.calls()[-1]
    assert call.backend == "openai" and call.error is None and call.raw_text == completion.text

    async def consume() -> Any:
        final = None
        pieces = []
        async for chunk in model.stream("Name a colour.", max_tokens=16):
            final = chunk.completion or final
            if chunk.text:
                pieces.append(chunk.text)
        return pieces, final

    pieces, final = run(consume())
    assert final is not None and final.text == "".join(pieces) and final.text

    replayed = run(
        build_model(spec, call_log=store, replay_from=store).complete(
            PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=128
        )
    )
    assert (replayed.text, replayed.parsed, replayed.usage) == (completion.text, completion.parsed, completion.usage)


JAPANESE_PROMPT = "誰か、パスワードのリセット方法を知っていますか？JSONで答えて。"


class _Will(BaseModel):
    model: str
    relevance: float = Field(ge=0, le=1)
    novelty: float = Field(ge=0, le=1)
    reason: str = Field(max_length=60)


class _Wills(BaseModel):
    wills: list[_Will]


@pytest.mark.parametrize(
    ("messages", "schema"),
    [
        ([m.model_dump() for m in PROBE_MESSAGES], ProbeJudgment),
        ([{"role": "user", "content": JAPANESE_PROMPT}], ProbeJudgment),
        (
            [
                {
                    "role": "user",
                    "content": "Models gpt, claude, gemma. The user asks about Python decorators. "
                    "Rate each model's will to speak.",
                }
            ],
            _Wills,
        ),
    ],
)
def test_fast_grammar_path_gives_exactly_the_library_answer(
    bundled_path: str, messages: list, schema: type[BaseModel]
) -> None:
    """The fast greedy path must produce the very tokens llama-cpp-python's full-vocabulary grammar
    sampling produces; it may only be faster."""
    from models.backends.llama_grammar_fast import format_prompt, greedy_json
    from models.backends.llamacpp import load_llama

    llama, lock = load_llama(bundled_path, 4096, None, "alpaca")
    json_schema = schema.model_json_schema()
    with lock:
        llama.reset()
        library = llama.create_chat_completion(
            messages=messages,
            temperature=0,
            max_tokens=96,
            response_format={"type": "json_object", "schema": json_schema},
            stream=False,
        )
        assert isinstance(library, dict)  # a whole answer, not a stream
        formatted = format_prompt("alpaca", messages)
        assert formatted is not None
        prompt, has_bos = formatted
        fast = greedy_json(llama, prompt, json_schema, 96, has_bos=has_bos)
    assert fast["text"] == library["choices"][0]["message"]["content"]
    assert fast["prompt_tokens"] == library["usage"]["prompt_tokens"]
    assert fast["completion_tokens"] == library["usage"]["completion_tokens"]


def test_choice_probabilities_are_normalised_deterministic_and_recorded(store) -> None:
    model = ModelHub(load_catalog(), call_log=store).get(BUNDLED_MODEL_ID)
    messages = [{"role": "user", "content": "Is the sky blue? Answer true or false."}]
    first = run(model.choice_probabilities(messages, '{"answer": ', ["true", "false"]))
    second = run(model.choice_probabilities(messages, '{"answer": ', ["true", "false"]))
    assert sum(first.probabilities.values()) == pytest.approx(1.0)
    assert first.probabilities == second.probabilities
    call = store.get_call(first.call_id)
    assert call is not None and call.error is None and call.prompt_tokens == first.prompt_tokens > 0
    import json as _json

    assert _json.loads(call.raw_text) == first.probabilities


def test_backends_without_token_access_say_so() -> None:
    from models.errors import ModelUnavailable

    spec = ModelSpec(
        id="x",
        backend="openai",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        needs_key=False,
        profile=Profile(name="x"),
    )
    with pytest.raises(ModelUnavailable, match="no token probabilities"):
        run(build_model(spec).choice_probabilities("q", "", ["a", "b"]))
