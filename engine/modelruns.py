"""The two run kinds of the Models page and `judgelab models check`, made here so page, CLI and the demo recorder
call one entry point each:

- `models.check`: one structured test judgment (the probe) through a model: parsed JSON, tokens, latency;
- `models.prompt`: a prompt streamed through a model (free text, or a structured output by its schema name).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from engine.events import run_context
from engine.store import Store
from models.probe import PROBE_MESSAGES, STRUCTURED_SCHEMAS, ProbeJudgment
from models.types import Message


async def check_model(store: Store, model: Any, model_id: str) -> dict[str, Any]:
    """The probe judgment through `model` as a `models.check` run; raises the model's error (ModelError)."""
    with run_context(store, "models.check", {"model_id": model_id}) as run:
        completion = await model.complete(PROBE_MESSAGES, schema=ProbeJudgment, max_tokens=128)
        run.summary = {"call_id": completion.call_id}
    return {
        "model_id": model_id,
        "run_id": run.run_id,
        "call_id": completion.call_id,
        "parsed": completion.parsed,
        "flags": completion.flags,
        "prompt_tokens": completion.usage.prompt_tokens,
        "completion_tokens": completion.usage.completion_tokens,
        "latency_s": round(completion.latency_s, 3),
        "tokens_per_s": round(completion.tokens_per_s, 1),
        "cost": completion.cost,
    }


async def stream_prompt(
    store: Store,
    model: Any,
    model_id: str,
    messages: Sequence[Message],
    output: str,
    temperature: float,
    max_tokens: int,
) -> AsyncIterator[tuple[str, Any]]:
    """A prompt streamed through `model` as a `models.prompt` run: yields ("run", run id) first, then ("chunk",
    each streamed chunk); the run's summary names the call. `output`: free text, or one of STRUCTURED_SCHEMAS."""
    schema = STRUCTURED_SCHEMAS.get(output)
    config = {"model_id": model_id, "output": output, "temperature": temperature, "max_tokens": max_tokens}
    with run_context(store, "models.prompt", config) as run:
        yield "run", run.run_id
        async for chunk in model.stream(list(messages), schema=schema, temperature=temperature, max_tokens=max_tokens):
            yield "chunk", chunk
            if chunk.completion is not None:
                run.summary = {"call_id": chunk.completion.call_id, "tokens": chunk.completion.usage.total_tokens}
