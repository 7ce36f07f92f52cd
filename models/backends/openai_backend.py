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
from models.base import ChatModel, Requires
from models.catalog import ModelSpec
from models.errors import BadRequest, CannotScore, MalformedResponse, ModelError, ModelTimeout, ModelUnavailable
from models.scoring import ScoringUnsupported, echo_option_logprob, first_token_scores, split_trailing_space
from models.secrets import plain_url
from models.structured import strict_schema
from models.types import RawResult, Request, ScoreResult

# A chat API scores options by the first token of its answer: the text to continue goes in as the user's
# message under this instruction.
CONTINUE_INSTRUCTION = "Continue the text. Reply with the next words only."


class OpenAIModel(ChatModel):
    """Scoring (`score_options`): a raw prompt goes to the completions endpoint with `echo` and `logprobs`,
    which gives every prompt token's log-probability, so the option's score is exact (llama.cpp's server,
    vLLM; the default for a `base_url` that is not OpenAI's). Chat messages, OpenAI itself (whose
    completions no longer echo log-probabilities) or `options.scoring: first_token` use the chat endpoint's
    `top_logprobs` of the answer's first token instead, flagged `first_token`."""

    backend = "openai"
    requires = Requires(package="openai", key_env=("OPENAI_API_KEY",), url_env="OPENAI_BASE_URL")
    supports_streaming = True
    can_score = True

    @classmethod
    async def unavailable_reason(cls, spec: ModelSpec) -> str | None:
        """A keyless OpenAI-compatible server (`base_url`) must answer a short probe."""
        reason = await super().unavailable_reason(spec)
        if reason is None and spec.base_url and not spec.needs_key:
            reason = await server_reason(plain_url(spec.base_url) or spec.base_url)
        return reason

    @property
    def is_official(self) -> bool:
        return not self.spec.base_url or "api.openai.com" in self.spec.base_url

    def client(self) -> Any:
        return self.sdk_client(self._new_client, key_required=self.spec.needs_key)

    def _new_client(self, key: str | None) -> Any:
        import openai  # optional SDK: loaded with its first model

        return openai.AsyncOpenAI(
            api_key=key or "not-needed",
            base_url=self.endpoint,  # never with a user name or password in it
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
        import openai  # optional SDK: loaded with its first model

        where = self.endpoint or "https://api.openai.com/v1"
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
        import openai  # optional SDK: loaded with its first model

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
            raise self._error(MalformedResponse, f"response has no choices[0].message: {short(response)}") from exc

    # -- option scoring ---------------------------------------------------------------------------
    @classmethod
    def scoring_support(cls, spec: ModelSpec) -> str:
        official = not spec.base_url or "api.openai.com" in spec.base_url
        method = spec.options.get("scoring", "first_token" if official else "echo")
        return "exact (echo)" if method == "echo" else "first token"

    @property
    def scoring_method(self) -> str:
        method = str(self.spec.options.get("scoring", "first_token" if self.is_official else "echo"))
        if method not in ("echo", "first_token"):
            raise self._error(BadRequest, f"options.scoring must be echo or first_token, not {method!r}")
        return method

    async def _score(self, request: Request) -> ScoreResult:
        import openai  # optional SDK: loaded with its first model

        options = request.options or []
        try:
            if request.prompt is not None and self.scoring_method == "echo":
                return await self._score_echo(request.prompt, options)
            return await self._score_first_token(request, options)
        except ScoringUnsupported as exc:
            raise self._error(CannotScore, f"cannot score these options: {exc}") from None
        except ModelError:
            raise
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            err = self._translate(exc)
            if isinstance(err, BadRequest):  # e.g. "logprobs are not supported": no retry can help
                raise self._error(CannotScore, f"the server refused log-probabilities: {err.message}") from None
            raise err from None

    async def _score_echo(self, prompt: str, options: list[str]) -> ScoreResult:
        logprobs: list[float] = []
        counts: list[int] = []
        flags: list[str] = []
        prompt_tokens = 0
        for i, option in enumerate(options):
            context, continuation = split_trailing_space(prompt, option)
            text = context + continuation
            response = await self.client().completions.create(
                model=self.spec.model, prompt=text, max_tokens=1, temperature=0.0, echo=True, logprobs=1
            )
            try:
                lp = response.choices[0].logprobs
                total, count, straddles = echo_option_logprob(
                    lp.tokens, lp.token_logprobs, lp.text_offset, len(context), len(text)
                )
            except (AttributeError, IndexError, TypeError) as exc:
                raise self._error(
                    CannotScore, f"the completions endpoint echoed no prompt log-probabilities: {short(response)}"
                ) from exc
            if straddles:
                flags.append(f"merged_boundary:{i}")
            logprobs.append(total)
            counts.append(count)
            usage = getattr(response, "usage", None)
            prompt_tokens = max(prompt_tokens, (getattr(usage, "prompt_tokens", 0) or 0) - count)
        return ScoreResult(logprobs=logprobs, token_counts=counts, prompt_tokens=prompt_tokens, flags=flags)

    async def _score_first_token(self, request: Request, options: list[str]) -> ScoreResult:
        if request.prompt is not None:
            messages = [
                {"role": "system", "content": CONTINUE_INSTRUCTION},
                {"role": "user", "content": request.prompt},
            ]
        else:
            messages = [m.model_dump() for m in request.messages]
        top_k = int(self.spec.options.get("top_logprobs", 20))
        response = await self.client().chat.completions.create(
            model=self.spec.model, messages=messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=top_k
        )
        try:
            first = response.choices[0].logprobs.content[0]
            top = [(t.token, float(t.logprob)) for t in first.top_logprobs] or [(first.token, float(first.logprob))]
        except (AttributeError, IndexError, TypeError) as exc:
            raise self._error(
                CannotScore, f"the chat answer carried no top log-probabilities: {short(response)}"
            ) from exc
        scores, flags = first_token_scores(top, options)
        usage = getattr(response, "usage", None)
        return ScoreResult(
            logprobs=scores,
            token_counts=[1] * len(options),
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            flags=flags,
        )

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        import openai  # optional SDK: loaded with its first model

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
        yield RawResult(text="", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish)


def _error_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))


async def server_reason(base_url: str) -> str | None:
    """Why an OpenAI-compatible server does not answer `GET /models` within 0.75 s, or None."""
    import httpx  # optional: with the OpenAI SDK's client

    try:
        async with httpx.AsyncClient(timeout=0.75) as client:
            await client.get(f"{base_url.rstrip('/')}/models")
    except Exception:
        return f"server not reachable at {base_url} — is it running?"
    return None
