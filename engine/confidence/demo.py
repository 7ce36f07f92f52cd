"""The Confidence lab's demo: its live evaluation of two examples, a right answer and a wrong one, both as the
page evaluates them (the prefilled right one first)."""

from __future__ import annotations

import asyncio

from engine.confidence.evaluation import EvaluationConfig, evaluate
from engine.demo import MODEL, PageDemo, recording_hub
from engine.store import Store

CONFIDENCE_EXAMPLES: dict[str, dict[str, str]] = {  # the Live tab's example buttons; "right" is prefilled
    "right": {
        "query": "What is the capital of France?",
        "answer": "The capital of France is Paris.",
        "sources": "Paris is the capital and largest city of France.\nFrance's capital city is Paris.",
    },
    "wrong": {
        "query": "Who wrote Romeo and Juliet?",
        "answer": "Romeo and Juliet was written by Charles Dickens.",
        "sources": "",
    },
}
EXAMPLE_WORDS = {"right": "a right answer, with its sources", "wrong": "a wrong answer, no sources"}
CONFIDENCE_INPUT = CONFIDENCE_EXAMPLES["right"]


async def record_confidence(store: Store) -> tuple[list[str], dict[str, str]]:
    """The Live tab's evaluation of each example as the page starts it (default settings, no sampling): the run
    ids and each example's level when recorded."""

    run_ids, levels = [], {}
    for name, example in CONFIDENCE_EXAMPLES.items():
        config = EvaluationConfig(
            model_id=MODEL,
            query=example["query"],
            answer=example["answer"],
            sources=example["sources"].splitlines(),
            sampling_k=0,
        )
        result = await evaluate(config, recording_hub(store), store)
        run_ids.append(result.run_id)
        levels[name] = result.decision.level.value
    return run_ids, levels


def record_page(store: Store) -> PageDemo:
    """Both examples, once each."""

    run_ids, levels = asyncio.run(record_confidence(store))
    told = "; ".join(f"{EXAMPLE_WORDS[name]}: {level}" for name, level in levels.items())
    return PageDemo(
        title="Confidence lab (live)",
        inputs=[example["query"] for example in CONFIDENCE_EXAMPLES.values()],
        run_ids=run_ids,
        prefill={f"confidence.live_{name}": value for name, value in CONFIDENCE_INPUT.items()},
        note="Evaluate the prefilled example, then press 'Example: wrong answer' and Evaluate again "
        f"(when recorded — {told}); the sliders need no model.",
    )
