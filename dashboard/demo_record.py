"""`judgelab demo record`: record the demo runs with the bundled model, through the entry points the pages call,
with the settings the pages start with (so a presenter who clicks through with the defaults replays them).

Each mechanism is recorded into a throw-away SQLite store; the runs are written to `data/demo/runs.jsonl` and
what was recorded per page to `data/demo/manifest.json`. Inputs are tried in order until one shows what the
demo is for (raised hands, position changes, retries); the manifest notes when none did.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dashboard.text import in_words
from engine import judgemaps
from engine.confidence import EvaluationConfig, evaluate
from engine.config import get_settings
from engine.demo import (
    MANIFEST_FILE,
    RUNS_FILE,
    DemoManifest,
    PageDemo,
    export_runs,
    load_manifest,
    read_runs,
    write_runs,
)
from engine.director import DirectorConfig, DuoConfig, run_duo
from engine.handraise import (
    DEFAULT_CAST,
    ConversationConfig,
    HandRaiseConfig,
    Mode,
    Participant,
    Weights,
    answer_turn,
    close_conversation,
    conversation_turn,
    open_conversation,
)
from engine.jury import Jury, JuryConfig, panel_seats, run_case
from engine.jury.config import case_files, load_cases
from engine.jury.likelihood import JURY
from engine.modelruns import stream_prompt
from engine.skip import (
    FailurePolicy,
    JudgmentSkipConfig,
    JudgmentSkipThreshold,
    ResponseConfig,
    SimulationConfig,
    WorkloadSpec,
    run_simulation,
)
from engine.store import Store
from models.base import ChatModel
from models.catalog import load_catalog
from models.registry import ModelHub
from models.types import Message
from pages.models import DEFAULT_PROMPT, DEFAULT_SYSTEM, FREE_TEXT
from pages.skipcache import workload_words

if TYPE_CHECKING:
    from engine.jury import JuryCase

MODEL = "gemma3-270m"
# Tried in order; the first that shows what the page is for is kept.
CONVERSATION_MESSAGES = [
    [
        "My Python API returns a KeyError when it reads the database config — how do I debug it?",
        "Which statistics should we report in the evaluation of the experiments?",
    ],
    ["Can someone review the colour and typography of our new UI?", "How do we evaluate it with users?"],
]
DUO_TOPICS = [("夏の思い出", "海辺の散歩"), ("好きな食べ物", "カフェ"), ("週末の予定", "駅前")]
JURY_TRIES = 3
SKIP_WORKLOAD = {"channels": 3, "hours": 2.0, "bursts_per_hour": 1.0, "mean_burst_messages": 3.0, "seed": 7}


def _hub(store: Store) -> Callable[[str], Any]:
    """Fresh models for each attempt; content-free baselines (scored once per process) are scored again, so every
    kept run holds all the calls a fresh process replays."""

    ChatModel._BASELINES.clear()
    return ModelHub(call_log=store).get


def page_cast() -> list[Any]:
    """The Conversation page's default cast, rebuilt as the page rebuilds it from its table."""

    return [
        Participant(
            id=p.id,
            model_id=p.model_id,
            answer_model=p.answer_model,
            name=p.name,
            icon=p.icon,
            role=p.role,
            expertise=[e.strip() for e in ", ".join(p.expertise).split(",") if e.strip()],
        )
        for p in DEFAULT_CAST
    ]


def page_handraise_config() -> Any:
    """The Conversation page's default settings (likelihood judge, threshold 0.6)."""

    return HandRaiseConfig(
        weights=Weights(relevance=0.5, novelty=0.3, confidence=0.2),
        threshold=0.6,
        mode=Mode(list(Mode)[0].value),
        judge_method="likelihood",
        judge_model=load_catalog().ids[0],
        cooldown_enabled=True,
        cooldown_per_turn=0.1,
        brainstorm_max_speakers=2,
        card_timeout_s=None,
        timeout_action="skip",
        auto_approve_at=None,
    )


async def record_conversation(store: Store, messages: list[str]) -> tuple[str, dict[str, Any]]:
    """The page's flow: each message judged (`conversation_turn`, answer=False), every card approved ("Approve
    all"), the approved answers streamed (`answer_turn`)."""

    session = open_conversation(
        ConversationConfig(participants=page_cast(), config=page_handraise_config()), _hub(store), store
    )
    raised = approved = 0
    for text in messages:
        turn = await conversation_turn(session, text, answer=False)
        raised += len(turn.waiting)
        if turn.waiting:
            session.conversation.batch(turn, "approve_all")
        approved += sum(r.approved for r in turn.resolved.values())
        await answer_turn(session, turn, on_chunk=lambda _pid, _text: None)
    close_conversation(session)
    return session.run_id, {"raised": raised, "approved": approved}


def page_jury() -> tuple[list[Any], Any]:
    """The Jury page's defaults: the first panel preset, a final judge, up to 3 rounds, jurors judging as
    their models suit (`auto`)."""

    catalog = load_catalog()
    preset = next(iter(catalog.panels), "local")  # none at all: the error names the panel and the catalog file
    seats = panel_seats(
        [{"model": s.model, "role_name": s.role_name, "role_focus": s.role_focus} for s in catalog.panel(preset)]
    )
    config = JuryConfig(
        max_discussion_rounds=3,
        consensus_threshold=2.0,
        final_judgment_method="final_judge",
        final_judge_model=catalog.ids[0],
        stagnation_rounds=2,
        tie_policy="severe",
        parallel=True,
        max_tokens=220,
        judge="auto",
    )
    return seats, config


def jury_cases() -> list[tuple[Path, Any]]:

    return [(path, case) for path in case_files(get_settings().data_dir) for case in load_cases(path)]


async def record_jury(store: Store, case: JuryCase) -> tuple[str, dict[str, Any]]:

    seats, config = page_jury()
    run_id, result = await run_case(store, Jury(seats, _hub(store), config), case)
    changes = sum(s.position_changed for r in result.discussion_rounds for s in r.statements)
    cal = judgemaps.load_calibration(JURY, MODEL)
    weight = cal.metrics.get("others_weight") if cal is not None else None
    return run_id, {
        "changes": changes,
        "rounds": result.total_rounds,
        "verdict": result.final_verdict,
        "gold": case.gold,
        "others_weight": f"weight {weight}" if weight is not None else "no fitted weight",
    }


def jury_note(facts: dict[str, Any]) -> str:
    """The sidebar's note on the recorded jury run, in words (a stakeholder reads it beside the page)."""

    verdict, gold = in_words(facts["verdict"]), in_words(facts["gold"])
    head = f"Verdict: {verdict}" + (", as the gold label. " if verdict == gold else f"; the gold label is {gold}. ")
    if not facts.get("rounds"):
        return head + (
            "No discussion round was run: the bundled model judges by likelihood, and its fitted map gives the "
            "others' verdicts no weight, so a round could move no one."
        )
    return head + f"{facts['changes']} position change(s) in {facts['rounds']} discussion round(s)."


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
    result = await run_duo(config, _hub(store), store)
    return result.run_id, {
        "retries": sum(len(t.attempts) - 1 for t in result.turns),
        "taken": sum(t.status.name in ("PASS", "WARN") for t in result.turns),
        "warned": sum(t.status.name == "WARN" for t in result.turns),
        "turns": len(result.turns),
    }


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
    result = await evaluate(config, _hub(store), store)
    return result.run_id, {"factors": len(result.results)}


MODELS_MAX_TOKENS = 256  # the Models page's default token budget
MODELS_MODEL = "smollm2-135m"  # the Models page opens on the instruction-tuned model (the base model continues text)


def models_prefill() -> dict[str, Any]:
    """The Models page's prompt box as it opens (its default system prompt and prompt, free text, temperature 0),
    with the recorded model picked: the widget values that replay the recorded prompt."""

    return {
        "models.model": MODELS_MODEL,
        "models.system": DEFAULT_SYSTEM,
        "models.prompt": DEFAULT_PROMPT,
        "models.output": FREE_TEXT,
        "models.temperature": 0.0,
        "models.max_tokens": MODELS_MAX_TOKENS,
    }


async def record_models(store: Store) -> tuple[str, dict[str, Any]]:
    """The Models page's Send with its defaults: one `models.prompt` run streaming the default prompt, the request
    the page makes (`engine.modelruns.stream_prompt`, the entry point the page calls)."""

    values = models_prefill()
    messages = [
        Message(role="system", content=values["models.system"]),
        Message(role="user", content=values["models.prompt"]),
    ]
    text, run_id = "", ""
    streamed = stream_prompt(
        store, _hub(store)(MODELS_MODEL), MODELS_MODEL, messages, values["models.output"], 0.0, MODELS_MAX_TOKENS
    )
    async for kind, value in streamed:
        if kind == "run":
            run_id = value
        else:
            text += value.text or ""
    return run_id, {"chars": len(text)}


def page_response_config() -> Any:
    """The Skip cache page's default thresholds and checker."""

    defaults = ResponseConfig()
    return ResponseConfig(
        check_interval_seconds=defaults.check_interval_seconds,
        min_wait_seconds=defaults.min_wait_seconds,
        failure_policy=FailurePolicy(list(FailurePolicy)[0].value),
        judgment_skip=JudgmentSkipConfig(
            thresholds=[
                JudgmentSkipThreshold(min_confidence=0.9, skip_seconds=43200),
                JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),
            ],
            default_skip_seconds=600,
        ),
    )


async def record_skip(store: Store) -> tuple[str, dict[str, Any]]:
    """A small generated workload judged live by the bundled model's likelihood judge."""

    config = SimulationConfig(
        workload=WorkloadSpec(**SKIP_WORKLOAD), response=page_response_config(), model_id=MODEL, method="likelihood"
    )
    report = await run_simulation(config, _hub(store), store)
    return report.run_id, {"saved_pct": report.comparison["calls_saved_pct"]}


def _log(message: str) -> None:

    typer.echo(message, err=True)


def record(folder: Path, only: set[str] | None = None) -> DemoManifest:
    """Record every page's demo run (or only those named) and write the demo files; pages not recorded again keep
    their earlier runs. The process's cached baselines are as they were afterwards."""

    saved = dict(ChatModel._BASELINES)
    try:
        return _record(folder, only)
    finally:
        ChatModel._BASELINES.clear()
        ChatModel._BASELINES.update(saved)


def _record(folder: Path, only: set[str] | None) -> DemoManifest:

    pages: dict[str, PageDemo] = {}
    documents: dict[str, dict[str, Any]] = {}
    if only and (folder / MANIFEST_FILE).is_file():
        pages = dict(load_manifest(folder).pages)
        documents = {d["run"]["id"]: d for d in read_runs(folder / RUNS_FILE)}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/demo.db")
        wanted = only or {"models", "conversation", "jury", "director", "confidence", "skip-cache"}
        if "models" in wanted:
            run_id, facts = asyncio.run(record_models(store))
            pages["models"] = PageDemo(
                title="Models (try a model)",
                inputs=[models_prefill()["models.prompt"]],
                run_ids=[run_id],
                prefill=models_prefill(),
                note=f"Send the prefilled prompt to {MODELS_MODEL} ({facts['chars']} characters answered when "
                "recorded).",
            )
        if "conversation" in wanted:
            for messages in CONVERSATION_MESSAGES:
                run_id, facts = asyncio.run(record_conversation(store, messages))
                _log(f"conversation {messages}: {facts}")
                if facts["raised"] and facts["approved"]:
                    break
            pages["conversation"] = PageDemo(
                title="Conversation",
                inputs=messages,
                run_ids=[run_id],
                note="Send the messages in this order with the default settings; approve the raised hands "
                f"({facts['raised']} raised, {facts['approved']} approved when recorded).",
            )
        if "jury" in wanted:
            for found in jury_cases()[:JURY_TRIES]:
                path, case = found
                run_id, facts = asyncio.run(record_jury(store, case))
                _log(f"jury {case.id}: {facts}")
                if facts["verdict"] == facts["gold"]:
                    break
            pages["jury"] = PageDemo(
                title="Jury",
                inputs=[f"{path.name}: {case.id} — {case.title}"],
                run_ids=[run_id],
                prefill={"jury.file": path.name, "jury.case": case.id},
                note=jury_note(facts),
            )
        if "director" in wanted:
            for topic, scene in DUO_TOPICS:
                run_id, facts = asyncio.run(record_duo(store, topic, scene))
                _log(f"duo {topic}/{scene}: {facts}")
                # Kept: a dialogue whose lines the director mostly takes, and where it visibly works (a draft
                # sent back, or a WARN line whose reasons go into the next turn's instruction).
                if 2 * facts["taken"] >= facts["turns"] and (facts["retries"] or facts["warned"]):
                    break
            pages["director"] = PageDemo(
                title="Director lab (duo)",
                inputs=[f"topic {topic} · scene {scene}"],
                run_ids=[run_id],
                prefill={"director.duo_topic": topic, "director.duo_scene": scene},
                note=f"やな and あゆ, 4 turns, 2 retries: {facts['taken']} of {facts['turns']} lines taken (PASS or "
                f"WARN), {facts['warned']} with a WARN carried into the next turn, {facts['retries']} retried "
                "draft(s) when recorded. The rule check and the batch need no model at all.",
            )
        if "confidence" in wanted:
            run_id, facts = asyncio.run(record_confidence(store))
            pages["confidence"] = PageDemo(
                title="Confidence lab (live)",
                inputs=[CONFIDENCE_INPUT["query"]],
                run_ids=[run_id],
                prefill={f"confidence.live_{name}": value for name, value in CONFIDENCE_INPUT.items()},
                note="Evaluate with the prefilled query, answer and sources; the sliders need no model.",
            )
        if "skip-cache" in wanted:
            run_id, facts = asyncio.run(record_skip(store))
            pages["skip-cache"] = PageDemo(
                title="Skip cache",
                inputs=[f"workload {workload_words(SKIP_WORKLOAD)}, judged by {MODEL}"],
                run_ids=[run_id],
                prefill={
                    "skip.channels": SKIP_WORKLOAD["channels"],
                    "skip.hours": SKIP_WORKLOAD["hours"],
                    "skip.rate": SKIP_WORKLOAD["bursts_per_hour"],
                    "skip.burst": SKIP_WORKLOAD["mean_burst_messages"],
                    "skip.seed": SKIP_WORKLOAD["seed"],
                    "skip.judge": MODEL,
                    "skip.method": "likelihood",
                },
                note=f"{facts['saved_pct']}% of the judge calls saved when recorded; the recorded Gemma judgments "
                "of the default workload need no model either.",
            )
        kept = {r for p in pages.values() for r in p.run_ids}
        fresh = {d["run"]["id"]: d for d in export_runs(store, sorted(kept - set(documents)))}
        store.dispose()
    documents.update(fresh)
    manifest = DemoManifest(
        model_id=MODEL,
        models=[MODEL, MODELS_MODEL],
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        pages=pages,
    )
    write_runs([documents[r] for p in pages.values() for r in p.run_ids], folder / RUNS_FILE)
    (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return manifest
