"""Google Gemini through google-genai. Structured output via `response_json_schema`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from models.backends._http import error_for_status, short
from models.backends.openai_backend import CONTINUE_INSTRUCTION
from models.base import ChatModel, Requires
from models.catalog import ModelSpec
from models.errors import (
    BadRequest,
    CannotScore,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    SafetyBlocked,
)
from models.scoring import ScoringUnsupported, first_token_scores
from models.types import Message, RawResult, Request, ScoreResult

_BLOCKED = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}


class GeminiModel(ChatModel):
    """Scoring (`score_options`): `response_logprobs` with the top-k candidates of the answer's first
    token (flagged `first_token`); a raw prompt goes in as the text to continue."""

    backend = "gemini"
    requires = Requires(
        package="google.genai",
        pip_name="google-genai",
        key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        url_env="GOOGLE_GEMINI_BASE_URL",
    )
    can_score = True

    @classmethod
    def scoring_support(cls, spec: ModelSpec) -> str:
        return "first token"

    def client(self) -> Any:
        return self.sdk_client(self._new_client)

    def _new_client(self, key: str | None) -> Any:
        from google import genai  # optional SDK: loaded with its first model
        from google.genai import types  # optional SDK: loaded with its first model

        options = types.HttpOptions(
            base_url=self.endpoint,  # never with a user name or password in it
            timeout=int(self.spec.timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),  # retries are ours
            # httpx takes only Authorization off a redirect to another server: x-goog-api-key would follow it
            client_args={"follow_redirects": False},
            async_client_args={"follow_redirects": False},
        )
        return genai.Client(api_key=key, http_options=options)

    def _config(self, request: Request) -> Any:
        from google.genai import types  # optional SDK: loaded with its first model

        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        config: dict[str, Any] = {
            "temperature": request.temperature,
            "max_output_tokens": request.max_tokens,
        }
        if system:
            config["system_instruction"] = system
        if request.seed is not None:
            config["seed"] = request.seed
        if request.json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.json_schema
        return types.GenerateContentConfig(**config)

    def _contents(self, request: Request) -> list[Any]:
        from google.genai import types  # optional SDK: loaded with its first model

        return [
            types.Content(role="model" if m.role == "assistant" else "user", parts=[types.Part(text=m.content)])
            for m in request.messages
            if m.role != "system"
        ]

    def _translate(self, exc: Exception) -> ModelError:
        from google.genai import errors  # optional SDK: loaded with its first model

        where = self.endpoint or "https://generativelanguage.googleapis.com"
        if isinstance(exc, errors.APIError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return error_for_status(
                int(exc.code or 500),
                short(exc.message or exc),
                headers,
                model_id=self.model_id,
                backend=self.backend,
                key_hint=self._key_hint(),
            )
        name = type(exc).__name__
        if "Timeout" in name:
            return self._error(ModelTimeout, f"no answer from {where} within {self.spec.timeout_s:g} s")
        if "Connect" in name or isinstance(exc, ConnectionError | OSError):
            return self._error(ModelUnavailable, f"Gemini API not reachable at {where} ({short(exc)})")
        return self._error(MalformedResponse, f"unexpected response: {name}: {short(exc)}")

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        try:
            response = await self.client().aio.models.generate_content(
                model=self.spec.model, contents=self._contents(request), config=self._config(request)
            )
        except ModelError:
            raise
        except Exception as exc:  # the SDK raises transport errors of several libraries; typed below
            raise self._translate(exc) from None
        feedback = getattr(response, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            raise self._error(SafetyBlocked, f"prompt blocked: {feedback.block_reason}")
        candidates = getattr(response, "candidates", None) or []
        if not candidates:
            raise self._error(MalformedResponse, f"response has no candidates: {short(response)}")
        finish = str(getattr(candidates[0], "finish_reason", "") or "").split(".")[-1] or None
        if finish in _BLOCKED:
            raise self._error(SafetyBlocked, f"answer blocked by the safety filter (finish_reason={finish})")
        content = getattr(candidates[0], "content", None)
        parts = getattr(content, "parts", None) or []
        text = "".join(getattr(p, "text", None) or "" for p in parts)
        usage = getattr(response, "usage_metadata", None)
        return RawResult(
            text=text,
            prompt_tokens=getattr(usage, "prompt_token_count", 0) or 0,
            completion_tokens=getattr(usage, "candidates_token_count", 0) or 0,
            finish_reason=finish,
        )

    async def _score(self, request: Request) -> ScoreResult:

        options = request.options or []
        if request.prompt is not None:
            request = request.model_copy(
                update={
                    "messages": [
                        Message(role="system", content=CONTINUE_INSTRUCTION),
                        Message(role="user", content=request.prompt),
                    ]
                }
            )
        config = self._config(request.model_copy(update={"max_tokens": 1, "temperature": 0.0}))
        config = config.model_copy(
            update={"response_logprobs": True, "logprobs": int(self.spec.options.get("top_logprobs", 20))}
        )
        try:
            response = await self.client().aio.models.generate_content(
                model=self.spec.model, contents=self._contents(request), config=config
            )
        except ModelError:
            raise
        except Exception as exc:
            err = self._translate(exc)
            if isinstance(err, BadRequest):  # "logprobs is not supported for this model"
                raise self._error(CannotScore, f"Gemini refused log-probabilities: {err.message}") from None
            raise err from None
        candidates = getattr(response, "candidates", None) or []
        result = getattr(candidates[0], "logprobs_result", None) if candidates else None
        steps = getattr(result, "top_candidates", None) or []
        if not steps:
            raise self._error(CannotScore, f"the answer carried no log-probabilities: {short(response)}")
        top = [
            (c.token or "", float(c.log_probability))
            for c in (steps[0].candidates or [])
            if c.log_probability is not None
        ]
        try:
            scores, flags = first_token_scores(top, options)
        except ScoringUnsupported as exc:
            raise self._error(CannotScore, f"cannot score these options: {exc}") from None
        usage = getattr(response, "usage_metadata", None)
        return ScoreResult(
            logprobs=scores,
            token_counts=[1] * len(options),
            prompt_tokens=getattr(usage, "prompt_token_count", 0) or 0,
            flags=flags,
        )
