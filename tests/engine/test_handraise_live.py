"""Every LLM judge method on the bundled Gemma, recorded, then replayed from the calls: same components,
no model run. The 270M base model's scores carry little meaning; what is checked is that each method runs
end to end, stays in range, flags what it repaired, and replays exactly."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.decisions import HandRaiseConfig, decide_hands
from engine.handraise.judge import WillJudge
from models.recording import call_context
from models.registry import ModelHub

pytestmark = pytest.mark.model  # the bundled model, live

TURNS = [Turn("user", "My Python script crashes with a KeyError when it reads the config. How do I fix it?")]


@pytest.mark.parametrize("method", ["judge", "self", "hybrid"])
def test_method_on_the_bundled_model_then_replayed(method: str, store: Any) -> None:
    config = HandRaiseConfig(judge_method=method, threshold=0.0)  # hybrid: every participant survives the filter
    hub = ModelHub(call_log=store)
    with call_context(run_id=None, purpose=f"test.{method}"):
        live, facts = asyncio.run(WillJudge(DEFAULT_CAST, hub.get, config).judge(TURNS))
    expected_calls = {"judge": 1, "self": 3, "hybrid": 4}[method]
    recorded = len(store.calls())  # self: each scoring call records its content-free companion and the embeddings
    assert facts.calls == expected_calls
    if method == "judge":
        assert recorded == expected_calls
    else:  # a base model's self-judgment is read by likelihood (engine/handraise/selfjudge.py)
        assert recorded > expected_calls and all("self:likelihood" in c.flags for c in live)
    if method in ("judge", "hybrid"):  # the local judge fills a fixed JSON skeleton: only the slots decode
        judged = [
            c for c in store.calls() if (json.loads(c.request_json).get("schema_name") or "").startswith("template:")
        ]
        assert len(judged) == 1 and all("scale:0-9" in c.flags for c in live)
    assert [c.model for c in live] == ["coder", "designer", "researcher"]
    for c in live:
        assert 0 <= c.relevance <= 1 and 0 <= c.novelty <= 1 and 0 <= c.confidence <= 1
    hands = decide_hands(live, HandRaiseConfig())
    assert all(0 <= h.will <= 1 for h in hands)

    replayed, rfacts = asyncio.run(WillJudge(DEFAULT_CAST, lambda m: hub.get(m, replay=True), config).judge(TURNS))
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live]
    assert rfacts.calls == expected_calls
    assert sum(c.backend == "replay" for c in store.calls()) == recorded
