"""The Director lab's demo: the duo with its defaults, on the first topic whose dialogue shows the director at work."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.demo import MODEL, PageDemo, log, recording_hub
from engine.director.config import DirectorConfig
from engine.director.dialogue import DuoConfig, run_duo
from engine.store import Store

DUO_TOPICS = [("夏の思い出", "海辺の散歩"), ("好きな食べ物", "カフェ"), ("週末の予定", "駅前")]


async def record_duo(store: Store, topic: str, scene: str) -> tuple[str, dict[str, Any]]:
    """The Director lab's duo with its defaults: やな and あゆ, 4 turns, 2 retries, mark when they run out."""

    config = DuoConfig(
        first="yana",
        second="ayu",
        model_id=MODEL,
        topic=topic,
        scene=scene,
        turns=4,
        rubric=False,
        director=DirectorConfig(max_retries=2, on_retries_exhausted="mark"),
    )
    result = await run_duo(config, recording_hub(store), store)
    return result.run_id, {
        "retries": sum(len(t.attempts) - 1 for t in result.turns),
        "taken": sum(t.status.name in ("PASS", "WARN") for t in result.turns),
        "warned": sum(t.status.name == "WARN" for t in result.turns),
        "turns": len(result.turns),
    }


def record_page(store: Store) -> PageDemo:
    """The first topic whose duo the director mostly takes and visibly corrects."""

    for topic, scene in DUO_TOPICS:
        run_id, facts = asyncio.run(record_duo(store, topic, scene))
        log(f"duo {topic}/{scene}: {facts}")
        # Kept: a dialogue whose lines the director mostly takes, and where it visibly works (a draft
        # sent back, or a WARN line whose reasons go into the next turn's instruction).
        if 2 * facts["taken"] >= facts["turns"] and (facts["retries"] or facts["warned"]):
            break
    return PageDemo(
        title="Director lab (duo)",
        inputs=[f"topic {topic} · scene {scene}"],
        run_ids=[run_id],
        prefill={"director.duo_topic": topic, "director.duo_scene": scene},
        note=f"やな and あゆ, 4 turns, 2 retries: {facts['taken']} of {facts['turns']} lines taken (PASS or "
        f"WARN), {facts['warned']} with a WARN carried into the next turn, {facts['retries']} retried "
        "draft(s) when recorded. The rule check and the batch need no model at all.",
    )
