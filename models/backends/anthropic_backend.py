"""Anthropic Messages API. Structured output is a forced tool call whose `input_schema` is the schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from models.backends._http import error_for_status, short
from models.base import ChatModel, Requires
from models.errors import MalformedResponse, ModelError, ModelTimeout, ModelUnavailable, SafetyBlocked
from models.types import RawResult, Request

TOOL_NAME = "submit_answer"


class AnthropicModel(ChatModel):
    backend = "anthropic"
    requires = Requires(package="anthropic", key_env=("ANTHROPIC_API_KEY",), url_env="ANTHROPIC_BASE_URL")

    def client(self) -> Any:
        return self.sdk_client(self._new_client)

    def _new_client(self, key: str | None) -> Any:
        import anthropic  # optional SDK: loaded with its first model

        return anthropic.AsyncAnthropic(api_key=key, base_url=self.endpoint, max_retries=0, timeout=self.spec.timeout_s)

    def _kwargs(self, request: Request) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns = [m.model_dump() for m in request.messages if m.role != "system"]
        if not turns or turns[0]["role"] != "user":
            turns.insert(0, {"role": "user", "content": "(start)"})
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "messages": turns,
            "max_tokens": request.max_tokens,
        }
        # The Messages API of anthropic>=2 takes no sampling temperature; the request keeps it in
        # its hash all the same, so records and replay stay keyed by what the caller asked for.
        if system:
            kwargs["system"] = system
        if request.json_schema is not None:
            kwargs["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": f"Submit the answer as a {request.schema_name or 'JSON object'}.",
                    "input_schema": request.json_schema,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        return kwargs

    def _translate(self, exc: Exception) -> ModelError:
        import anthropic  # optional SDK: loaded with its first model

        where = self.endpoint or "https://api.anthropic.com"
        if isinstance(exc, anthropic.APITimeoutError):
            return self._error(ModelTimeout, f"no answer from {where} within {self.spec.timeout_s:g} s")
        if isinstance(exc, anthropic.APIConnectionError):
            return self._error(ModelUnavailable, f"Anthropic API not reachable at {where} ({short(exc)})")
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            inner = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
            message = inner.get("message") or str(exc)
            status = exc.status_code
            if status == 529:  # Anthropic's "overloaded": a server-side condition worth retrying
                status = 503
            return error_for_status(
                status,
                short(message),
                exc.response.headers,
                model_id=self.model_id,
                backend=self.backend,
                key_hint=self._key_hint(),
            )
        return self._error(MalformedResponse, f"unexpected response: {type(exc).__name__}: {short(exc)}")

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        import anthropic  # optional SDK: loaded with its first model

        try:
            response = await self.client().messages.create(**self._kwargs(request))
        except ModelError:
            raise
        except (anthropic.AnthropicError, json.JSONDecodeError) as exc:
            raise self._translate(exc) from None
        try:
            blocks = list(response.content)
            usage = response.usage
            stop = response.stop_reason
        except (AttributeError, TypeError) as exc:
            raise self._error(MalformedResponse, f"response has no content: {short(response)}") from exc
        if stop == "refusal":
            raise self._error(SafetyBlocked, "the model refused to answer (stop_reason=refusal)")
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
        native = None
        for block in blocks:
            if getattr(block, "type", "") == "tool_use":
                native = block.input if isinstance(block.input, dict) else None
                text = json.dumps(block.input, ensure_ascii=False)
        if request.json_schema is not None and native is None and not text:
            raise self._error(MalformedResponse, "structured call returned no tool_use block")
        return RawResult(
            text=text,
            prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
            completion_tokens=getattr(usage, "output_tokens", 0) or 0,
            finish_reason=stop,
            native_object=native,
        )
