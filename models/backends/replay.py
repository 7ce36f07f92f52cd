"""Replay: answers a request exactly as it was answered when recorded, with no model.

The key is the hash of the whole request (model id, messages, schema, temperature, max tokens,
seed), so a replayed run gets the very text, parsed object and token counts it got live. It spends
nothing: its calls are recorded at $0, with the recorded call's cost kept as `would_cost`. Identical
requests recorded several times (repeats at temperature > 0) are served in their recorded order.
`delay_s` injects latency, for benchmarks of the orchestration around models.

A request that was never recorded is a `ReplayMiss`, which stops the run (it is not a ModelError, so
no mechanism turns it into a fallback). With `live` (the CLI's `--replay-fallthrough`), such a request
is sent to the real model instead and recorded as a live call, so the next replay finds it.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from models.base import ChatModel, Requires
from models.catalog import ModelSpec
from models.errors import ModelError, ReplayMiss
from models.recording import CallLog, CallRecord, current_context
from models.types import Completion, Message, OptionScores, RawResult, Request, ScoreResult


class ReplayModel(ChatModel):
    backend = "replay"
    requires = Requires()  # nothing: it answers from the call log

    @classmethod
    def scoring_support(cls, spec: ModelSpec) -> str:
        return "recorded"

    # Demo mode: what a miss says, from the call's purpose (the recorded inputs of that page).
    miss_hint: Callable[[str], str] | None = None

    def __init__(
        self,
        spec: ModelSpec,
        *,
        source: CallLog,
        call_log: CallLog | None = None,
        delay_s: float = 0.0,
        live: ChatModel | None = None,
    ) -> None:
        super().__init__(spec, call_log=call_log)
        self.source = source
        self.delay_s = delay_s
        self.live = live
        self._cursor: dict[str, int] = defaultdict(int)

    def _candidates(self, key: str) -> list[CallRecord]:
        # An answer that came back but failed validation is an answer too: replayed, it fails the same way.
        return [
            r
            for r in self.source.find_calls(key)
            if r.backend != "replay"
            and (r.error is None or (r.error_type == "StructuredOutputError" and r.raw_text is not None))
        ]

    async def complete(self, messages: Sequence[Message | dict[str, str]] | str, **kw: Any) -> Completion:
        if self.live is not None and not self._candidates(self.build_request(messages, **kw).request_hash()):
            return await self.live.complete(messages, **kw)
        return await super().complete(messages, **kw)

    can_score = True

    async def score_options(
        self, prompt: str | Sequence[Message | dict[str, str]], options: Sequence[str], **kw: Any
    ) -> OptionScores:
        if self.live is not None and not self._candidates(self.score_request(prompt, options).request_hash()):
            return await self.live.score_options(prompt, options, **kw)
        return await super().score_options(prompt, options, **kw)

    async def _score(self, request: Request) -> ScoreResult:
        """The recorded option log-probabilities of the same prompt and options."""
        record = await self._recorded(request)
        try:
            return ScoreResult.model_validate_json(record.raw_text or "")
        except ValueError:
            raise self._error(ModelError, "the recorded call holds no option scores") from None

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        record = await self._recorded(request)
        return RawResult(
            text=record.raw_text or "",
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            finish_reason=record.finish_reason,
            recorded_cost=record.cost,
        )

    async def _recorded(self, request: Request) -> CallRecord:
        key = request.request_hash()
        found = self._candidates(key)
        if not found:
            purpose = current_context().purpose
            message = (
                self.miss_hint(purpose)
                if self.miss_hint is not None
                else f"no recorded answer for this request (hash {key[:12]}) — record it once with a live model, "
                "or let replay fall through to live calls (--replay-fallthrough)"
            )
            miss = ReplayMiss(
                message,
                model_id=self.model_id,
                purpose=current_context().purpose,
                request_hash=key,
            )
            self._record_failure(request, miss, 0.0, 1)
            raise miss
        record = found[self._cursor[key] % len(found)]
        self._cursor[key] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return record

    @property
    def template_capable(self) -> bool:  # type: ignore[override]  # per spec here; a ClassVar on live backends
        return self.spec.model == "bundled" or self.spec.model.endswith(".gguf")

    async def fill_template(
        self, messages: Sequence[Message | dict[str, str]] | str, parts: Sequence[tuple[str, Any]]
    ) -> Completion:
        """The recorded filling of the same template and messages."""

        request = self.template_request(messages, parts)
        if self.live is not None and not self._candidates(request.request_hash()):
            return await self.live.fill_template(messages, parts)
        started = time.perf_counter()
        try:
            raw = await self._generate(request, None)
        except ModelError as exc:
            self._record_failure(request, exc, time.perf_counter() - started, 1)
            raise
        return self._finish(request, None, raw, time.perf_counter() - started, 1)


def replay_spec(original: ModelSpec) -> ModelSpec:
    """The spec under which a recorded model is replayed: same id (so hashes match), no limits."""
    return original.model_copy(update={"backend": "replay", "concurrency": 256, "max_retries": 0, "timeout_s": 3600.0})
