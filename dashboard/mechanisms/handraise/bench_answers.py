"""`judgelab bench --only handraise.answers`: what people read in the Hand raise page, before and after the
answering model became a setting of its own.

On the 24 hand-raise benchmark prompts, each labelled speaker (the first participant where none is) answers
twice, on the bundled models:
- **before**: the participant's judge model (Gemma 3 270M base), the old prompt (the transcript as the user's
  turn, temperature 0.7, 160 tokens), the text as generated;
- **after**: the default answering model (SmolLM2-135M-Instruct) through `write_answer`, the function
  `Conversation.answer_one` calls (the prompt, the stream, the tidying), with the conversation's default
  context of 3 turns.

It counts the faults a reader sees (`answer_faults`: a repeated line, an invented speaker line, an answer cut
off mid-word or mid-sentence) and times the first streamed token. The answers themselves are written to
`.bench/answers.json` for a blind side-by-side reading.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from engine.handraise.answers import DEFAULT_ANSWER_MODEL, answer_faults, speaker_names, write_answer
from engine.handraise.benchmark import parse_benchmark
from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.conversation import (
    ConversationConfig,
    answer_turn,
    close_conversation,
    conversation_turn,
    open_conversation,
)
from engine.handraise.demo import page_cast, page_handraise_config
from models.catalog import load_catalog
from models.registry import ModelHub

LEGACY_SYSTEM = (
    "You are {name}, {role}, in a group chat with a user and other assistants. Answer briefly and add "
    "what only you can add."
)
FAULTS = ("repeated_line", "invented_speaker", "cut_off", "empty")
OUT = Path(".bench") / "answers.json"
ROOT = Path(__file__).resolve().parents[2]


def _legacy_messages(participant: Any, turns: list[Any], names: dict[str, str]) -> list[dict[str, str]]:
    lines = "\n".join(f"{names.get(t.speaker, t.speaker)}: {t.text}" for t in turns[-6:])
    return [
        {"role": "system", "content": LEGACY_SYSTEM.format(name=participant.name, role=participant.role)},
        {"role": "user", "content": lines},
    ]


async def _stream(model: Any, messages: list[dict[str, str]], temperature: float, max_tokens: int) -> tuple[str, float]:
    started = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    async for chunk in model.stream(messages, temperature=temperature, max_tokens=max_tokens, seed=7):
        if chunk.text:
            first = first if first is not None else time.perf_counter() - started
            pieces.append(chunk.text)
    return "".join(pieces).strip(), first if first is not None else time.perf_counter() - started


async def _answer_item(hub: ModelHub, item: Any, progress: Progress) -> list[dict[str, Any]]:
    """Each labelled speaker of one benchmark item (the first participant where none is) answers twice: as
    before, and through `write_answer`; one row per speaker."""
    cast = list(item.participants or DEFAULT_CAST)
    speakers = [p for p in cast if item.labels.get(p.id)] or cast[:1]
    names = {p.id: p.name for p in cast} | {"user": "User"}
    turns = [Turn(t.speaker, t.text) for t in item.context]
    who = speaker_names(cast)
    rows: list[dict[str, Any]] = []
    for p in speakers:
        before, before_first = await _stream(hub.get(p.model_id), _legacy_messages(p, turns, names), 0.7, 160)
        written = await write_answer(hub.get(DEFAULT_ANSWER_MODEL), p, turns, names, who, context_turns=3)
        after, raw, after_first = written.tidy, written.raw, written.first_piece_s or 0.0
        rows.append(
            {
                "item": item.id,
                "language": item.language,
                "participant": p.id,
                "question": turns[-1].text if turns else "",
                "before": before,
                "before_faults": sorted(answer_faults(before, p.id, who)),
                "before_first_token_s": round(before_first, 3),
                "after": after.text,
                "after_raw": raw,
                "after_cuts": after.cuts,
                "after_faults": sorted(answer_faults(after.text, p.id, who)),
                "after_first_token_s": round(after_first, 3),
            }
        )
        if progress:
            row = rows[-1]
            progress(f"   {item.id} {p.id}: before {row['before_faults']} after {row['after_faults']}")
    return rows


def _fault_shares(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each fault's share of the answers, before and after."""
    n = len(rows)

    def share(side: str, fault: str) -> str:
        k = sum(fault in r[f"{side}_faults"] for r in rows)
        return f"{k}/{n} ({100 * k / n:.0f} %)"

    metrics: dict[str, Any] = {"answers": n, "written_to": str(OUT)}
    for side in ("before", "after"):
        for fault in FAULTS:
            metrics[f"{side}.{fault}"] = share(side, fault)
    metrics["after.cut_by_tidy"] = f"{sum(bool(r['after_cuts']) for r in rows)}/{n}"
    return metrics


@benchmark("handraise.answers")
def bench_answers(repeat: int, progress: Progress) -> BenchResult:

    path = ROOT / "data" / "benchmarks" / "handraise.jsonl"
    items = parse_benchmark(path.read_text(encoding="utf-8"), str(path))
    rows: list[dict[str, Any]] = []
    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)

        async def all_items() -> None:
            for item in items:
                rows.extend(await _answer_item(hub, item, progress))

        asyncio.run(all_items())
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    metrics = _fault_shares(rows)
    firsts = [r["after_first_token_s"] for r in rows]
    result = BenchResult.from_samples(
        "handraise.answers",
        f"answers to the {len(items)} benchmark prompts: Gemma base as before vs {DEFAULT_ANSWER_MODEL} tidied "
        "(samples: seconds to the first streamed token, after)",
        firsts,
        metrics=metrics
        | {
            "before.first_token_median_s": round(statistics.median(r["before_first_token_s"] for r in rows), 3),
        },
        target="after: no repeated line, invented speaker or cut-off answer; first token median ≤ 2 s",
    )
    result.met = all(not r["after_faults"] for r in rows) and (result.median or 9) <= 2
    return result


TURN_MESSAGES = [
    "My Python API returns a KeyError when it reads the database config — how do I debug it?",
    "Which statistics should we report in the evaluation of the experiments?",
    "Can someone review the colour and typography of our new UI?",
    "The login page is slow on mobile. Where do we start?",
    "How do we test the new onboarding flow with users?",
]


@benchmark("handraise.conversation_turn")
def bench_conversation_turn(repeat: int, progress: Progress) -> BenchResult:
    """The Hand raise page's flow on warm models, through its entry points (`conversation_turn` without
    answers, then every card approved and `answer_turn`), with the page's default cast and settings: seconds
    from a message to its hand cards, and from Approve to the first answer token. The first turn (models
    loading, content-free baselines, the embedder) is reported apart."""

    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        session = open_conversation(
            ConversationConfig(participants=page_cast(), config=page_handraise_config()), hub.get, store
        )
        cards: list[float] = []
        first_tokens: list[float] = []
        warm_up = 0.0

        async def turn(text: str) -> tuple[float, float | None]:
            started = time.perf_counter()
            state = await conversation_turn(session, text, answer=False)
            hands = time.perf_counter() - started
            if state.waiting:
                session.conversation.batch(state, "approve_all")
            approved_at = time.perf_counter()
            first: list[float] = []

            def on_chunk(_pid: str, _text: str) -> None:
                if not first:
                    first.append(time.perf_counter() - approved_at)

            await answer_turn(session, state, on_chunk=on_chunk)
            return hands, (first[0] if first else None)

        for i in range(max(repeat, len(TURN_MESSAGES)) + 1):
            hands, first = asyncio.run(turn(TURN_MESSAGES[i % len(TURN_MESSAGES)] if i else "Hello, who can help?"))
            if i == 0:
                warm_up = hands
                continue
            cards.append(hands)
            if first is not None:
                first_tokens.append(first)
            if progress:
                progress(f"   turn {i}: cards {hands:.2f} s, first answer token {first if first is not None else '—'}")
        close_conversation(session)
    result = BenchResult.from_samples(
        "handraise.conversation_turn",
        "Hand raise page flow on warm models: message → hand cards (samples); Approve → first answer token",
        cards,
        target="cards median ≤ 3 s; first answer token median ≤ 2 s",
        metrics={
            "first_turn_cards_s": round(warm_up, 3),
            "first_token_median_s": round(statistics.median(first_tokens), 3) if first_tokens else None,
            "first_token_max_s": round(max(first_tokens), 3) if first_tokens else None,
            "turns_answered": len(first_tokens),
        },
    )
    result.met = (result.median or 99) <= 3 and bool(first_tokens) and statistics.median(first_tokens) <= 2
    return result
