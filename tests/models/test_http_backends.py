"""Ollama, OpenAI, Anthropic and Gemini backends against loopback servers that speak each API's
documented shapes: success, structured output, streaming, 429 + Retry-After, 5xx, stalls, malformed
bodies, missing keys, unreachable servers. Every call, failed or not, is recorded."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
from pydantic import BaseModel, Field

from dashboard.net import free_port
from models import MemoryCallLog, base
from models.catalog import ModelSpec, Profile
from models.errors import (
    BadRequest,
    MalformedResponse,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    SafetyBlocked,
    ServerError,
    StructuredOutputError,
)
from models.registry import build_model, check_availability
from tests.fakes.servers import (
    FakeServer,
    OllamaServer,
    Reply,
    anthropic_error,
    anthropic_text,
    anthropic_tool,
    gemini_error,
    gemini_ok,
    ollama_error,
    ollama_ok,
    ollama_stream,
    openai_error,
    openai_ok,
    openai_stream,
)


class Verdict(BaseModel):
    should_respond: bool
    reason: str
    confidence: float = Field(ge=0, le=1)


VERDICT = {"should_respond": True, "reason": "asked directly", "confidence": 0.8}


def spec(backend: str, url: str, **kw: Any) -> ModelSpec:
    model = {
        "openai": "gpt-4o",
        "anthropic": "claude-haiku-4-5",
        "gemini": "gemini-2.5-flash",
        "ollama": "llama3.2:3b",
    }[backend]
    base = url + "/v1" if backend == "openai" else url
    fields: dict[str, Any] = {
        "id": f"test-{backend}",
        "backend": backend,
        "model": model,
        "base_url": base,
        "timeout_s": 2.0,
        "max_retries": 2,
        "price_in_per_1k": 0.001,
        "price_out_per_1k": 0.002,
        "profile": Profile(name=backend),
    }
    fields.update(kw)
    return ModelSpec(**fields)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retries here wait 20 ms, not half a second, when the server names no wait (the same code path: only the
    base of the backoff is shorter; its schedule is checked by test_the_backoff_doubles_with_jitter_up_to_its_cap,
    and a server's Retry-After is still waited in full)."""
    monkeypatch.setattr(base, "BACKOFF_BASE_S", 0.02)


def test_the_backoff_doubles_with_jitter_up_to_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BACKOFF_BASE_S", 0.5)
    for attempt, middle in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (7, 20.0), (30, 20.0)]:
        delays = [base.backoff_delay(attempt) for _ in range(200)]
        assert middle * 0.75 <= min(delays) < middle * 0.85 and middle * 1.15 < max(delays) <= middle * 1.25


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-0123456789")


# -- OpenAI --------------------------------------------------------------------------------------
def test_openai_structured_uses_json_schema_and_records(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(openai_ok(json.dumps(VERDICT), 30, 12))
        model = build_model(spec("openai", server.url), call_log=log)
        completion = run(model.complete("hello?", schema=Verdict))
        body = server.seen[0].body
        headers = server.seen[0].headers
    assert completion.parsed == VERDICT
    assert completion.usage.prompt_tokens == 30 and completion.usage.completion_tokens == 12
    assert completion.cost == pytest.approx(30 / 1000 * 0.001 + 12 / 1000 * 0.002)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["confidence"]["maximum"] == 1
    assert headers["authorization"] == "Bearer sk-test-openai-0123456789"
    record = log.records[0]
    assert record.error is None and record.parsed == VERDICT and record.prompt_tokens == 30
    assert "sk-test" not in json.dumps(record.model_dump(mode="json"))


def test_openai_429_honours_retry_after_then_succeeds(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(
            openai_error(429, "Rate limit reached", "requests", {"retry-after": "0.6"}),
            openai_ok(json.dumps(VERDICT)),
        )
        model = build_model(spec("openai", server.url), call_log=log)
        started = time.perf_counter()
        completion = run(model.complete("hi", schema=Verdict))
        waited = time.perf_counter() - started
        assert len(server.seen) == 2
    assert completion.parsed == VERDICT
    assert waited >= 0.6  # the server's Retry-After, not our shorter default backoff
    assert log.records[0].attempts == 2


def test_openai_429_with_http_date_retry_after(keys: None) -> None:
    from email.utils import formatdate

    with FakeServer() as server:
        server.script(
            openai_error(429, "slow down", headers={"retry-after": formatdate(time.time() + 1, usegmt=True)}),
            openai_ok("ok"),
        )
        model = build_model(spec("openai", server.url))
        assert run(model.complete("hi")).text == "ok"


def test_openai_5xx_retries_then_gives_up_with_typed_error(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(*[openai_error(500, "boom")] * 3)
        model = build_model(spec("openai", server.url, max_retries=2), call_log=log)
        with pytest.raises(ServerError) as info:
            run(model.complete("hi"))
        assert len(server.seen) == 3
    assert "HTTP 500" in str(info.value) and "after 3 attempts" in str(info.value)
    assert "test-openai" in str(info.value)
    assert log.records[0].error_type == "ServerError" and log.records[0].attempts == 3


def test_openai_timeout_is_typed(keys: None) -> None:
    with FakeServer() as server:
        server.script(Reply(delay_s=1.5, body={}), Reply(delay_s=1.5, body={}))
        model = build_model(spec("openai", server.url, timeout_s=0.5, max_retries=1))
        with pytest.raises(ModelTimeout):
            run(model.complete("hi"))


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body="<html>Bad Gateway</html>"),
        Reply(body={"id": "x", "object": "chat.completion", "choices": []}),
        Reply(body={"unexpected": True}),
    ],
)
def test_openai_malformed_bodies(keys: None, reply: Reply) -> None:
    with FakeServer() as server:
        server.script(reply, reply)
        model = build_model(spec("openai", server.url, max_retries=1))
        with pytest.raises(MalformedResponse):
            run(model.complete("hi"))


def test_openai_400_is_not_retried(keys: None) -> None:
    with FakeServer() as server:
        server.script(openai_error(400, "bad schema", "invalid_request_error"))
        model = build_model(spec("openai", server.url))
        with pytest.raises(BadRequest):
            run(model.complete("hi"))
        assert len(server.seen) == 1


def test_openai_401_names_the_key(keys: None) -> None:
    with FakeServer() as server:
        server.script(openai_error(401, "Incorrect API key provided", "invalid_request_error"))
        with pytest.raises(ModelUnavailable, match="OPENAI_API_KEY"):
            run(build_model(spec("openai", server.url)).complete("hi"))


def test_openai_unparseable_structured_output_carries_raw_text(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(openai_ok("I think you should respond, probably."))
        model = build_model(spec("openai", server.url), call_log=log)
        with pytest.raises(StructuredOutputError) as info:
            run(model.complete("hi", schema=Verdict))
    assert info.value.raw_text == "I think you should respond, probably."
    assert log.records[0].raw_text == "I think you should respond, probably."
    assert log.records[0].error_type == "StructuredOutputError"


def test_openai_streaming_with_usage(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(openai_stream(["Hel", "lo", " there"], 9, 3))
        model = build_model(spec("openai", server.url), call_log=log)

        async def consume() -> tuple[list[str], Any]:
            pieces, final = [], None
            async for chunk in model.stream("hi"):
                if chunk.completion:
                    final = chunk.completion
                elif chunk.text:
                    pieces.append(chunk.text)
            return pieces, final

        pieces, final = run(consume())
        assert server.seen[0].body["stream"] is True
    assert pieces == ["Hel", "lo", " there"]
    assert final.text == "Hello there" and final.usage.completion_tokens == 3
    assert log.records[0].raw_text == "Hello there"


def test_openai_missing_key_is_unavailable() -> None:
    s = spec("openai", "http://127.0.0.1:9")
    assert not run(check_availability(s)).available
    with pytest.raises(ModelUnavailable, match="OPENAI_API_KEY"):
        run(build_model(s).complete("hi"))


def test_unreachable_compatible_server_says_so() -> None:
    s = spec("openai", f"http://127.0.0.1:{free_port()}", needs_key=False, max_retries=0)
    availability = run(check_availability(s))
    assert not availability.available and "not reachable" in availability.reason
    with pytest.raises(ModelUnavailable, match="not reachable"):
        run(build_model(s).complete("hi"))


# -- Anthropic -----------------------------------------------------------------------------------
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_anthropic_structured_via_forced_tool_use(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(
            anthropic_tool(VERDICT | {"confidence": 0.5}, 40, 15), anthropic_tool(VERDICT | {"confidence": 3.5})
        )
        model = build_model(spec("anthropic", server.url), call_log=log)
        completion = run(
            model.complete(
                [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], schema=Verdict
            )
        )
        # The tool's input is validated like any text: 3.5 for a 0–1 field is a failed field, never 1.0.
        with pytest.raises(StructuredOutputError, match="confidence: 3.5 is above the maximum 1") as info:
            run(model.complete("again", schema=Verdict))
        assert info.value.flags == ["invalid:confidence"]
        seen = server.seen[0]
    assert [c.error is None for c in log.records] == [True, False] and log.records[1].flags == ["invalid:confidence"]
    assert seen.path == "/v1/messages"
    # The SDK chooses the header (x-api-key, or a bearer token in newer versions); the key reaches it.
    assert "sk-ant-test-0123456789" in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    assert seen.body["system"] == "be brief"
    assert seen.body["tool_choice"] == {"type": "tool", "name": "submit_answer"}
    assert seen.body["tools"][0]["input_schema"]["properties"]["confidence"]["maximum"] == 1
    assert completion.parsed == VERDICT | {"confidence": 0.5}
    assert completion.usage.prompt_tokens == 40 and completion.usage.completion_tokens == 15


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_anthropic_text_and_errors(keys: None) -> None:
    with FakeServer() as server:
        server.script(
            anthropic_error(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "0.2"}),
            anthropic_error(529, "overloaded_error", "Overloaded"),
            anthropic_text("plain answer"),
        )
        model = build_model(spec("anthropic", server.url, max_retries=3))
        assert run(model.complete("hi")).text == "plain answer"
        assert len(server.seen) == 3


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_anthropic_refusal_and_rate_limit_exhausted(keys: None) -> None:
    with FakeServer() as server:
        server.script(anthropic_text("", stop_reason="refusal"))
        with pytest.raises(SafetyBlocked):
            run(build_model(spec("anthropic", server.url)).complete("hi"))
    with FakeServer() as server:
        server.script(*[anthropic_error(429, "rate_limit_error", "limit", {"retry-after": "0"})] * 3)
        with pytest.raises(RateLimited, match="HTTP 429"):
            run(build_model(spec("anthropic", server.url, max_retries=2)).complete("hi"))


def test_anthropic_malformed_body(keys: None) -> None:
    with FakeServer() as server:
        server.script(Reply(body="not json at all"), Reply(body="not json at all"))
        with pytest.raises(MalformedResponse):
            run(build_model(spec("anthropic", server.url, max_retries=1)).complete("hi"))


# -- Gemini --------------------------------------------------------------------------------------
def test_gemini_structured_with_response_schema(keys: None) -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(gemini_ok(json.dumps(VERDICT), 17, 9))
        model = build_model(spec("gemini", server.url), call_log=log)
        completion = run(
            model.complete([{"role": "system", "content": "judge"}, {"role": "user", "content": "hi"}], schema=Verdict)
        )
        seen = server.seen[0]
    assert re.match(r"^/v1(beta)?/models/gemini-2.5-flash:generateContent", seen.path)
    assert seen.headers.get("x-goog-api-key") == "gm-test-0123456789"
    config = seen.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"]["confidence"]["maximum"] == 1
    assert seen.body["systemInstruction"]["parts"][0]["text"] == "judge"
    assert completion.parsed == VERDICT
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (17, 9)


def test_gemini_errors(keys: None) -> None:
    with FakeServer() as server:
        server.script(
            gemini_error(429, "Resource has been exhausted", {"retry-after": "0.3"}),
            gemini_error(503, "The model is overloaded"),
            gemini_ok("fine"),
        )
        model = build_model(spec("gemini", server.url, max_retries=3))
        assert run(model.complete("hi")).text == "fine"
        assert len(server.seen) == 3
    with FakeServer() as server:
        server.script(gemini_ok("", finish="SAFETY"))
        with pytest.raises(SafetyBlocked):
            run(build_model(spec("gemini", server.url)).complete("hi"))
    with FakeServer() as server:
        server.script(gemini_error(400, "Invalid JSON payload"))
        with pytest.raises(BadRequest):
            run(build_model(spec("gemini", server.url)).complete("hi"))
    with FakeServer() as server:
        server.script(Reply(body={"candidates": []}), Reply(body={"candidates": []}))
        with pytest.raises(MalformedResponse):
            run(build_model(spec("gemini", server.url, max_retries=1)).complete("hi"))


# -- Ollama --------------------------------------------------------------------------------------
def test_ollama_structured_via_format_and_availability() -> None:
    log = MemoryCallLog()
    with OllamaServer(models=["llama3.2:3b"]) as server:
        s = spec("ollama", server.url)
        assert run(check_availability(s)).available
        server.script(ollama_ok(json.dumps(VERDICT), 21, 10))
        completion = run(build_model(s, call_log=log).complete("hi", schema=Verdict, temperature=0.2))
        seen = server.seen[-1]
    assert seen.path == "/api/chat"
    assert seen.body["format"]["properties"]["confidence"]["maximum"] == 1
    assert seen.body["options"]["temperature"] == 0.2 and seen.body["stream"] is False
    assert completion.parsed == VERDICT
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 10)


def test_ollama_model_not_pulled() -> None:
    with OllamaServer(models=[]) as server:
        s = spec("ollama", server.url)
        availability = run(check_availability(s))
        assert not availability.available and "ollama pull llama3.2:3b" in availability.reason
        with pytest.raises(ModelUnavailable, match="ollama pull"):
            run(build_model(s).complete("hi"))


def test_ollama_unreachable_says_what_to_do() -> None:
    s = spec("ollama", f"http://127.0.0.1:{free_port()}", max_retries=0)
    availability = run(check_availability(s))
    assert availability.reason.startswith("Ollama not reachable at http://127.0.0.1:")
    assert "is `ollama serve` running?" in availability.reason
    with pytest.raises(ModelUnavailable, match="is `ollama serve` running"):
        run(build_model(s).complete("hi"))


def test_ollama_errors_retry_and_stream() -> None:
    with OllamaServer() as server:
        server.script(ollama_error(500, "llama runner process has terminated"), ollama_ok("ok"))
        assert run(build_model(spec("ollama", server.url)).complete("hi")).text == "ok"
    with OllamaServer() as server:
        server.script(Reply(body="{not json"), Reply(body="{not json"))
        with pytest.raises(MalformedResponse):
            run(build_model(spec("ollama", server.url, max_retries=1)).complete("hi"))
    with OllamaServer() as server:
        server.script(Reply(delay_s=1.2, body={}))
        with pytest.raises(ModelTimeout):
            run(build_model(spec("ollama", server.url, timeout_s=0.4, max_retries=0)).complete("hi"))
    with OllamaServer() as server:
        server.script(ollama_stream(["a", "b", "c"], 5, 3))

        async def consume() -> Any:
            final = None
            async for chunk in build_model(spec("ollama", server.url)).stream("hi"):
                final = chunk.completion or final
            return final

        final = run(consume())
        assert final.text == "abc" and final.usage.completion_tokens == 3


def test_concurrency_limit_per_backend(keys: None) -> None:
    """With concurrency 2, at most two requests are in flight at the server at once."""
    with FakeServer() as server:
        server.script(*[Reply(delay_s=0.3, body=openai_ok("x").body) for _ in range(6)])
        model = build_model(spec("openai", server.url, concurrency=2))

        async def burst() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(model.complete(f"q{i}") for i in range(6)))
            return time.perf_counter() - started

        elapsed = run(burst())
    assert elapsed >= 0.85  # 6 requests, 2 at a time, 0.3 s each → three waves


def test_keys_never_reach_the_store_or_error_messages(keys: None, store) -> None:
    with FakeServer() as server:
        server.script(openai_error(401, "Incorrect API key provided: sk-test-openai-0123456789"))
        with pytest.raises(ModelUnavailable) as info:
            run(build_model(spec("openai", server.url), call_log=store).complete("hi"))
        server.script(openai_ok("fine"))
        run(build_model(spec("openai", server.url), call_log=store).complete("hi"))
    assert "sk-test-openai-0123456789" not in str(info.value)
    assert "<OPENAI_API_KEY>" in str(info.value)
    store.dispose()
    path = store.url.split("sqlite:///", 1)[1]
    for suffix in ("", "-wal"):
        try:
            data = open(path + suffix, "rb").read()
        except FileNotFoundError:
            continue
        assert b"sk-test-openai" not in data
