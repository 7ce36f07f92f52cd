"""`ChatModel`: the one interface every backend implements.

A backend is one module in models/backends with one ChatModel subclass that names its `backend` and
declares what it `requires` (its SDK, the pip name, its key variables): declaring it registers the class
(models.registry), and `unavailable_reason` is its availability check. A backend implements `_generate`
(and optionally `_generate_stream`); this class adds what every call needs: the request hash, timeouts,
retries with backoff honouring Retry-After, a concurrency limit per backend endpoint, structured-output
validation (a number out of its range is a failed field, never clamped), cost, and recording of every call."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json as _json
import logging
import os
import random
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from models.catalog import ModelSpec, api_key_for
from models.discovery import REGISTERED
from models.errors import CannotScore, ModelError, ModelTimeout, ModelUnavailable, ReplayMiss, StructuredOutputError
from models.recording import CallLog, CallRecord, checkpoint, current_context
from models.scoring import calibrate, normalise
from models.secrets import StreamRedactor, plain_url, redact, redact_obj, register_key_names
from models.structured import InvalidOutputError, parse_structured, schema_for, validate_object
from models.types import (
    ChoiceProbabilities,
    Chunk,
    Completion,
    Message,
    OptionScores,
    RawResult,
    Request,
    ScoreResult,
    Usage,
)

log = logging.getLogger(__name__)
_T = TypeVar("_T")

BACKOFF_BASE_S = 0.5  # the first retry's wait when the server names none; doubled at each further attempt
MAX_BACKOFF_S = 20.0
MAX_RETRY_AFTER_S = 60.0


def backoff_delay(attempt: int) -> float:
    """The wait after failed attempt `attempt` (1, 2, …) when the server named none: BACKOFF_BASE_S doubled at each
    attempt, at most MAX_BACKOFF_S, ±25 % jitter (clients that failed together do not retry together)."""
    return min(MAX_BACKOFF_S, BACKOFF_BASE_S * 2.0 ** (attempt - 1)) * (0.75 + 0.5 * random.random())


# One semaphore per (event loop, backend endpoint): asyncio primitives belong to one loop.
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _semaphore(key: str, size: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    per_loop = _SEMAPHORES.setdefault(loop, {})
    if key not in per_loop:
        per_loop[key] = asyncio.Semaphore(size)
    return per_loop[key]


TRUNCATED_REASONS = frozenset({"length", "max_tokens"})  # OpenAI/llama.cpp/Ollama, Anthropic, Gemini (upper case)


def is_truncated(finish_reason: str | None) -> bool:
    """Whether a provider's finish reason says the answer was cut off at the token limit."""
    return finish_reason is not None and finish_reason.lower() in TRUNCATED_REASONS


@dataclass(frozen=True)
class Requires:
    """What a backend needs before a model of it can run, declared on its ChatModel class."""

    package: str | None = None  # the SDK's import name ("google.genai"); None: nothing beyond judgelab's own
    pip_name: str | None = None  # what installs it ("google-genai"); by default the package name
    key_env: tuple[str, ...] = ()  # the variables its API key may be in, in order (a spec's api_key_env first)
    url_env: str | None = None  # the variable its SDK reads the server's URL from when no base_url is given

    @property
    def pip(self) -> str:
        return self.pip_name or self.package or ""


def not_installed(pip_name: str, what: str | None = None) -> str:
    """The model layer's one message for a missing package."""
    return f"{what or f'the {pip_name} package'} is not installed — run `make install` (pip install {pip_name})"


def package_missing(package: str) -> bool:
    """Whether an import name cannot be found (without importing it, beyond its parent packages)."""
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # a parent package is missing too
        return True


def as_messages(messages: Sequence[Message | dict[str, str]] | str) -> list[Message]:
    if isinstance(messages, str):
        return [Message(role="user", content=messages)]
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]


class ChatModel(ABC):
    """A configured model. `complete` for one answer, `stream` for an answer shown as it is written."""

    backend: ClassVar[str] = "abstract"
    supports_streaming: ClassVar[bool] = False
    # Declaring `requires` on a subclass makes it a backend: it registers itself under `backend`. (Test
    # doubles and wrappers that do not declare it stay out of the registry.)
    requires: ClassVar[Requires] = Requires()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "requires" not in cls.__dict__:
            return
        known = REGISTERED.get(cls.backend)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"backend '{cls.backend}' is already {known.__module__}.{known.__qualname__}")
        REGISTERED[cls.backend] = cls
        register_key_names(cls.requires.key_env)  # their values are redacted everywhere

    # -- availability and keys: what `requires` declares, checked ------------------------------------
    @classmethod
    async def unavailable_reason(cls, spec: ModelSpec) -> str | None:
        """Why a model of `spec` cannot run right now, or None. Cheap checks only: the package and the key
        here; a backend adds its own (a file, a short probe of its server) after calling this."""
        if cls.requires.package and package_missing(cls.requires.package):
            return not_installed(cls.requires.pip)
        if spec.needs_key and cls.requires.key_env and api_key_for(spec) is None:
            return cls.missing_key(spec)
        return None

    @classmethod
    def missing_key(cls, spec: ModelSpec) -> str:
        return f"no API key — set {cls.key_name(spec)} or add it to .streamlit/secrets.toml"

    @classmethod
    def key_name(cls, spec: ModelSpec) -> str:
        """The variable to name when the key is missing: the spec's own, else the backend's first."""
        return spec.api_key_env or next(iter(cls.requires.key_env), "")

    def _key_hint(self) -> str:
        return self.key_name(self.spec)

    def _not_installed(self) -> ModelError:
        return self._error(ModelUnavailable, not_installed(self.requires.pip))

    def __init__(self, spec: ModelSpec, *, call_log: CallLog | None = None) -> None:
        self.spec = spec
        self.call_log = call_log
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def loop_client(self, factory: Callable[[], Any]) -> Any:
        """The SDK client for the running event loop: async clients hold connections that belong to
        one loop, and the CLI and tests run several loops one after another."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = factory()
            self._clients[loop] = client
        return client

    def sdk_client(self, build: Callable[[str | None], Any], *, key_required: bool = True) -> Any:
        """Every SDK backend's client, set up one way: the SDK's package first (not installed: said so), then
        this model's API key (missing where one is needed: said so), then `build(key)` once per event loop.
        `build` imports its SDK and leaves retries to `complete` (so Retry-After is honoured the same
        everywhere) and the timeout to the spec."""

        def factory() -> Any:
            if self.requires.package and package_missing(self.requires.package):
                raise self._not_installed()
            key = api_key_for(self.spec)
            if key is None and key_required:
                raise self._error(ModelUnavailable, self.missing_key(self.spec))
            try:
                return build(key)
            except ImportError:  # found but broken (a missing dependency of the SDK)
                raise self._not_installed() from None

        return self.loop_client(factory)

    @property
    def model_id(self) -> str:
        return self.spec.id

    @property
    def endpoint(self) -> str | None:
        """Where requests go: the spec's base_url, else the variable the SDK would read it from
        (`Requires.url_env`), always without a user name or password — httpx would send those preemptively as
        `Authorization: Basic` to whatever answers there. None: the SDK's own default."""
        env = self.requires.url_env
        return plain_url(self.spec.base_url or (os.environ.get(env) if env else None) or None)

    @property
    def concurrency_key(self) -> str:
        return f"{self.backend}|{self.spec.base_url or ''}"

    # -- what a backend implements -------------------------------------------------------------
    @abstractmethod
    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        """One attempt at the provider; raise a ModelError subclass on failure."""

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        """Yield text pieces, then optionally one RawResult with usage. Default: not streamed."""
        raise NotImplementedError
        yield  # pragma: no cover

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; most backends hold none."""

    async def prepare(self) -> None:  # noqa: B027 - optional hook
        """Load what the first call needs (a local model file), so latency measures the call alone."""

    # -- the public interface ------------------------------------------------------------------
    def build_request(
        self,
        messages: Sequence[Message | dict[str, str]] | str,
        *,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> Request:
        return Request(
            model_id=self.model_id,
            messages=as_messages(messages),
            schema_name=schema.__name__ if schema else None,
            json_schema=schema_for(schema) if schema else None,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
        )

    async def complete(
        self,
        messages: Sequence[Message | dict[str, str]] | str,
        *,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> Completion:
        """One answer. Raises a ModelError subclass; the call is recorded either way."""
        request = self.build_request(messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed)
        attempts = 0
        started = time.perf_counter()
        try:
            await self.prepare()
            started = time.perf_counter()
            async with _semaphore(self.concurrency_key, self.spec.concurrency):
                raw, attempts = await self._with_retries(request, schema)
        except ModelError as exc:
            self._record_failure(request, exc, time.perf_counter() - started, max(attempts, exc.attempts))
            raise
        return self._finish(request, schema, raw, time.perf_counter() - started, attempts)

    async def stream(
        self,
        messages: Sequence[Message | dict[str, str]] | str,
        *,
        schema: type[BaseModel] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> AsyncIterator[Chunk]:
        """Text pieces as they are generated; the last Chunk carries the finished Completion."""
        if not self.supports_streaming:
            completion = await self.complete(
                messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed
            )
            yield Chunk(text=completion.text)
            yield Chunk(completion=completion)
            return
        request = self.build_request(messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed)
        pieces: list[str] = []
        final: RawResult | None = None
        shown = StreamRedactor()  # a reply can echo a key, even split across pieces
        started = time.perf_counter()
        try:
            await self.prepare()
            started = time.perf_counter()
            async with _semaphore(self.concurrency_key, self.spec.concurrency):
                async for item in self._stream_with_timeout(request, schema):
                    if isinstance(item, RawResult):
                        final = item
                    elif item:
                        pieces.append(item)
                        piece = shown.feed(item)
                        if piece:
                            yield Chunk(text=piece)
            tail = shown.flush()
            if tail:
                yield Chunk(text=tail)
        except ModelError as exc:
            exc.raw_text = exc.raw_text or "".join(pieces) or None
            self._record_failure(request, exc, time.perf_counter() - started, 1)
            raise
        text = "".join(pieces)
        raw = RawResult(
            text=text,
            prompt_tokens=final.prompt_tokens if final else 0,
            completion_tokens=final.completion_tokens if final else 0,
            finish_reason=final.finish_reason if final else None,
        )
        yield Chunk(completion=self._finish(request, schema, raw, time.perf_counter() - started, 1))

    async def choice_probabilities(
        self, messages: Sequence[Message | dict[str, str]] | str, prefix: str, choices: Sequence[str]
    ) -> ChoiceProbabilities:
        """P(each choice) as the model's next token after `prefix` (backends with token access only)."""
        raise self._error(ModelUnavailable, f"the {self.backend} backend gives no token probabilities")

    # -- option scoring -----------------------------------------------------------------------------
    can_score: ClassVar[bool] = False

    @classmethod
    def scoring_support(cls, spec: ModelSpec) -> str:
        """How this backend scores options for `spec`: "exact", "first token", "token walk" or "none"."""
        return "exact" if cls.can_score else "none"

    # Content-free baselines of contextual calibration, per (backend, model, baseline request): computed once
    # per process (and recorded like any call), then reused by every prompt of that template. The backend and
    # the provider's model name are part of the key: a scripted or replayed model under the same catalog id
    # (tests, demo mode) must never hand its baseline to the real one.
    _BASELINES: ClassVar[dict[tuple[str, str, str, str, str], list[float]]] = {}

    def score_request(self, prompt: str | Sequence[Message | dict[str, str]], options: Sequence[str]) -> Request:
        """The recorded request of a `score_options` call: a raw prompt, or messages in the chat layout."""
        if not options:
            raise ValueError("score_options needs at least one option")
        if isinstance(prompt, str):
            return Request(model_id=self.model_id, messages=[], prompt=prompt, options=list(options), max_tokens=0)
        return Request(model_id=self.model_id, messages=as_messages(prompt), options=list(options), max_tokens=0)

    async def score_options(
        self,
        prompt: str | Sequence[Message | dict[str, str]],
        options: Sequence[str],
        *,
        calibration: str | Sequence[Message | dict[str, str]] | None = None,
    ) -> OptionScores:
        """Each option's log-likelihood as the continuation of `prompt` (a raw completion prompt, or chat
        messages whose answer the options begin), normalised over the options. With `calibration` (the same
        template filled with a content-free input such as "N/A"), also the contextually calibrated
        probabilities. Recorded and replayed like every call; raises CannotScore where the backend offers
        no log-probabilities, and the other ModelErrors as `complete` does."""
        request = self.score_request(prompt, options)
        started = time.perf_counter()
        attempts = 0
        try:
            await self.prepare()
            started = time.perf_counter()
            async with _semaphore(self.concurrency_key, self.spec.concurrency):
                result, attempts = await self._retrying(lambda: self._score(request))
        except ModelError as exc:
            self._record_failure(request, exc, time.perf_counter() - started, max(attempts, exc.attempts))
            raise
        latency = time.perf_counter() - started
        if len(result.logprobs) != len(options) or any(x != x or x > 1e-6 for x in result.logprobs):
            err = self._error(ModelError, f"the backend returned invalid option log-probabilities: {result.logprobs}")
            self._record_failure(request, err, latency, attempts)
            raise err
        scores = OptionScores(
            model_id=self.model_id,
            options=list(options),
            logprobs=result.logprobs,
            token_counts=result.token_counts,
            probabilities=normalise(result.logprobs),
            prompt_tokens=result.prompt_tokens,
            latency_s=latency,
            flags=list(result.flags),
            replayed=self.backend == "replay",
        )
        completion = Completion(
            model_id=self.model_id,
            backend=self.backend,
            text=result.model_dump_json(),
            parsed={"options": list(options), "logprobs": result.logprobs, "probabilities": scores.probabilities},
            usage=Usage(prompt_tokens=result.prompt_tokens, completion_tokens=sum(result.token_counts)),
            latency_s=latency,
            flags=list(result.flags),
        )
        scores.call_id = self._record(request, completion, attempts)
        if calibration is not None:
            scores.baseline = await self._baseline(calibration, options)
            scores.calibrated = calibrate(scores.probabilities, normalise(scores.baseline))
        return scores

    async def _baseline(
        self, calibration: str | Sequence[Message | dict[str, str]], options: Sequence[str]
    ) -> list[float]:
        request_hash = self.score_request(calibration, options).request_hash()
        key = (self.backend, self.model_id, self.spec.model, self.spec.base_url or "", request_hash)
        if key not in ChatModel._BASELINES:
            ChatModel._BASELINES[key] = (await self.score_options(calibration, options)).logprobs
        return ChatModel._BASELINES[key]

    async def _score(self, request: Request) -> ScoreResult:
        """One attempt at scoring; backends with log-probabilities override it."""
        raise self._error(
            CannotScore,
            f"the {self.backend} backend offers no log-probabilities to score options "
            "with — choose a judge method that generates, or a model that can score",
        )

    template_capable: ClassVar[bool] = False

    def template_request(
        self, messages: Sequence[Message | dict[str, str]] | str, parts: Sequence[tuple[str, Any]]
    ) -> Request:
        """The recorded request of a `fill_template` call: its parts are part of the hash."""

        digest = hashlib.sha256(_json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
        return self.build_request(
            messages, max_tokens=sum(int(arg[0]) if kind == "free" else 1 for kind, arg in parts if kind != "text")
        ).model_copy(update={"schema_name": f"template:{digest}"})

    async def fill_template(
        self, messages: Sequence[Message | dict[str, str]] | str, parts: Sequence[tuple[str, Any]]
    ) -> Completion:
        """Fill a fixed text skeleton: ("text", literal) is copied, ("choice", [options]) takes the most
        likely option, ("free", (max_tokens, stop_chars)) generates greedily until a stop character.
        Only the slots cost decoding steps (local backends with token access only)."""
        raise self._error(ModelUnavailable, f"the {self.backend} backend cannot fill templates")

    # -- machinery -----------------------------------------------------------------------------
    def _error(self, cls: type[ModelError], message: str, **kw: Any) -> ModelError:
        return cls(message, model_id=self.model_id, backend=self.backend, **kw)

    async def _with_retries(self, request: Request, schema: type[BaseModel] | None) -> tuple[RawResult, int]:
        return await self._retrying(lambda: self._generate(request, schema))

    async def _retrying(self, attempt_once: Callable[[], Awaitable[_T]]) -> tuple[_T, int]:
        """One provider call with the timeout, retries and backoff every call shares."""
        attempt = 0
        while True:
            attempt += 1
            checkpoint()  # a cancelled run stops here, between calls (and between retries)
            try:
                return await asyncio.wait_for(attempt_once(), timeout=self.spec.timeout_s), attempt
            except TimeoutError:
                err: ModelError = self._error(
                    ModelTimeout,
                    f"no answer within {self.spec.timeout_s:g} s — raise timeout_s in the catalog "
                    "or check the server's load",
                )
            except ModelError as exc:
                err = exc
            err.attempts = attempt
            if not err.retryable or attempt > self.spec.max_retries:
                if attempt > 1:
                    err.message += f" (after {attempt} attempts)"
                raise err
            if err.retry_after is not None and err.retry_after > MAX_RETRY_AFTER_S:
                err.message += f" (server asked to wait {err.retry_after:g} s; not waiting that long)"
                raise err
            delay = err.retry_after if err.retry_after is not None else backoff_delay(attempt)
            log.info("%s: %s; retrying in %.2f s (attempt %d)", self.model_id, err.kind, delay, attempt)
            await asyncio.sleep(delay)

    async def _stream_with_timeout(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        iterator = self._generate_stream(request, schema).__aiter__()
        while True:
            try:
                item = await asyncio.wait_for(iterator.__anext__(), timeout=self.spec.timeout_s)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise self._error(ModelTimeout, f"stream stalled for {self.spec.timeout_s:g} s") from None
            yield item

    def _finish(
        self,
        request: Request,
        schema: type[BaseModel] | None,
        raw: RawResult,
        latency: float,
        attempts: int,
    ) -> Completion:
        parsed: dict[str, Any] | None = None
        flags: list[str] = []
        # Replies can echo a key: what the caller, the store and other models' prompts get is redacted.
        raw = raw.model_copy(update={"text": redact(raw.text), "native_object": redact_obj(raw.native_object)})
        if schema is not None:
            try:
                if is_truncated(raw.finish_reason):
                    # Cut off at max_tokens: any value may be cut short (0.95 → 0.9) or missing (and then
                    # defaulted), so no field of the answer is trusted.
                    raise InvalidOutputError(
                        f"the answer was cut off at max_tokens ({request.max_tokens}; "
                        f"finish_reason={raw.finish_reason}) — raise max_tokens",
                        ["truncated"],
                    )
                if raw.native_object is not None:
                    parsed, flags = validate_object(schema, raw.native_object)
                else:
                    parsed, flags = parse_structured(schema, raw.text)
            except ValueError as exc:
                err = self._error(
                    StructuredOutputError,
                    f"output is not a valid {schema.__name__}: {exc}",
                    raw_text=raw.text,
                    flags=exc.flags if isinstance(exc, InvalidOutputError) else [],
                )
                self._record_failure(request, err, latency, attempts, raw=raw)
                raise err from None
        usage = Usage(prompt_tokens=raw.prompt_tokens, completion_tokens=raw.completion_tokens)
        cost, would_cost = self._costs(raw)
        completion = Completion(
            model_id=self.model_id,
            backend=self.backend,
            text=raw.text,
            parsed=parsed,
            usage=usage,
            latency_s=latency,
            cost=cost,
            finish_reason=raw.finish_reason,
            flags=flags,
            replayed=raw.recorded_cost is not None,
            would_cost=would_cost,
        )
        completion.call_id = self._record(request, completion, attempts)
        return completion

    def _costs(self, raw: RawResult) -> tuple[float, float | None]:
        """(dollars spent, what it would have cost): a replayed answer spends nothing and keeps the
        recorded call's cost as would-have-cost; a live one spends its tokens at the catalog price."""
        if raw.recorded_cost is not None:
            return 0.0, raw.recorded_cost
        return self.spec.cost(raw.prompt_tokens, raw.completion_tokens), None

    def _record(self, request: Request, completion: Completion, attempts: int) -> int | None:
        return self._write(
            self._call_record(
                request,
                attempts,
                raw_text=completion.text,
                parsed=completion.parsed,
                prompt_tokens=completion.usage.prompt_tokens,
                completion_tokens=completion.usage.completion_tokens,
                latency_s=completion.latency_s,
                cost=completion.cost,
                would_cost=completion.would_cost,
                finish_reason=completion.finish_reason,
                flags=completion.flags,
            )
        )

    def _record_failure(
        self,
        request: Request,
        err: ModelError | ReplayMiss,
        latency: float,
        attempts: int,
        raw: RawResult | None = None,
    ) -> None:
        cost, would_cost = self._costs(raw) if raw else (0.0, None)
        self._write(
            self._call_record(
                request,
                attempts,
                raw_text=err.raw_text,
                prompt_tokens=raw.prompt_tokens if raw else 0,
                completion_tokens=raw.completion_tokens if raw else 0,
                latency_s=latency,
                cost=cost,
                would_cost=would_cost,
                finish_reason=raw.finish_reason if raw else None,
                flags=list(getattr(err, "flags", [])),
                error=redact(str(err)),
                error_type=err.kind,
            )
        )

    def _call_record(self, request: Request, attempts: int, **outcome: Any) -> CallRecord:
        """The one place a call's record is built: the run it belongs to, the model and the request, then what
        came back (`outcome`: a completion's figures or a failure's)."""
        ctx = current_context()
        return CallRecord(
            run_id=ctx.run_id,
            purpose=ctx.purpose,
            model_id=self.model_id,
            backend=self.backend,
            model_name=self.spec.model,
            request_hash=request.request_hash(),
            request=request.model_dump(mode="json"),
            attempts=attempts,
            **outcome,
        )

    def _write(self, record: CallRecord) -> int | None:
        if self.call_log is None:
            return None
        try:
            return self.call_log.record_call(record)
        except Exception:  # a broken store must not lose the answer the caller already has
            log.exception("could not record call of %s", self.model_id)
            return None
