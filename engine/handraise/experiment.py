"""The hand raise as experiments see it: each case is judged once per group (the raw components: relevance,
novelty, confidence); a cell decides every case again under its threshold, weights, cooldown and mode with
`engine.handraise`'s pure decisions. The cooldown's history is who spoke in the case's earlier user turns."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.experiments.adapters.base import ExperimentAdapter, Loc, Models, axis_location, axis_values, nested
from engine.experiments.definition import Experiment
from engine.experiments.evidence import OUTCOMES, binary_outcomes
from engine.handraise.benchmark import benchmark_totals, parse_benchmark
from engine.handraise.decisions import HandRaiseConfig, HandStatus, History, auto_resolutions, decide_hands
from engine.handraise.judge import WillJudge
from engine.inputs import read_text
from engine.runctx import checkpoint, progress


@dataclass
class HandRaiseItem:
    id: str
    labels: dict[str, bool]
    models: list[str]
    prior: list[set[str]]
    components: list[Any]
    calls: int
    tokens: int
    latency_s: float
    cost: float


@dataclass
class HandRaiseRecording:
    items: list[HandRaiseItem] = field(default_factory=list)


def prior_speakers(context: Sequence[Any]) -> list[set[str]]:
    """Who spoke in each earlier user turn of a case's context (the cooldown's history): a user message opens
    a turn; the turn holding the last message is the one being decided, not history."""
    turns: list[set[str]] = []
    for t in context:
        if t.speaker == "user" or not turns:
            turns.append(set())
        if t.speaker != "user":
            turns[-1].add(t.speaker)
    return turns[:-1]


class HandRaiseAdapter(ExperimentAdapter):
    name: str = "handraise"
    decision: frozenset[str] = frozenset(
        {
            "threshold",
            "weights.relevance",
            "weights.novelty",
            "weights.confidence",
            "mode",
            "brainstorm_auto_allow",
            "brainstorm_max_speakers",
            "cooldown_enabled",
            "cooldown_per_turn",
            "cooldown_window",
            "auto_approve_at",
        }
    )
    calls: frozenset[str] = frozenset({"model", "judge_method", "judge_model", "embedder", "context"})
    metrics: tuple[str, ...] = (
        "f1",
        "precision",
        "recall",
        "accuracy",
        "speak_rate",
        "calls",
        "tokens",
        "latency_s",
        "cost",
    )
    default_metric: str = "f1"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = nested({k: v for k, v in {**base, **params}.items() if k not in ("model", "context")})
        weights = merged.get("weights")
        if isinstance(weights, dict):
            merged["weights"] = {**nested(dict(base)).get("weights", {}), **weights}
        return HandRaiseConfig.model_validate(merged)

    def context(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> str:
        value = str(params.get("context", base.get("context", "3")))
        if value not in ("1", "3", "5", "summary"):
            raise ValueError(f"context {value!r}: one of 1, 3, 5, summary")
        return value

    def build(self, definition: Experiment, extra: dict[str, Any]) -> Any:
        self.context(definition.base, extra)
        return self.config(definition.base, extra)

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = super().checks(definition, source)
        names = list(definition.axes())
        methods = {
            str(self.config(definition.base, {}).judge_method),
            *map(str, axis_values(definition, "judge_method")),
        }
        swept = [n for n in names if n in ("threshold", "weights.relevance", "weights.novelty", "weights.confidence")]
        if "hybrid" in methods and swept:
            problems.append(
                (
                    axis_location(definition, swept[0]),
                    "the hybrid judge uses the threshold and weights to choose "
                    "who judges itself (a call): not a decision parameter with judge_method hybrid",
                )
            )
        return problems

    def load_cases(self, definition: Experiment) -> list[Any]:

        path = definition.case_path()
        items = parse_benchmark(read_text(path), str(path))
        return items[: definition.limit] if definition.limit else items

    def models_of(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[str]:
        model = call_params.get("model", definition.base.get("model"))
        if model:
            return [str(model)]
        return sorted({p.model_id for item in self.load_cases(definition) for p in item.cast()})

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        models: Models,
        store: Any,
        run_id: str,
    ) -> HandRaiseRecording:

        config = self.config(definition.base, call_params)
        context = self.context(definition.base, call_params)
        model = call_params.get("model", definition.base.get("model"))
        out = HandRaiseRecording()
        for item in cases:
            checkpoint()
            cast = item.cast()
            if model:
                cast = [p.model_copy(update={"model_id": str(model)}) for p in cast]
            turns = item.turns(context)
            judge = WillJudge(cast, models, config.model_copy(update={"context_turns": max(1, len(turns))}))
            comps, facts = await judge.judge(turns)
            out.items.append(
                HandRaiseItem(
                    id=item.id,
                    labels=dict(item.labels),
                    models=[p.id for p in cast],
                    prior=prior_speakers(item.context),
                    components=comps,
                    calls=facts.calls,
                    tokens=facts.prompt_tokens + facts.completion_tokens,
                    latency_s=round(facts.latency_s, 4),
                    cost=facts.cost,
                )
            )
            progress(step=f"judged {item.id}", items=1, calls=facts.calls)
        return out

    def decide(
        self, definition: Experiment, recording: HandRaiseRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:
        config = self.config(definition.base, decision_params)
        lines = []
        spoke = decided = 0
        said: list[bool] = []
        gold: list[bool] = []
        of_item: list[int] = []
        keys: list[str] = []
        for index, item in enumerate(recording.items):
            speak = decide_handraise_item(item, config)
            spoke += sum(speak.values())
            decided += len(speak)
            for pid, label in item.labels.items():
                if pid in speak:
                    said.append(bool(speak[pid]))
                    gold.append(bool(label))
                    of_item.append(index)
                    keys.append(f"{item.id}/{pid}")
            lines.append(
                {
                    "labels": item.labels,
                    "runs": [
                        {
                            "predictions": {m: {"speak": s} for m, s in speak.items()},
                            "latency_s": item.latency_s,
                            "tokens": item.tokens,
                            "cost": item.cost,
                        }
                    ],
                }
            )

        totals = benchmark_totals(lines, intervals=False)  # per cell: intervals come with the comparison
        latencies = [i.latency_s for i in recording.items]
        return {
            "f1": totals["f1"],
            "precision": totals["precision"],
            "recall": totals["recall"],
            "accuracy": totals["accuracy"],
            "speak_rate": round(spoke / decided, 4) if decided else None,
            "calls": sum(i.calls for i in recording.items),
            "tokens": sum(i.tokens for i in recording.items),
            "latency_s": round(statistics.median(latencies), 4) if latencies else None,
            "cost": round(sum(i.cost for i in recording.items), 8),
            OUTCOMES: binary_outcomes(said, gold, of_item, keys),  # by dialogue: its decisions move together
        }

    def recording_json(self, recording: HandRaiseRecording) -> dict[str, Any]:
        return {
            "items": [
                {
                    "id": i.id,
                    "labels": i.labels,
                    "models": i.models,
                    "prior": [sorted(s) for s in i.prior],
                    "components": [c.model_dump(mode="json") for c in i.components],
                    "calls": i.calls,
                    "tokens": i.tokens,
                    "latency_s": i.latency_s,
                    "cost": i.cost,
                }
                for i in recording.items
            ]
        }


def decide_handraise_item(item: HandRaiseItem, config: Any) -> dict[str, bool]:
    """Who answers a recorded case under `config`: the hands as `decide_hands` puts them up (cooldown from
    the case's history), the mode's automatic resolutions, and a raised hand still waiting is answered (the
    user approves it: what the benchmark labels mean)."""

    hands = decide_hands(item.components, config, History(speakers=[set(s) for s in item.prior]), models=item.models)
    resolved = auto_resolutions(hands, config)
    return {
        h.model: resolved[h.model].approved if h.model in resolved else h.status == HandStatus.RAISED for h in hands
    }
