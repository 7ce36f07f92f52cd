"""Ollama through its official client; structured output via `format=` with the JSON schema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import BaseModel

from models.backends._http import error_for_status, short
from models.base import ChatModel
from models.errors import MalformedResponse, ModelError, ModelTimeout, ModelUnavailable
from models.types import RawResult, Request

DEFAULT_HOST = "http://127.0.0.1:11434"


class OllamaModel(ChatModel):
    backend = "ollama"
    supports_streaming = True

    @property
    def host(self) -> str:
        return self.spec.base_url or DEFAULT_HOST

    def client(self) -> Any:
        return self.loop_client(self._new_client)

    def _new_client(self) -> Any:
        try:
            import ollama
        except ImportError:
            raise self._error(ModelUnavailable, "the ollama package is not installed") from None
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
        import ollama

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
