"""Option scoring through the API backends, against loopback servers that speak each API's documented
log-probability shapes: OpenAI chat `logprobs.content[].top_logprobs`, OpenAI-compatible completions
`echo` + `logprobs`, Ollama (≥ 0.12.11) `logprobs[].top_logprobs` in raw generate mode and chat, Gemini
`logprobsResult.topCandidates`. Exact where the API allows, flagged where it approximates, and a clear
CannotScore (never retried, never a silent guess) where it cannot score. (The echo path against a real
`llama_cpp.server` is in tests/models/test_local_models.py.)"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from models import MemoryCallLog
from models.catalog import ModelSpec, Profile
from models.errors import CannotScore, RateLimited
from models.registry import build_model
from models.scoring import ScoringUnsupported, first_token_scores, walk_scores
from tests.fakes.servers import FakeServer, OllamaServer, Reply, gemini_error, openai_error


def spec(backend: str, url: str, **kw: Any) -> ModelSpec:
    model = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "ollama": "llama3.2:3b"}[backend]
    fields: dict[str, Any] = {
        "id": f"score-{backend}",
        "backend": backend,
        "model": model,
        "base_url": url + "/v1" if backend == "openai" else url,
        "timeout_s": 2.0,
        "max_retries": 2,
        "profile": Profile(name=backend),
    }
    fields.update(kw)
    return ModelSpec(**fields)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-0123456789")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def chat_logprobs(top: list[tuple[str, float]]) -> Reply:
    entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
    return Reply(
        body={
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": top[0][0]},
                    "logprobs": {"content": [{**entries[0], "top_logprobs": entries}]},
                }
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41},
        }
    )


# -- pure helpers -------------------------------------------------------------------------------------
def test_openai_itself_scores_by_chat_and_compatible_servers_by_echo() -> None:
    from models.backends.openai_backend import OpenAIModel

    official = build_model(spec("openai", "http://x", base_url=None))
    compatible = build_model(spec("openai", "http://127.0.0.1:1"))
    assert isinstance(official, OpenAIModel) and isinstance(compatible, OpenAIModel)
    assert official.scoring_method == "first_token" and compatible.scoring_method == "echo"


def test_first_token_scores_match_by_prefix_flag_misses_and_refuse_ambiguity() -> None:
    top = [("Yes", -0.3), (" No", -1.9), ("Maybe", -3.0)]
    scores, flags = first_token_scores(top, [" Yes", " No", " Never"])
    assert scores == [-0.3, -1.9, -3.0]  # " Never" is not in the top k: at most the least likely one, flagged
    assert first_token_scores([("No", -0.01)], [" Yes", " No"])[0] == pytest.approx(
        [math.log(1 - math.exp(-0.01)), -0.01]
    )  # or at most what the top k leave over
    assert flags == ["first_token", "below_top_k:2"]
    with pytest.raises(ScoringUnsupported, match="both begin with the token 'safe'"):
        first_token_scores([("safe", -0.1), ("unsafe", -2.0)], ["safe_pass", "safe_fail", "unsafe_fail"])


def test_walk_follows_each_option_and_asks_shared_prefixes_once() -> None:
    table = {"Q:": [(" the", -0.5), (" a", -1.0)], "Q: the": [(" cat", -0.1), (" dog", -2.5)], "Q: a": [(" cat", -0.3)]}
    asked: list[str] = []

    async def next_top(text: str) -> tuple[list[tuple[str, float]], int]:
        asked.append(text)
        return table.get(text, [("?", -9.0)]), 7

    logprobs, counts, prompt_tokens, flags = run(
        walk_scores("Q: ", ["the cat", "the dog", "a cat", "a bird"], next_top)
    )
    # "a bird": " bird" is not in the top k after "Q: a": at most the mass " cat" leaves over, flagged
    assert logprobs == pytest.approx([-0.6, -3.0, -1.3, -1.0 + math.log(1 - math.exp(-0.3))])
    assert counts == [2, 2, 2, 2] and prompt_tokens == 7 and flags == ["below_top_k:3"]
    assert sorted(asked) == ["Q:", "Q: a", "Q: the"]  # each context once


# -- OpenAI chat (first token) --------------------------------------------------------------------------
def test_openai_chat_scores_first_token_top_logprobs_and_records() -> None:
    log = MemoryCallLog()
    with FakeServer() as server:
        server.script(chat_logprobs([("Yes", -0.105), ("No", -2.3), ("Maybe", -4.1)]))
        # OpenAI's own API (no base_url) scores with the chat method; a compatible server when asked to
        model = build_model(spec("openai", server.url, options={"scoring": "first_token"}), call_log=log)
        scores = run(model.score_options("Is the sky blue?\nAnswer:", [" Yes", " No"]))
        body = server.seen[0].body
    assert server.seen[0].path == "/v1/chat/completions"
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1
    assert body["messages"][-1] == {"role": "user", "content": "Is the sky blue?\nAnswer:"}
    assert scores.logprobs == [-0.105, -2.3] and "first_token" in scores.flags
    assert scores.probabilities[0] == pytest.approx(math.exp(-0.105) / (math.exp(-0.105) + math.exp(-2.3)))
    assert log.records[-1].error is None and (log.records[-1].parsed or {})["logprobs"] == [-0.105, -2.3]


def test_openai_refusals_are_cannot_score_and_not_retried() -> None:
    with FakeServer() as server:
        server.script(openai_error(400, "logprobs is not supported for this model", "invalid_request_error"))
        model = build_model(spec("openai", server.url, options={"scoring": "first_token"}))
        with pytest.raises(CannotScore, match="logprobs is not supported"):
            run(model.score_options("Is it?", [" Yes", " No"]))
        assert len(server.seen) == 1
    with FakeServer() as server:  # an answer without logprobs (a server that ignores the parameter)
        server.script(
            Reply(
                body={
                    "id": "x",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Yes"}}
                    ],
                }
            )
        )
        model = build_model(spec("openai", server.url, options={"scoring": "first_token"}))
        with pytest.raises(CannotScore, match="no top log-probabilities"):
            run(model.score_options("Is it?", [" Yes", " No"]))
    with FakeServer() as server:  # rate limits stay retryable like any call
        server.script(
            openai_error(429, "slow down", "rate_limit", {"retry-after": "0.05"}), chat_logprobs([("No", -0.01)])
        )  # " Yes" outside the top k: below the 1 % left over
        model = build_model(spec("openai", server.url, options={"scoring": "first_token"}))
        assert run(model.score_options("Is it?", [" Yes", " No"])).best(calibrated=False) == " No"
    with FakeServer() as server:
        server.script(
            openai_error(429, "slow down", "rate_limit"),
            openai_error(429, "slow down", "rate_limit"),
            openai_error(429, "slow down", "rate_limit"),
        )
        model = build_model(spec("openai", server.url, options={"scoring": "first_token"}))
        with pytest.raises(RateLimited):
            run(model.score_options("Is it?", [" Yes", " No"]))


def test_openai_compatible_echo_sums_the_option_tokens() -> None:
    def echo(prompt: str, pieces: list[tuple[str, float | None]]) -> Reply:
        offsets, at = [], 0
        for token, _ in pieces:
            offsets.append(at)
            at += len(token)
        assert "".join(t for t, _ in pieces) == prompt
        return Reply(
            body={
                "id": "cmpl",
                "object": "text_completion",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "text": prompt + ".",
                        "finish_reason": "length",
                        "logprobs": {
                            "tokens": [t for t, _ in pieces] + ["."],
                            "token_logprobs": [lp for _, lp in pieces] + [-0.5],
                            "text_offset": offsets + [at],
                            "top_logprobs": None,
                        },
                    }
                ],
                "usage": {"prompt_tokens": len(pieces), "completion_tokens": 1, "total_tokens": len(pieces) + 1},
            }
        )

    with FakeServer() as server:
        server.script(
            echo("Capital: Paris", [("Capital", None), (":", -1.0), (" Par", -0.5), ("is", -0.25)]),
            echo("Capital: Rome", [("Capital", None), (":", -1.0), (" Rome", -3.0)]),
        )
        model = build_model(spec("openai", server.url, needs_key=False))
        scores = run(model.score_options("Capital: ", ["Paris", "Rome"]))
        bodies = [s.body for s in server.seen]
    assert [s.path for s in server.seen] == ["/v1/completions"] * 2
    assert bodies[0]["prompt"] == "Capital: Paris" and bodies[0]["echo"] is True and bodies[0]["logprobs"] == 1
    assert scores.logprobs == [-0.75, -3.0] and scores.token_counts == [2, 1] and scores.flags == []


# -- Ollama -----------------------------------------------------------------------------------------
class ScoringOllama(OllamaServer):
    """An Ollama that continues raw text from a small next-token table, in the ≥ 0.12.11 logprobs shape."""

    TABLE = {"Mood:": [(" happy", -0.4), (" sad", -1.3), (" un", -2.0)], "Mood: un": [("happy", -0.05)]}

    def default(self, method: str, path: str, body: Any) -> Reply:
        if path == "/api/generate":
            top = self.TABLE.get(body["prompt"], [("!", -0.1)])
            entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
            return Reply(
                body={
                    "model": body["model"],
                    "created_at": "2025-11-20T00:00:00Z",
                    "response": top[0][0],
                    "done": True,
                    "done_reason": "length",
                    "prompt_eval_count": 5,
                    "eval_count": 1,
                    "logprobs": [{**entries[0], "top_logprobs": entries}],
                }
            )
        return super().default(method, path, body)


def test_ollama_scores_raw_prompts_token_by_token() -> None:
    log = MemoryCallLog()
    with ScoringOllama(models=["llama3.2:3b"]) as server:
        model = build_model(spec("ollama", server.url), call_log=log)
        scores = run(model.score_options("Mood: ", ["happy", "unhappy", "sad"]))
        generate = [s.body for s in server.seen if s.path == "/api/generate"]
    assert all(b["raw"] is True and b["logprobs"] is True and b["top_logprobs"] == 20 for b in generate)
    assert all(b["options"]["num_predict"] == 1 for b in generate)
    assert scores.logprobs == pytest.approx([-0.4, -2.05, -1.3]) and scores.token_counts == [1, 2, 1]
    assert scores.best(calibrated=False) == "happy" and scores.flags == []
    assert len(generate) == 2  # "Mood:" once for all three options, then "Mood: un"


def test_ollama_without_logprobs_or_with_chat_messages() -> None:
    with OllamaServer(models=["llama3.2:3b"]) as server:  # an Ollama older than 0.12.11: no logprobs field
        server.script(
            Reply(
                body={
                    "model": "llama3.2:3b",
                    "created_at": "2025-01-01T00:00:00Z",
                    "response": "x",
                    "done": True,
                    "done_reason": "length",
                }
            )
        )
        with pytest.raises(CannotScore, match="0.12.11"):
            run(build_model(spec("ollama", server.url)).score_options("Mood: ", ["happy", "sad"]))
    with OllamaServer(models=["llama3.2:3b"]) as server:
        entries = [{"token": "sad", "logprob": -0.2}, {"token": "happy", "logprob": -1.7}]
        server.script(
            Reply(
                body={
                    "model": "llama3.2:3b",
                    "created_at": "2025-11-20T00:00:00Z",
                    "done": True,
                    "message": {"role": "assistant", "content": "sad"},
                    "done_reason": "length",
                    "logprobs": [{**entries[0], "top_logprobs": entries}],
                }
            )
        )
        scores = run(
            build_model(spec("ollama", server.url)).score_options(
                [{"role": "user", "content": "How do you feel?"}], ["happy", "sad"]
            )
        )
        assert server.seen[-1].path == "/api/chat" and server.seen[-1].body["logprobs"] is True
    assert scores.logprobs == [-1.7, -0.2] and "first_token" in scores.flags


# -- Gemini -----------------------------------------------------------------------------------------
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_gemini_scores_from_logprobs_result() -> None:
    cands = [
        {"token": "Yes", "tokenId": 1, "logProbability": -0.3},
        {"token": "No", "tokenId": 2, "logProbability": -1.4},
    ]
    with FakeServer() as server:
        server.script(
            Reply(
                body={
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": "Yes"}]},
                            "finishReason": "MAX_TOKENS",
                            "logprobsResult": {
                                "topCandidates": [{"candidates": cands}],
                                "chosenCandidates": [cands[0]],
                            },
                        }
                    ],
                    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 1, "totalTokenCount": 13},
                }
            )
        )
        scores = run(build_model(spec("gemini", server.url)).score_options("Is it true?\nAnswer:", [" Yes", " No"]))
        config = server.seen[0].body["generationConfig"]
    assert config["responseLogprobs"] is True and config["logprobs"] == 20 and config["maxOutputTokens"] == 1
    assert scores.logprobs == [-0.3, -1.4] and scores.prompt_tokens == 12 and "first_token" in scores.flags
    with FakeServer() as server:
        server.script(gemini_error(400, "Logprobs is not supported for the current model."))
        with pytest.raises(CannotScore, match="not supported"):
            run(build_model(spec("gemini", server.url)).score_options("Is it?", [" Yes", " No"]))
        assert len(server.seen) == 1
