"""OpenAI, and any OpenAI-compatible server (vLLM, LM Studio, llama.cpp's server) through `base_url`.

Structured output goes as `response_format` `json_schema`: strict for the OpenAI API itself, plain
for compatible servers (most accept the schema but not strict mode); `options.structured`
picks another form: `json_object` (plain JSON mode) or `json_object_schema` (JSON mode carrying the
schema, as llama-cpp-python's server takes it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from models.backends._http import error_for_status, short
from models.base import ChatModel
from models.catalog import api_key_for
from models.errors import MalformedResponse, ModelError, ModelTimeout, ModelUnavailable
from models.structured import strict_schema
from models.types import RawResult, Request


class OpenAIModel(ChatModel):
    backend = "openai"
    supports_streaming = True

    @property
    def is_official(self) -> bool:
        return not self.spec.base_url or "api.openai.com" in self.spec.base_url

    def _key_hint(self) -> str:
        return self.spec.api_key_env or "OPENAI_API_KEY"

    def client(self) -> Any:
        return self.loop_client(self._new_client)

    def _new_client(self) -> Any:
        try:
            import openai
        except ImportError:
            raise self._error(ModelUnavailable, "the openai package is not installed") from None
        key = api_key_for(self.spec)
        if key is None and self.spec.needs_key:
            raise self._error(
                ModelUnavailable,
                f"no API key — set {self._key_hint()} or add it to .streamlit/secrets.toml",
            )
        return openai.AsyncOpenAI(
            api_key=key or "not-needed",
            base_url=self.spec.base_url,
            max_retries=0,  # retries are ours, so Retry-After is honoured the same everywhere
            timeout=self.spec.timeout_s,
        )

    def _kwargs(self, request: Request) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            mode = self.spec.options.get("structured", "json_schema")
            if mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            elif mode == "json_object_schema":  # llama.cpp's server: JSON mode with a schema grammar
                kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
            else:
                strict = bool(self.spec.options.get("strict", self.is_official))
                schema = strict_schema(request.json_schema) if strict else request.json_schema
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": request.schema_name or "answer", "schema": schema, "strict": strict},
                }
        return kwargs

    def _translate(self, exc: Exception) -> ModelError:
        import openai

        where = self.spec.base_url or "https://api.openai.com/v1"
        if isinstance(exc, openai.APITimeoutError):
            return self._error(ModelTimeout, f"no answer from {where} within {self.spec.timeout_s:g} s")
        if isinstance(exc, openai.APIConnectionError):
            return self._error(
                ModelUnavailable, f"server not reachable at {where} — is it running? ({short(exc.__cause__ or exc)})"
            )
        if isinstance(exc, openai.APIStatusError):
            return error_for_status(
                exc.status_code,
                short(_error_message(exc)),
                exc.response.headers,
                model_id=self.model_id,
                backend=self.backend,
                key_hint=self._key_hint(),
            )
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return self._error(MalformedResponse, f"response body is not the documented shape: {short(exc)}")
        return self._error(MalformedResponse, f"unexpected response: {type(exc).__name__}: {short(exc)}")

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        import openai

        try:
            response = await self.client().chat.completions.create(**self._kwargs(request))
        except ModelError:
            raise
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            raise self._translate(exc) from None
        try:
            choice = response.choices[0]
            usage = response.usage
            return RawResult(
                text=choice.message.content or "",
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                finish_reason=choice.finish_reason,
            )
        except (AttributeError, IndexError, TypeError) as exc:
            raise self._error(
                MalformedResponse, f"response has no choices[0].message: {short(response)}"
            ) from exc

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        import openai

        kwargs = self._kwargs(request) | {"stream": True}
        if self.spec.options.get("stream_usage", self.is_official):
            kwargs["stream_options"] = {"include_usage": True}
        prompt_tokens = completion_tokens = 0
        finish = None
        try:
            stream = await self.client().chat.completions.create(**kwargs)
            async for event in stream:
                if getattr(event, "usage", None):
                    prompt_tokens = event.usage.prompt_tokens or 0
                    completion_tokens = event.usage.completion_tokens or 0
                if not event.choices:
                    continue
                choice = event.choices[0]
                finish = choice.finish_reason or finish
                piece = getattr(choice.delta, "content", None)
                if piece:
                    yield piece
        except ModelError:
            raise
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            raise self._translate(exc) from None
        yield RawResult(
            text="", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish
        )


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))
