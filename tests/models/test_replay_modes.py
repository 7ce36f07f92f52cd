"""Replay answers only what was recorded: a miss is a ReplayMiss that no mechanism turns into a fallback;
with fall-through, a miss goes to the live model and is recorded so the next replay finds it."""

from __future__ import annotations

import asyncio

import pytest

from models.catalog import BUNDLED_MODEL_ID, load_catalog
from models.errors import ModelError, ReplayMiss
from models.probe import ProbeJudgment
from models.recording import call_context
from models.registry import ModelHub
from models.types import Completion


def test_a_miss_is_not_a_model_error_and_is_recorded(store) -> None:
    hub = ModelHub(load_catalog(), call_log=store)
    with pytest.raises(ReplayMiss) as info, call_context(purpose="jury.phase1:juror-1-safety"):
        asyncio.run(hub.get(BUNDLED_MODEL_ID, replay=True).complete("never asked", schema=ProbeJudgment))
    assert not isinstance(info.value, ModelError)  # so no `except ModelError` fallback can swallow it
    assert "replay miss for jury.phase1:juror-1-safety" in str(info.value) and "--replay-fallthrough" in str(info.value)
    [call] = store.calls()
    assert (call.backend, call.error_type) == ("replay", "ReplayMiss")


@pytest.mark.model
def test_fallthrough_calls_the_live_model_once_then_replays_it(store) -> None:
    hub = ModelHub(load_catalog(), call_log=store)
    through = hub.get(BUNDLED_MODEL_ID, replay=True, fallthrough=True)
    strict = hub.get(BUNDLED_MODEL_ID, replay=True)

    async def go() -> tuple[Completion, Completion, Completion]:
        live = await through.complete("Should a bot greet a new member?", max_tokens=24)
        again = await through.complete("Should a bot greet a new member?", max_tokens=24)
        replayed = await strict.complete("Should a bot greet a new member?", max_tokens=24)
        return live, again, replayed

    live, again, replayed = asyncio.run(go())
    assert live.backend == "llamacpp"  # the miss went to the real model
    assert again.backend == replayed.backend == "replay"  # then it was recorded
    assert live.text == again.text == replayed.text
    assert [c.backend for c in store.calls()] == ["llamacpp", "replay", "replay"]
