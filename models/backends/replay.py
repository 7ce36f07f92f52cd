"""Replay: answers a request exactly as it was answered when recorded, with no model.

The key is the hash of the whole request (model id, messages, schema, temperature, max tokens,
seed), so a replayed run gets the very text, parsed object and token counts it got live. Identical
requests recorded several times (repeats at temperature > 0) are served in their recorded order.
`delay_s` injects latency, for benchmarks of the orchestration around models.

A request that was never recorded is a `ReplayMiss`, which stops the run (it is not a ModelError, so
no mechanism turns it into a fallback). With `live` (the CLI's `--replay-fallthrough`), such a request
is sent to the real model instead and recorded as a live call, so the next replay finds it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from models.base import ChatModel
from models.catalog import ModelSpec, Profile
from models.errors import ModelError, ReplayMiss
from models.recording import CallLog, CallRecord, current_context
from models.types import Completion, Message, RawResult, Request


class ReplayModel(ChatModel):
    backend = "replay"

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

    def _recorded(self, key: str) -> list[CallRecord]:
        return [r for r in self.source.find_calls(key) if r.error is None and r.backend != "replay"]

    async def complete(self, messages: Sequence[Message | dict[str, str]] | str, **kw: Any) -> Completion:
        if self.live is not None and not self._recorded(self.build_request(messages, **kw).request_hash()):
            return await self.live.complete(messages, **kw)
        return await super().complete(messages, **kw)

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        key = request.request_hash()
        found = self._recorded(key)
        if not found:
            miss = ReplayMiss(
                f"no recorded answer for this request (hash {key[:12]}) — record it once with a live model, "
                "or let replay fall through to live calls (--replay-fallthrough)",
                model_id=self.model_id, purpose=current_context().purpose, request_hash=key,
            )
            self._record_failure(request, miss, 0.0, 1)  # type: ignore[arg-type]
            raise miss
        record = found[self._cursor[key] % len(found)]
        self._cursor[key] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return RawResult(
            text=record.raw_text or "",
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            finish_reason=record.finish_reason,
        )


    @property
    def template_capable(self) -> bool:  # type: ignore[override]
        return self.spec.model == "bundled" or self.spec.model.endswith(".gguf")

    async def fill_template(self, messages, parts):  # type: ignore[no-untyped-def]
        """The recorded filling of the same template and messages."""
        import time

        request = self.template_request(messages, parts)
        if self.live is not None and not self._recorded(request.request_hash()):
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
    return original.model_copy(
        update={"backend": "replay", "concurrency": 256, "max_retries": 0, "timeout_s": 3600.0}
    )


def adhoc_spec(model_id: str) -> ModelSpec:
    return ModelSpec(id=model_id, backend="replay", model=model_id, profile=Profile(name=model_id))
