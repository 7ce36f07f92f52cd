"""The judge benchmark: labelled multi-party dialogues (who should speak after the last message), judged
with a method and stored as one run with its precision, recall, consistency, latency and cost."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import stats
from engine.events import async_run_context
from engine.handraise.cast import DEFAULT_CAST, Participant, Turn
from engine.handraise.decisions import HandRaiseConfig, HandStatus, decide_hands
from engine.handraise.judge import WillJudge
from engine.inputs import Problems, iter_lines, problem_lines
from models.source import ModelLookup

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from engine.store import Store

ContextMode = Literal["1", "3", "5", "summary"]


class BenchTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: str
    text: str = Field(min_length=1)


class BenchItem(BaseModel):
    """A labelled multi-party dialogue: who should speak after its last message."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    language: str | None = None
    participants: list[Participant] | None = None  # default: DEFAULT_CAST
    context: list[BenchTurn] = Field(min_length=1)
    summary: str | None = None
    labels: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> BenchItem:
        ids = {p.id for p in self.cast()}
        unknown = sorted(set(self.labels) - ids) + sorted({t.speaker for t in self.context} - ids - {"user"})
        if unknown:
            raise ValueError(f"unknown participants: {', '.join(unknown)}")
        return self

    def cast(self) -> list[Participant]:
        return list(self.participants) if self.participants else list(DEFAULT_CAST)

    def turns(self, mode: ContextMode) -> list[Turn]:
        all_turns = [Turn(t.speaker, t.text) for t in self.context]
        if mode == "summary":
            earlier = (
                [Turn("user", f"(Summary of the conversation so far: {self.summary})")]
                if (self.summary and len(all_turns) > 1)
                else []
            )
            return earlier + all_turns[-1:]
        return all_turns[-int(mode) :]


def parse_benchmark(content: str, source: str = "benchmark") -> list[BenchItem]:

    items: list[BenchItem] = []
    problems = Problems()
    for number, line in iter_lines(content):
        if not line.strip():
            continue
        try:
            items.append(BenchItem.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: not JSON ({exc.msg})")
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "item"
            problems.append(f"{source}:{number}: {where}: {err['msg']}")
    if len({i.id for i in items}) != len(items):
        problems.append(f"{source}: duplicate item ids")
    if problems:
        raise ValueError("bad benchmark, nothing loaded:\n" + problem_lines(problems))
    if not items:
        raise ValueError(f"{source}: no items")
    return items


async def evaluate_item(
    item: BenchItem,
    models: ModelLookup,
    config: HandRaiseConfig,
    context: ContextMode,
    repeat: int = 1,
    embedder: TextEmbedder | None = None,
    model_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Judge one item `repeat` times: per repeat each participant's will and whether its hand went up,
    with the judgment's latency and tokens. `model_ids` re-seats the cast on other models (cycled)."""
    cast = item.cast()
    if model_ids:
        cast = [p.model_copy(update={"model_id": model_ids[i % len(model_ids)]}) for i, p in enumerate(cast)]
    turns = item.turns(context)
    judge = WillJudge(cast, models, config.model_copy(update={"context_turns": max(1, len(turns))}), embedder=embedder)
    runs = []
    for _ in range(repeat):
        comps, facts = await judge.judge(turns)
        hands = decide_hands(comps, config)
        runs.append(
            {
                "predictions": {
                    h.model: {
                        "will": h.will,
                        "speak": h.status == HandStatus.RAISED,
                        "reason": h.reason,
                        "flags": h.flags,
                    }
                    for h in hands
                },
                "latency_s": round(facts.latency_s, 4),
                "calls": facts.calls,
                "tokens": facts.prompt_tokens + facts.completion_tokens,
                "cost": round(facts.cost, 10),
                "call_ids": facts.call_ids,
            }
        )
    return {"id": item.id, "language": item.language, "labels": item.labels, "runs": runs}


def top1(items: Sequence[Mapping[str, Any]]) -> float | None:
    """Share of the judgments (item × repeat) of items with a labelled speaker whose highest will is a labelled
    speaker's: the labelled speaker ranked first. A tie between a speaker and a participant who should stay
    quiet is not first."""
    hits = total = 0
    for item in items:
        labels = item["labels"]
        if not any(labels.values()):
            continue
        for run in item["runs"]:
            wills = {
                pid: float(p["will"])
                for pid, p in run["predictions"].items()
                if pid in labels and isinstance(p.get("will"), int | float)
            }
            if not wills:
                continue
            total += 1
            top = max(wills.values())
            hits += all(labels[pid] for pid, w in wills.items() if w == top)
    return round(hits / total, 4) if total else None


def benchmark_totals(items: Sequence[Mapping[str, Any]], intervals: bool = True) -> dict[str, Any]:
    """Totals computed only from the items' predictions: every (item, participant, repeat) with a label
    counts once; consistency is the share of labelled (item, participant) pairs whose decision was the
    same in every repeat; latency is per judgment (one per item and repeat), tokens and cost per decision
    (cost: the dollars recorded with the judgment calls; None for lines stored without it); `top1` as `top1`.
    Items in more than one language also get `by_language`: F1, precision, recall and top-1 per language
    (the packaged embedder is an English model, and the split shows what that costs).

    With `intervals`, every rate gets `<rate>_ci`: [low, high], 95 %, from a seeded bootstrap over *items*
    (a dialogue's decisions, one per participant and repeat, are not independent: they move together), see
    engine/stats.py. Experiments leave them out per cell and compute them for the cells they compare."""

    tp = fp = fn = tn = 0
    same = pairs = 0
    latencies: list[float] = []
    tokens = decisions = 0
    cost: float | None = 0.0
    for item in items:
        for run in item["runs"]:
            latencies.append(float(run["latency_s"]))
            tokens += int(run["tokens"])
            decisions += len(run["predictions"])
            cost = None if cost is None or "cost" not in run else cost + float(run["cost"])
        for pid, gold in item["labels"].items():
            said = [bool(run["predictions"][pid]["speak"]) for run in item["runs"]]
            pairs += 1
            same += len(set(said)) == 1
            for s in said:
                tp += s and gold
                fp += s and not gold
                fn += (not s) and gold
                tn += (not s) and not gold
    n = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (0.0 if n else None)
    return {
        "decisions_scored": n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "accuracy": round((tp + tn) / n, 4) if n else None,
        "precision": None if precision is None else round(precision, 4),
        "recall": None if recall is None else round(recall, 4),
        "f1": None if f1 is None else round(f1, 4),
        "consistency": round(same / pairs, 4) if pairs else None,
        "top1": top1(items),
        "median_latency_s": round(statistics.median(latencies), 4) if latencies else None,
        "tokens_per_decision": round(tokens / decisions, 2) if decisions else None,
        "cost_total": None if cost is None else round(cost, 8),
        "cost_per_decision": round(cost / decisions, 10) if cost is not None and decisions else None,
        **(decision_intervals(items) if intervals else {}),
        **_by_language(items),
    }


def decision_intervals(items: Sequence[Mapping[str, Any]]) -> dict[str, list[float] | None]:
    """`accuracy_ci`, `precision_ci`, `recall_ci`, `f1_ci`, `consistency_ci` and `top1_ci`, resampling
    dialogues (clusters of decisions)."""
    said: list[bool] = []
    gold: list[bool] = []
    of_item: list[int] = []
    stable: list[bool] = []
    stable_item: list[int] = []
    first: list[bool] = []
    first_item: list[int] = []
    for index, item in enumerate(items):
        labels = item["labels"]
        for pid, label in labels.items():
            decisions = [bool(run["predictions"][pid]["speak"]) for run in item["runs"]]
            stable.append(len(set(decisions)) == 1)
            stable_item.append(index)
            for decision in decisions:
                said.append(decision)
                gold.append(bool(label))
                of_item.append(index)
        if any(labels.values()):
            for run in item["runs"]:
                wills = {
                    pid: float(p["will"])
                    for pid, p in run["predictions"].items()
                    if pid in labels and isinstance(p.get("will"), int | float)
                }
                if wills:
                    top = max(wills.values())
                    first.append(all(labels[pid] for pid, w in wills.items() if w == top))
                    first_item.append(index)

    def ci(statistic: stats.Stat, n: int, clusters: list[int]) -> list[float] | None:
        interval = stats.bootstrap(statistic, clusters=clusters)[1] if n else None
        return interval.as_list() if interval else None

    correct = [s == g for s, g in zip(said, gold, strict=True)]
    return {
        "accuracy_ci": ci(stats.w_mean(correct), len(said), of_item),
        "precision_ci": ci(stats.w_precision(said, gold), len(said), of_item),
        "recall_ci": ci(stats.w_recall(said, gold), len(said), of_item),
        "f1_ci": ci(stats.w_f1(said, gold), len(said), of_item),
        "consistency_ci": ci(stats.w_mean(stable), len(stable), stable_item),
        "top1_ci": ci(stats.w_mean(first), len(first), first_item),
    }


LANGUAGE_KEYS = ("decisions_scored",) + tuple(
    f"{m}{ci}" for m in ("precision", "recall", "f1", "top1") for ci in ("", "_ci")
)


def _by_language(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Items without a language go under "unknown", so the parts add up to the whole."""

    def language(item: Mapping[str, Any]) -> str:
        return str(item.get("language") or "unknown")

    languages = sorted({language(i) for i in items})
    if len(languages) < 2:
        return {}
    out = {}
    for name in languages:
        sub = benchmark_totals([i for i in items if language(i) == name])
        out[name] = {k: sub[k] for k in LANGUAGE_KEYS}
    return {"by_language": out}


async def run_benchmark(
    store: Store,
    items: Sequence[BenchItem],
    models: ModelLookup,
    config: HandRaiseConfig,
    context: ContextMode,
    repeat: int = 1,
    model_ids: Sequence[str] | None = None,
    name: str = "",
    on_item: Callable[[dict[str, Any]], object] | None = None,
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Evaluate a benchmark as one stored run (an event per item, the totals as its summary)."""

    lines: list[dict[str, Any]] = []
    settings = {
        "method": config.judge_method,
        "context": context,
        "repeat": repeat,
        "models": list(model_ids or []),
        "items": len(items),
        "config": config.model_dump(mode="json"),
    }
    async with async_run_context(
        store, "handraise.eval", settings, name=name or f"handraise eval {config.judge_method} context {context}"
    ) as run:
        for item in items:
            line = await evaluate_item(item, models, config, context, repeat, model_ids=model_ids)
            lines.append(line)
            run.emit("handraise_eval_item", **line)
            if on_item:
                on_item(line)
        totals = benchmark_totals(lines)
        run.summary = totals
    return run.run_id, lines, totals


async def judge_scenario(
    store: Store, item: BenchItem, models: ModelLookup, config: HandRaiseConfig, *, source: str = ""
) -> tuple[str, list[Any], Any]:
    """One conversation judged as a stored run of kind `handraise.judge` (what `judgelab handraise judge` runs):
    each participant's components, will and hand; the context is the last 5 turns of a longer scenario, else 3.
    Returns (run id, hands, the judgment's facts: calls, tokens, latency)."""

    cast = item.cast()
    turns = item.turns("5" if len(item.context) > 3 else "3")
    settings = {"scenario": source or item.id, "method": config.judge_method}
    async with async_run_context(store, "handraise.judge", settings) as run:
        comps, facts = await WillJudge(cast, models, config).judge(turns)
        hands = decide_hands(comps, config)
        run.emit("hands", hands=[h.payload() for h in hands], latencyS=facts.latency_s, calls=facts.calls)
        run.summary = {"raised": [h.model for h in hands if h.status == HandStatus.RAISED]}
    return run.run_id, hands, facts
