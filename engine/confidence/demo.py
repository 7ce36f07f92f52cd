"""The Confidence lab's demo: its live evaluation with the prefilled query, answer and sources."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.confidence import EvaluationConfig, evaluate
from engine.demo import MODEL, PageDemo, recording_hub
from engine.store import Store

CONFIDENCE_INPUT = {
    "query": "What is the capital of France?",
    "answer": "The capital of France is Paris.",
    "sources": "Paris is the capital and largest city of France.\nFrance's capital city is Paris.",
}


async def record_confidence(store: Store) -> tuple[str, dict[str, Any]]:
    """The Confidence lab's live evaluation with its prefilled query, answer and sources."""

    config = EvaluationConfig(
        model_id=MODEL,
        query=CONFIDENCE_INPUT["query"],
        answer=CONFIDENCE_INPUT["answer"],
        sources=CONFIDENCE_INPUT["sources"].splitlines(),
        sampling_k=0,
    )
    result = await evaluate(config, recording_hub(store), store)
    return result.run_id, {"factors": len(result.results)}


def record_page(store: Store) -> PageDemo:
    """The prefilled evaluation, once."""

    run_id, facts = asyncio.run(record_confidence(store))
    return PageDemo(
        title="Confidence lab (live)",
        inputs=[CONFIDENCE_INPUT["query"]],
        run_ids=[run_id],
        prefill={f"confidence.live_{name}": value for name, value in CONFIDENCE_INPUT.items()},
        note="Evaluate with the prefilled query, answer and sources; the sliders need no model.",
    )
