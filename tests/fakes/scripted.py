"""A ChatModel whose transport is a Python function of the request: tests script what a model says
while parsing, validation, errors and recording stay the production code. It is the built-in `mock`
backend (models/backends/mock.py) with a responder, under its own backend name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from models.backends.mock import MockModel
from models.base import ChatModel
from models.catalog import ModelSpec, Profile
from models.types import RawResult, Request


class FnModel(MockModel):
    backend = "scripted"  # no `requires` of its own: a test double, not a registered backend
    supports_streaming = False  # answered whole, as the tests that use it expect
    can_score = False  # no option scores unless a test's subclass gives them
    _score = ChatModel._score

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
        super().__init__(spec, call_log=call_log, responder=fn, delay_s=delay_s)
        self.fn = fn
        self.requests: list[Request] = []

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        self.requests.append(request)
        return await super()._generate(request, schema)


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
