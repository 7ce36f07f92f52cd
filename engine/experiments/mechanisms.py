"""What an experiment knows of each mechanism: its two cost classes, how one group of cells is recorded
(the only step that calls models), and how one cell is decided from that recording (pure: no call).

Hand raise: each case is judged once per group (the raw components: relevance, novelty, confidence); a cell
decides every case again under its threshold, weights, cooldown and mode with `engine.handraise`'s pure
decisions. The cooldown's history is who spoke in the case's earlier user turns.

Jury: each case is recorded once at the widest setting — consensus threshold 2.0 (never consensus), no
stagnation stop, the most rounds any cell asks for, the majority vote (no final-judge call). A discussion
round depends only on phase 1 and the rounds before it, never on the stopping rule, so every stricter
stop is a prefix of that recording: `derive_jury` replays the consensus checks and the stop rules on the
prefix and decides the final judgment, giving the same result a live run at that setting gives on the
same calls (tests/engine/test_experiments.py proves it against live runs).
"""

from __future__ import annotations

import asyncio
import json
import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine.calibration import calibrate
from engine.confidence import ConfidenceSettings, InterventionLevel, calculate, decide_level, parse_factors
from engine.director import DirectorConfig, Status, evaluate_rules, load_character, load_script, retune
from engine.experiments.definition import Experiment, Range
from engine.experiments.evidence import OUTCOMES, binary_outcomes, correct_outcomes, score_outcomes
from engine.handraise import (
    HandRaiseConfig,
    HandStatus,
    History,
    WillJudge,
    auto_resolutions,
    benchmark_totals,
    decide_hands,
    parse_benchmark,
)
from engine.inputs import iter_lines, read_text
from engine.jury import Jury, JuryConfig, Rubric, evaluation_item, evaluation_totals, load_cases, panel_seats
from engine.jury.redecide import call_ids
from engine.jury.redecide import redecide as derive_jury  # the name experiments know it by
from engine.mechanism import mechanism_spec, resolve_callable
from engine.runctx import checkpoint, progress
from engine.skipcache import JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skipsim import EPOCH, RecordedJudge, WorkloadSpec, generate_workload, simulate

Loc = tuple[str | int, ...]
Models = Callable[[str], Any]


class Mechanism(ABC):
    """A mechanism as experiments see it. Each one writes its parameters, metrics, settings, cases, decision
    and recording's JSON; the rest has defaults that fit a mechanism whose cells make no model call (no call
    parameters, no models, a recording made from the cases alone), which one with calls overrides."""

    name: str
    decision: frozenset[str]
    calls: frozenset[str] = frozenset()
    base_keys: frozenset[str] = frozenset()  # settings of `base` that are neither decision nor call parameters
    metrics: tuple[str, ...]
    default_metric: str

    @abstractmethod
    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
        """The mechanism's settings: `params` over `base` (raises on a bad value)."""

    def build(self, definition: Experiment, extra: dict[str, Any]) -> Any:
        """Everything `check` validates for one written value (`extra` over the base): by default the settings."""
        return self.config(definition.base, extra)

    def check(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        """Every problem of a definition for this mechanism, as (field, message). The cell cap comes first
        and alone: a grid above it is refused before any value, case or setting is built."""
        size = definition.size_problem()
        if size is not None:
            return [size]
        return self.checks(definition, source)

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = _check_common(self, definition, self.base_keys)
        names = [n for n in definition.axes() if n in self.decision | self.calls]
        return problems + _validate_each(definition, lambda extra: self.build(definition, extra), names)

    @abstractmethod
    def load_cases(self, definition: Experiment) -> list[Any]: ...

    def models_of(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[str]:
        """The catalog models a group of cells calls: none by default."""
        return []

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        models: Models,
        store: Any,
        run_id: str,
    ) -> Any:
        """What a group of cells is decided from: by default made from the cases alone (`record_cases`)."""
        return await self.record_cases(definition, cases)

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{self.name}: record_cases, or a record of its own")

    @abstractmethod
    def decide(self, definition: Experiment, recording: Any, decision_params: Mapping[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def recording_json(self, recording: Any) -> dict[str, Any]: ...


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"weights.relevance": 0.6} → {"weights": {"relevance": 0.6}} (merged with what is already nested)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        here = out
        for part in parts[:-1]:
            here = here.setdefault(part, {})
        if isinstance(value, Mapping) and isinstance(here.get(parts[-1]), dict):
            here[parts[-1]].update(value)
        else:
            here[parts[-1]] = value
    return out


def _axis_values(definition: Experiment, name: str) -> list[Any]:
    if name == "model":
        return list(definition.models) or _space_list(definition, name)
    if name == "panel":
        return list(definition.panels) or _space_list(definition, name)
    return _space_list(definition, name)


def _space_list(definition: Experiment, name: str) -> list[Any]:
    values = definition.space.get(name)
    if values is None:
        return []
    if isinstance(values, Range):
        try:
            return values.values()
        except ValueError:
            return []
    return list(values)


def _where(definition: Experiment, name: str) -> Loc:
    if name == "model" and definition.models:
        return ("models",)
    if name == "panel" and definition.panels:
        return ("panels",)
    return ("space", name)


def _check_common(m: Mechanism, definition: Experiment, extra_base: frozenset[str]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    known = m.decision | m.calls
    for name in definition.space:
        if name not in known:
            problems.append(
                (
                    ("space", name),
                    f"unknown parameter of {m.name}; decision parameters (no calls): "
                    f"{', '.join(sorted(m.decision))}; call parameters: {', '.join(sorted(m.calls))}",
                )
            )
        elif isinstance(definition.space[name], Range):
            try:
                definition.space[name].values()  # type: ignore[union-attr]
            except ValueError as exc:
                problems.append((("space", name), str(exc)))
    for name in definition.base:
        if name not in known | extra_base:
            problems.append((("base", name), f"unknown setting of {m.name}"))
    metrics = set(m.metrics)
    if definition.metric is not None and definition.metric not in metrics:
        problems.append((("metric",), f"unknown metric; one of {', '.join(m.metrics)}"))
    if definition.search is not None:
        if definition.search.metric not in metrics:
            problems.append((("search", "metric"), f"unknown metric; one of {', '.join(m.metrics)}"))
        calls = [n for n in definition.axes() if n not in m.decision]
        if calls:
            problems.append(
                (
                    ("search",),
                    f"a search runs over decision parameters only; {', '.join(calls)} "
                    "need model calls (sweep them as a grid)",
                )
            )
        if not definition.space:
            problems.append((("space",), "a search needs a space of decision parameters"))
    try:
        cases = m.load_cases(definition)
        if not cases:
            problems.append((("cases",), "the case set is empty"))
    except (OSError, ValueError) as exc:
        problems.append((("cases",), str(exc).replace("\n", " ")))
    return problems


def _validate_each(
    definition: Experiment, build: Callable[[dict[str, Any]], Any], names: Sequence[str]
) -> list[tuple[Loc, str]]:
    """Build the settings from the base alone and with each written value of `names`, so a bad value is
    reported at its own line."""
    problems: list[tuple[Loc, str]] = []
    try:
        build({})
    except (ValidationError, ValueError) as exc:
        return [(("base",) + _err_loc(exc), _err_msg(exc))]
    for name in names:
        for i, value in enumerate(_axis_values(definition, name)):
            try:
                build({name: value})
            except (ValidationError, ValueError) as exc:
                where = _where(definition, name)
                problems.append(
                    (
                        (*where, i)
                        if isinstance(definition.space.get(name), list) or where[0] in ("models", "panels")
                        else where,
                        f"{value!r}: {_err_msg(exc)}",
                    )
                )
    return problems


def _err_loc(exc: Exception) -> Loc:
    if isinstance(exc, ValidationError):
        return tuple(str(p) for p in exc.errors()[0]["loc"])
    return ()


def _err_msg(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else str(err["msg"])
    return str(exc)


# -- hand raise ----------------------------------------------------------------------------------------------


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


class HandRaise(Mechanism):
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
    calls: frozenset[str] = frozenset({"model", "judge_method", "judge_model", "context"})
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
            *map(str, _axis_values(definition, "judge_method")),
        }
        swept = [n for n in names if n in ("threshold", "weights.relevance", "weights.novelty", "weights.confidence")]
        if "hybrid" in methods and swept:
            problems.append(
                (
                    _where(definition, swept[0]),
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


# -- jury ------------------------------------------------------------------------------------------------------

JURY_WIDEST_THRESHOLD = 2.0  # never consensus: the discussion runs to its last round
JURY_NO_STAGNATION = 20  # the largest stagnation_rounds: never stops a recording before its last round


@dataclass
class JuryRecord:
    case: Any
    result: Any
    usage: dict[int, tuple[int, int, float]]


@dataclass
class JuryRecording:
    cases: list[JuryRecord] = field(default_factory=list)
    judge: str = "generate"


class JuryMechanism(Mechanism):
    name: str = "jury"
    decision: frozenset[str] = frozenset(
        {"consensus_threshold", "stagnation_rounds", "max_discussion_rounds", "final_judgment_method", "tie_policy"}
    )
    calls: frozenset[str] = frozenset({"panel", "model", "judge", "temperature", "max_tokens"})
    metrics: tuple[str, ...] = (
        "accuracy",
        "phase1_accuracy",
        "kappa_phase1",
        "kappa_final",
        "alpha_phase1",
        "alpha_final",
        "outcome_changed_rate",
        "rounds_mean",
        "no_verdict",
        "calls",
        "tokens",
        "cost",
    )
    default_metric: str = "accuracy"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = {
            "final_judgment_method": "majority_vote",
            **{k: v for k, v in {**base, **params}.items() if k not in ("panel", "model")},
        }
        return JuryConfig.model_validate(merged)

    def widest_rounds(self, definition: Experiment) -> int:
        values = [int(v) for v in _axis_values(definition, "max_discussion_rounds")]
        return max(values) if values else int(definition.base.get("max_discussion_rounds", 3))

    def seats(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[Any]:

        panel = call_params.get("panel", definition.base.get("panel", "local"))
        seats = panel_seats(panel if isinstance(panel, str) else list(panel))
        model = call_params.get("model", definition.base.get("model"))
        if model:
            seats = [s.model_copy(update={"model_id": str(model)}) for s in seats]
        return seats

    def build(self, definition: Experiment, extra: dict[str, Any]) -> Any:
        config = self.config(definition.base, extra)
        if "panel" in extra or "model" in extra or not extra:
            self.seats(definition, extra)
        return config

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = super().checks(definition, source)
        for i, value in enumerate(_axis_values(definition, "final_judgment_method")):
            if value == "final_judge":
                problems.append(
                    (
                        ("space", "final_judgment_method", i),
                        "final_judge needs a model call per cell: "
                        "sweep majority_vote and weighted_average, which are re-decided with no call",
                    )
                )
        if definition.base.get("final_judgment_method") == "final_judge":
            problems.append(
                (
                    ("base", "final_judgment_method"),
                    "final_judge needs a model call per cell: use majority_vote or weighted_average",
                )
            )
        return problems

    def load_cases(self, definition: Experiment) -> list[Any]:

        cases = load_cases(definition.case_path())
        return cases[: definition.limit] if definition.limit else cases

    def models_of(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[str]:
        return sorted({s.model_id for s in self.seats(definition, call_params)})

    def recording_config(self, definition: Experiment, call_params: Mapping[str, Any]) -> Any:
        return self.config(definition.base, call_params).model_copy(
            update={
                "consensus_threshold": JURY_WIDEST_THRESHOLD,
                "stagnation_rounds": JURY_NO_STAGNATION,
                "max_discussion_rounds": self.widest_rounds(definition),
                "final_judgment_method": "majority_vote",
                "skip_idle_rounds": False,  # every round recorded, so each cell can stop where it would
            }
        )

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        models: Models,
        store: Any,
        run_id: str,
    ) -> JuryRecording:

        config = self.recording_config(definition, call_params)
        jury = Jury(self.seats(definition, call_params), models, config)
        out = JuryRecording(judge=config.judge)
        seen = 0  # calls recorded so far, for the progress
        for case in cases:
            checkpoint()
            result = await jury.run(case)
            out.cases.append(JuryRecord(case=case, result=result, usage={}))
            calls = store.call_count(run_id)
            progress(step=f"recorded {case.id}", items=1, calls=calls - seen)
            seen = calls
        usage = call_usage(store, run_id, likelihood=config.judge == "likelihood")  # `auto`: by each call
        for rec in out.cases:
            rec.usage = usage
        return out

    def decide(
        self, definition: Experiment, recording: JuryRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        items = []
        calls = 0
        for rec in recording.cases:
            rubric = rec.case.rubric or Rubric.model_validate({})
            derived = derive_jury(rec.result, config, rubric, rec.usage)
            calls += len(call_ids(derived.phase1_evaluations, derived.discussion_rounds))
            items.append(evaluation_item(rec.case, derived, tie_policy=config.tie_policy))
        totals = evaluation_totals(items, intervals=False)  # per cell: intervals come with the comparison
        return {
            "accuracy": totals["accuracy"],
            "phase1_accuracy": totals["phase1_accuracy"],
            "kappa_phase1": totals["agreement_phase1"]["fleiss_kappa"],
            "kappa_final": totals["agreement_final"]["fleiss_kappa"],
            "alpha_phase1": totals["agreement_phase1"]["krippendorff_alpha"],
            "alpha_final": totals["agreement_final"]["krippendorff_alpha"],
            "agreement_note": totals["agreement_phase1"]["note"],
            "outcome_changed_rate": totals["outcome_changed_rate"],
            "rounds_mean": totals["rounds_mean"],
            "no_verdict": totals["no_verdict"],
            "calls": calls,
            "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
            "cost": totals["cost"],
            OUTCOMES: correct_outcomes([i["correct"] for i in items], [str(i["id"]) for i in items]),
        }

    def recording_json(self, recording: JuryRecording) -> dict[str, Any]:
        return {
            "judge": recording.judge,
            "cases": [
                {"case": r.case.model_dump(mode="json"), "result": r.result.model_dump(mode="json")}
                for r in recording.cases
            ],
        }


def call_usage(store: Any, run_id: str, *, likelihood: bool = False) -> dict[int, tuple[int, int, float]]:
    """Tokens and dollars of each call of a run, as the jury counts them (a likelihood juror's scoring call,
    a request with options: prompt tokens only)."""

    out: dict[int, tuple[int, int, float]] = {}
    for row in store.calls(run_id=run_id, limit=1_000_000):
        if row.id is None:
            continue
        scored = likelihood or json.loads(row.request_json or "{}").get("options") is not None
        out[row.id] = (row.prompt_tokens, 0, 0.0) if scored else (row.prompt_tokens, row.completion_tokens, row.cost)
    return out


# -- confidence --------------------------------------------------------------------------------------------------


@dataclass
class ConfidenceRecording:
    ids: list[str]
    factors: list[Any]
    correct: list[bool]


class ConfidenceMechanism(Mechanism):
    """The labelled set's recorded factors (search, sources, tools, self-confidence, coverage) scored again under
    each cell's weights, inclusion conditions, penalties and level thresholds — `engine.confidence.calculate`,
    pure: no cell makes a call. Metrics: ECE and AURC of the score against correctness, the Brier score, and
    how the levels split (proceed: SILENT/NOTIFY; the share of wrong answers stopped at CONFIRM/ESCALATE)."""

    name: str = "confidence"
    decision: frozenset[str] = frozenset(
        {
            "search_good_max",
            "search_max_weight",
            "search_avg_weight",
            "variance_penalty_factor",
            "variance_penalty_cap",
            "weight_search_quality",
            "weight_tool_success",
            "weight_source_agreement",
            "weight_self_confidence",
            "weight_query_coverage",
            "include_search_quality_above",
            "include_agreement_min_sources",
            "include_self_confidence_above",
            "include_query_coverage_above",
            "penalty_search_no_results",
            "penalty_tool_base",
            "penalty_tool_slope",
            "penalty_no_sources",
            "no_sources_exempt_self_confidence",
            "thresholds.silent",
            "thresholds.notify",
            "thresholds.confirm",
        }
    )
    metrics: tuple[str, ...] = (
        "ece",
        "aurc",
        "brier",
        "accuracy",
        "proceed_rate",
        "proceed_precision",
        "wrong_stopped",
        "calls",
    )
    default_metric: str = "wrong_stopped"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = nested({**base, **params})
        if isinstance(merged.get("thresholds"), dict):
            merged["thresholds"] = {**nested(dict(base)).get("thresholds", {}), **merged["thresholds"]}
        return ConfidenceSettings.model_validate(merged)

    def load_cases(self, definition: Experiment) -> list[Any]:

        path = definition.case_path()
        rows = []
        for number, line in iter_lines(read_text(path)):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                rows.append((str(data["id"]), parse_factors(data["factors"]), bool(data["correct"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
        return rows[: definition.limit] if definition.limit else rows

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> ConfidenceRecording:
        return ConfidenceRecording(
            ids=[c[0] for c in cases], factors=[c[1] for c in cases], correct=[c[2] for c in cases]
        )

    def decide(
        self, definition: Experiment, recording: ConfidenceRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        settings = self.config(definition.base, decision_params)
        scores = [calculate(f, settings).score for f in recording.factors]
        levels = [decide_level(v, settings.thresholds) for v in scores]
        report = calibrate(scores, recording.correct)
        proceed = [lv in (InterventionLevel.SILENT, InterventionLevel.NOTIFY) for lv in levels]
        proceeded = [c for c, p in zip(recording.correct, proceed, strict=True) if p]
        wrong = [p for c, p in zip(recording.correct, proceed, strict=True) if not c]
        n = len(scores)
        return {
            "ece": round(report.ece, 4),
            "aurc": round(report.aurc, 4),
            "brier": round(sum((v - c) ** 2 for v, c in zip(scores, recording.correct, strict=True)) / n, 4),
            "accuracy": round(report.accuracy, 4),
            "proceed_rate": round(sum(proceed) / n, 4),
            "proceed_precision": round(sum(proceeded) / len(proceeded), 4) if proceeded else None,
            "wrong_stopped": round(sum(not p for p in wrong) / len(wrong), 4) if wrong else None,
            "calls": 0,
            OUTCOMES: score_outcomes(scores, recording.correct, proceed, recording.ids),
        }

    def recording_json(self, recording: ConfidenceRecording) -> dict[str, Any]:
        return {
            "cases": [
                {"id": i, "factors": f.model_dump(mode="json"), "correct": c}
                for i, f, c in zip(recording.ids, recording.factors, recording.correct, strict=True)
            ]
        }


# -- skip cache --------------------------------------------------------------------------------------------------


def _run_sync(coro: Any) -> Any:
    """Run a coroutine to its end from sync code, inside a running event loop or not."""

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class SkipRecording:
    messages: list[Any]
    records: dict[str, Any]
    hours: float
    baseline: dict[str, Any]


class SkipMechanism(Mechanism):
    """The skip cache's windows over a workload, judged by recorded judgments (`cases`: a recording of
    `skip simulate --record`, made on the default generated workload): a cell sets the skip thresholds and
    windows, and the periodic checker runs in simulated time against the recording — no model call; a state
    the recording lacks is counted as a failure (`replay_misses`), never judged live. Metrics against the same
    workload without the cache: calls saved, delays to the first judgment, staleness of cached judgments."""

    name: str = "skip"
    decision: frozenset[str] = frozenset(
        {"high_confidence", "high_skip_seconds", "mid_confidence", "mid_skip_seconds", "default_skip_seconds"}
    )
    metrics: tuple[str, ...] = (
        "calls_saved_pct",
        "judge_calls",
        "replies",
        "delay_p95_s",
        "delay_max_s",
        "staleness_p95_s",
        "never_judged",
        "replay_misses",
        "tokens",
        "calls",
    )
    default_metric: str = "calls_saved_pct"
    base_keys: frozenset[str] = frozenset({"hours", "workload"})

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = {
            "high_confidence": 0.9,
            "high_skip_seconds": 43200,
            "mid_confidence": 0.7,
            "mid_skip_seconds": 3600,
            "default_skip_seconds": 600,
            **{k: v for k, v in base.items() if k not in self.base_keys},
            **params,
        }
        thresholds = [
            JudgmentSkipThreshold(min_confidence=merged["high_confidence"], skip_seconds=merged["high_skip_seconds"]),
            JudgmentSkipThreshold(min_confidence=merged["mid_confidence"], skip_seconds=merged["mid_skip_seconds"]),
        ]
        if thresholds[1].min_confidence > thresholds[0].min_confidence:
            raise ValueError("mid_confidence must not be above high_confidence")
        return ResponseConfig.model_validate(
            {
                "judgment_skip": JudgmentSkipConfig(
                    thresholds=thresholds, default_skip_seconds=merged["default_skip_seconds"]
                )
            }
        )

    def spec(self, definition: Experiment) -> Any:

        return WorkloadSpec.model_validate(definition.base.get("workload") or {})

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = super().checks(definition, source)
        try:
            self.spec(definition)
        except ValidationError as exc:
            problems.append((("base", "workload") + _err_loc(exc), _err_msg(exc)))
        hours = definition.base.get("hours")
        if hours is not None and not (isinstance(hours, int | float) and hours > 0):
            problems.append((("base", "hours"), "hours: a positive number"))
        return problems

    def load_cases(self, definition: Experiment) -> list[Any]:

        path = definition.case_path()
        if not path.is_file():
            raise ValueError(f"{path}: no such recording")
        spec = self.spec(definition)
        hours = float(definition.base.get("hours", spec.hours))

        messages = [m for m in generate_workload(spec) if (m.at - EPOCH).total_seconds() < hours * 3600]
        return [(messages, RecordedJudge.load(path).records, hours)]

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> SkipRecording:

        messages, records, hours = cases[0]
        baseline = await simulate(
            messages, RecordedJudge(dict(records)), ResponseConfig.model_validate({}), with_cache=False, hours=hours
        )
        return SkipRecording(messages=messages, records=records, hours=hours, baseline=baseline.summary())

    def decide(
        self, definition: Experiment, recording: SkipRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        result = _run_sync(
            simulate(
                recording.messages, RecordedJudge(recording.records), config, with_cache=True, hours=recording.hours
            )
        )
        summary = result.summary()
        base_calls = recording.baseline["judge_calls"]
        return {
            "calls_saved_pct": round(100 * (1 - summary["judge_calls"] / base_calls), 2) if base_calls else None,
            "judge_calls": summary["judge_calls"],
            "replies": summary["replies"],
            "delay_p95_s": summary["delay_p95_s"],
            "delay_max_s": summary["delay_max_s"],
            "staleness_p95_s": summary["staleness_p95_s"],
            "never_judged": summary["never_judged"],
            "replay_misses": summary["failures"],
            "tokens": summary["tokens"],
            "calls": 0,
        }

    def recording_json(self, recording: SkipRecording) -> dict[str, Any]:
        return {
            "messages": len(recording.messages),
            "recorded_states": len(recording.records),
            "hours": recording.hours,
            "without_cache": recording.baseline,
        }


# -- director ----------------------------------------------------------------------------------------------------


class DirectorMechanism(Mechanism):
    """The director's hard-rule cut-offs over a script: each line's rules are evaluated once (on its own, with
    no conversation state, as `director.rules` benchmarks them), and a cell re-decides the recorded facts
    with `engine.director.retune` — no text processing again, no model. Metrics: the share of lines that pass,
    warn and are sent back (retry)."""

    name: str = "director"
    decision: frozenset[str] = frozenset(
        {
            "format_retry_lines",
            "format_warn_lines",
            "scatter_retry_sentences",
            "scatter_retry_topics",
            "scatter_warn_sentences",
            "scatter_warn_topics",
            "tone_pass",
            "tone_warn",
        }
    )
    base_keys: frozenset[str] = frozenset({"character"})
    metrics: tuple[str, ...] = ("pass_rate", "warn_rate", "retry_rate", "calls")
    default_metric: str = "pass_rate"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        return DirectorConfig.model_validate({k: v for k, v in {**base, **params}.items() if k != "character"})

    def load_cases(self, definition: Experiment) -> list[Any]:

        lines = load_script(definition.case_path())
        lines = lines[: definition.limit] if definition.limit else lines
        default = str(definition.base.get("character", "yana"))
        profiles = {c: load_character(c) for c in {line.character or default for line in lines}}
        return [(line.id, line.text, profiles[line.character or default]) for line in lines]

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> list[Any]:

        config = self.config(definition.base, {})
        return [evaluate_rules(text, profile, config) for _, text, profile in cases]

    def decide(
        self, definition: Experiment, recording: list[Any], decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        statuses = [retune(v, config) for v in recording]
        n = len(statuses) or 1
        return {
            "pass_rate": round(sum(s == Status.PASS for s in statuses) / n, 4),
            "warn_rate": round(sum(s == Status.WARN for s in statuses) / n, 4),
            "retry_rate": round(sum(s == Status.RETRY for s in statuses) / n, 4),
            "calls": 0,
        }

    def recording_json(self, recording: list[Any]) -> dict[str, Any]:
        return {
            "lines": [
                {
                    "status": v.status.name,
                    "rules": [{"rule": r.rule, "status": r.status.name, "facts": r.facts} for r in v.rules],
                }
                for v in recording
            ]
        }


_ADAPTERS: dict[str, Mechanism] = {}  # one adapter per mechanism, made on first use


def mechanism(name: str) -> Mechanism:
    """The experiment adapter of `name`, as its `MechanismSpec.experiment` names it."""
    spec = mechanism_spec(name)
    if not spec.experiment:
        raise ValueError(f"mechanism {name!r} has no experiment adapter")
    if name not in _ADAPTERS:
        adapter: Mechanism = resolve_callable(spec.experiment)()
        _ADAPTERS[name] = adapter
    return _ADAPTERS[name]
