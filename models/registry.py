"""ChatModels built from catalog specs; whether each can be used right now.

The backends find themselves (models.discovery: every module of models/backends is imported once and each
ChatModel class in it that declares `requires` registers itself under its `backend` name); `backends` and
`backend_class` are re-exported here. Adding a backend is one file there plus one catalog entry.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from models.backends.replay import ReplayModel, replay_spec
from models.base import ChatModel
from models.catalog import Catalog, ModelSpec, cached_catalog
from models.discovery import backend_class as backend_class
from models.discovery import backends as backends
from models.errors import ModelUnavailable
from models.recording import CallLog


def build_model(
    spec: ModelSpec,
    *,
    call_log: CallLog | None = None,
    replay_from: CallLog | None = None,
    delay_s: float = 0.0,
    fallthrough: bool = False,
) -> ChatModel:
    """A ChatModel for `spec`; with `replay_from`, one that answers from recorded calls instead (a request
    never recorded is a ReplayMiss, or with `fallthrough` a live call to the model of `spec`)."""
    if replay_from is not None or spec.backend == "replay":
        source = replay_from or call_log
        if source is None:
            raise ModelUnavailable("replay needs a call log to read from", model_id=spec.id, backend="replay")
        live = build_model(spec, call_log=call_log) if fallthrough and spec.backend != "replay" else None
        return ReplayModel(replay_spec(spec), source=source, call_log=call_log, delay_s=delay_s, live=live)
    return backend_class(spec.backend)(spec, call_log=call_log)


def scoring_support(spec: ModelSpec) -> str:
    """How `spec`'s backend scores options for a likelihood judge ("none": it cannot; judge by generating)."""
    return backend_class(spec.backend).scoring_support(spec)


@dataclass(frozen=True)
class Availability:
    model_id: str
    available: bool
    reason: str


async def check_availability(spec: ModelSpec) -> Availability:
    """Cheap checks only (packages, files, keys, a short probe of local servers): the backend's own."""
    reason = await backend_class(spec.backend).unavailable_reason(spec)
    return Availability(spec.id, reason is None, reason or "ready")


async def check_all(catalog: Catalog | None = None) -> list[Availability]:
    catalog = catalog or cached_catalog()
    return list(await asyncio.gather(*(check_availability(s) for s in catalog.models)))


class ModelHub:
    """The catalog plus one built ChatModel per id, all recording into one call log."""

    def __init__(self, catalog: Catalog | None = None, *, call_log: CallLog | None = None) -> None:
        self.catalog = catalog or cached_catalog()
        self.call_log = call_log
        self._models: dict[tuple[str, bool, float, bool], ChatModel] = {}

    def get(self, model_id: str, *, replay: bool = False, delay_s: float = 0.0, fallthrough: bool = False) -> ChatModel:
        """The model; with `replay`, answered from recorded calls (`fallthrough`: misses go to the model)."""
        key = (model_id, replay, delay_s, replay and fallthrough)
        if key not in self._models:
            spec = self.catalog.get(model_id)
            self._models[key] = build_model(
                spec,
                call_log=self.call_log,
                replay_from=self.call_log if replay else None,
                delay_s=delay_s,
                fallthrough=replay and fallthrough,
            )
        return self._models[key]

    def spec(self, model_id: str) -> ModelSpec:
        return self.catalog.get(model_id)

    async def availability(self) -> list[Availability]:
        return await check_all(self.catalog)
