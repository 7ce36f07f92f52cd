"""Ollama through its official client; structured output via `format=` with the JSON schema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import BaseModel

from models.backends._http import error_for_status, short
from models.base import ChatModel, Requires
from models.catalog import ModelSpec
from models.errors import BadRequest, CannotScore, MalformedResponse, ModelError, ModelTimeout, ModelUnavailable
from models.scoring import ScoringUnsupported, TopLogprobs, first_token_scores, walk_scores
from models.secrets import plain_url
from models.types import RawResult, Request, ScoreResult

DEFAULT_HOST = "http://127.0.0.1:11434"


class OllamaModel(ChatModel):
    """Scoring (`score_options`, Ollama ≥ 0.12.11 gives `logprobs` / `top_logprobs`): a raw prompt is
    continued in raw mode (`/api/generate`, `raw: true`, no template) one token at a time, each option
    followed through the top-k next tokens (exact while its tokens stay in the top k; flagged where one
    falls out); chat messages are scored by the answer's first token (flagged `first_token`)."""

    backend = "ollama"
    requires = Requires(package="ollama")
    supports_streaming = True
    can_score = True

    @classmethod
    async def unavailable_reason(cls, spec: ModelSpec) -> str | None:
        """The Ollama server must answer, and have the model pulled."""
        reason = await super().unavailable_reason(spec)
        if reason is not None:
            return reason
        host = plain_url(spec.base_url) or DEFAULT_HOST
        try:
            names = await list_local_models(host)
        except Exception:
            return f"Ollama not reachable at {host} — is `ollama serve` running?"
        wanted = spec.model if ":" in spec.model else f"{spec.model}:latest"
        if spec.model not in names and wanted not in names:
            return f"model '{spec.model}' not pulled on {host} — run `ollama pull {spec.model}`"
        return None

    @property
    def host(self) -> str:
        return self.endpoint or DEFAULT_HOST

    def client(self) -> Any:
        return self.sdk_client(self._new_client, key_required=False)

    def _new_client(self, key: str | None) -> Any:
        import ollama  # optional SDK: loaded with its first model

        return ollama.AsyncClient(host=self.host, timeout=self.spec.timeout_s)

    def _kwargs(self, request: Request) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": request.temperature, "num_predict": request.max_tokens}
        if request.seed is not None:
            options["seed"] = request.seed
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [m.model_dump() for m in request.messages],
            "options": options | dict(self.spec.options.get("ollama_options", {})),
        }
        if request.json_schema is not None:
            kwargs["format"] = request.json_schema
        return kwargs

    def _translate(self, exc: Exception) -> ModelError:
        import ollama  # optional SDK: loaded with its first model

        if isinstance(exc, ollama.ResponseError):
            status = exc.status_code if exc.status_code and exc.status_code > 0 else 500
            if status == 404:
                return self._error(
                    ModelUnavailable,
                    f"model '{self.spec.model}' not found on {self.host} — run `ollama pull {self.spec.model}`",
                    status=404,
                )
            return error_for_status(status, short(exc.error), None, model_id=self.model_id, backend=self.backend)
        if isinstance(exc, httpx.TimeoutException):
            return self._error(ModelTimeout, f"Ollama at {self.host} did not answer in {self.spec.timeout_s:g} s")
        if isinstance(exc, ConnectionError | httpx.ConnectError):
            return self._error(ModelUnavailable, f"Ollama not reachable at {self.host} — is `ollama serve` running?")
        if isinstance(exc, json.JSONDecodeError | ValueError | KeyError | TypeError):
            return self._error(MalformedResponse, f"Ollama's response is not the documented shape: {short(exc)}")
        if isinstance(exc, httpx.HTTPError):
            return self._error(ModelUnavailable, f"Ollama at {self.host}: {short(exc)}")
        return self._error(MalformedResponse, f"unexpected response: {type(exc).__name__}: {short(exc)}")

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        try:
            response = await self.client().chat(**self._kwargs(request), stream=False)
            return RawResult(
                text=response.message.content or "",
                prompt_tokens=response.prompt_eval_count or 0,
                completion_tokens=response.eval_count or 0,
                finish_reason=response.done_reason,
            )
        except ModelError:
            raise
        except Exception as exc:  # the client raises several families (httpx, ResponseError, pydantic)
            raise self._translate(exc) from None

    # -- option scoring ---------------------------------------------------------------------------
    @classmethod
    def scoring_support(cls, spec: ModelSpec) -> str:
        return "token walk (top-k)"

    async def _score(self, request: Request) -> ScoreResult:
        options = request.options or []
        top_k = int(self.spec.options.get("top_logprobs", 20))
        step_options = {"temperature": 0.0, "num_predict": 1} | dict(self.spec.options.get("ollama_options", {}))
        try:
            if request.prompt is not None:

                async def next_top(text: str) -> tuple[TopLogprobs, int]:
                    response = await self.client().generate(
                        model=self.spec.model,
                        prompt=text,
                        raw=True,
                        logprobs=True,
                        top_logprobs=top_k,
                        options=step_options,
                        stream=False,
                    )
                    return self._top(response), response.prompt_eval_count or 0

                logprobs, counts, prompt_tokens, flags = await walk_scores(request.prompt, options, next_top)
                return ScoreResult(logprobs=logprobs, token_counts=counts, prompt_tokens=prompt_tokens, flags=flags)
            response = await self.client().chat(
                model=self.spec.model,
                messages=[m.model_dump() for m in request.messages],
                logprobs=True,
                top_logprobs=top_k,
                options=step_options,
                stream=False,
            )
            scores, flags = first_token_scores(self._top(response), options)
            return ScoreResult(
                logprobs=scores,
                token_counts=[1] * len(options),
                prompt_tokens=response.prompt_eval_count or 0,
                flags=flags,
            )
        except ScoringUnsupported as exc:
            raise self._error(CannotScore, f"cannot score these options: {exc}") from None
        except ModelError:
            raise
        except Exception as exc:
            err = self._translate(exc)
            if isinstance(err, BadRequest):
                raise self._error(CannotScore, f"Ollama refused log-probabilities: {err.message}") from None
            raise err from None

    def _top(self, response: Any) -> TopLogprobs:
        entries = getattr(response, "logprobs", None) or []
        if not entries:
            raise self._error(
                CannotScore,
                f"Ollama at {self.host} returned no logprobs — it needs Ollama 0.12.11 or newer to score options",
            )
        first = entries[0]
        top = [(t.token, float(t.logprob)) for t in (first.top_logprobs or [])]
        return top or [(first.token, float(first.logprob))]

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        prompt_tokens = completion_tokens = 0
        finish = None
        try:
            stream = await self.client().chat(**self._kwargs(request), stream=True)
            async for part in stream:
                piece = part.message.content if part.message else ""
                if piece:
                    yield piece
                if part.done:
                    prompt_tokens = part.prompt_eval_count or 0
                    completion_tokens = part.eval_count or 0
                    finish = part.done_reason
        except ModelError:
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        yield RawResult(text="", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish)


async def list_local_models(host: str, timeout: float = 0.5) -> list[str]:
    """Names of the models an Ollama server has pulled (GET /api/tags)."""
    async with httpx.AsyncClient(timeout=timeout) as client:
        response = await client.get(f"{host.rstrip('/')}/api/tags")
        response.raise_for_status()
        return [m.get("name", "") for m in response.json().get("models", [])]
