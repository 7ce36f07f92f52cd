"""A ChatModel whose transport is a Python function of the request: tests script what a model says
while parsing, validation, errors and recording stay the production code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from models.base import ChatModel
from models.catalog import ModelSpec, Profile
from models.types import RawResult, Request


class FnModel(ChatModel):
    backend = "scripted"

    def __init__(
        self,
        fn: Callable[[Request], str | dict[str, Any] | RawResult | Exception],
        *,
        model_id: str = "scripted",
        delay_s: float = 0.0,
        call_log: Any = None,
    ) -> None:
        spec = ModelSpec(
            id=model_id,
            backend="replay",
            model="scripted",
            max_retries=0,
            concurrency=64,
            needs_key=False,
            profile=Profile(name=model_id),
        )
        super().__init__(spec, call_log=call_log)
        self.fn = fn
        self.delay_s = delay_s
        self.requests: list[Request] = []

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        reply = self.fn(request)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, RawResult):  # a finish reason or token counts scripted too
            return reply
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        return RawResult(
            text=text,
            prompt_tokens=sum(len(m.content) for m in request.messages) // 4,
            completion_tokens=len(text) // 4,
            finish_reason="stop",  # a scripted reply is whole: the model ended it, as a real one does
        )


class ScriptedHub:
    """The dashboard's model hub (for `state.get_hub`) in which every catalog id answers with `fn` after
    `delay_s`, its calls recorded in the page's store."""

    def __init__(self, fn: Callable[[Request], str | dict[str, Any] | RawResult | Exception], delay_s: float) -> None:
        self.fn = fn
        self.delay_s = delay_s
        self.models: dict[str, FnModel] = {}

    def get(self, model_id: str, **_: Any) -> FnModel:
        if model_id not in self.models:
            from dashboard import state

            self.models[model_id] = FnModel(
                self.fn, model_id=model_id, delay_s=self.delay_s, call_log=state.get_store()
            )
        return self.models[model_id]
