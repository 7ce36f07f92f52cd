"""The model scorecard: a built-in experiment that, for every model and judge method asked, runs each
mechanism's shipped benchmark and stores the runs, so a user sees which model and method fit which role.

- hand raise: F1, top-1 (the most willing participant is one who should speak) and consistency over
  repeats, on data/benchmarks/handraise.jsonl (`engine.handraise.run_benchmark`, one stored run);
- skip judge: AUC of the recorded judgments against the generated workload's labels and the calls the cache
  saves (an experiment cell over the recording made with each model: data/recordings/skipcache-default.jsonl is
  the bundled Gemma's by likelihood, skipcache-<model>.jsonl another's; a model without one says how to make it);
- jury: accuracy, Fleiss κ / Krippendorff α before and after the discussion and the outcomes it changed, on
  data/benchmarks/jury.jsonl (an experiment cell: the local panel seated on the model);
- director rubric: agreement of the LLM rubric's status with the hard rules' on the shipped script
  (`engine.director.run_script`, one stored run);
- confidence: ECE on the labelled set, from its recorded factors (no model) and with each model's own
  self-evaluation in place of the recorded one (likelihood where the model can score, generated otherwise).

Within a role, every row is compared with the role's best on the same items (`compare_with_best`).

Each row carries latency (median per call) and tokens, read from the calls its runs recorded, and the ids of
those runs. The scorecard itself is a run of kind `scorecard` whose summary holds the rows.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine import stats
from engine.confidence import (
    CalibrationConfig,
    LabelledItem,
    LikelihoodSelfEvaluator,
    LLMSelfEvaluator,
    calibration_report,
    parse_factors,
)
from engine.config import DATA_DIR
from engine.diagnostics import Diagnosis, auc_vs_chance, flat_scale
from engine.director import DirectorConfig, ScriptConfig, load_script, rubric_status, run_script
from engine.events import async_run_context
from engine.experiments.adapters import mechanism
from engine.experiments.adapters.base import Models
from engine.experiments.definition import Experiment
from engine.experiments.execution import HubModels
from engine.experiments.run import run_experiment
from engine.handraise import HandRaiseConfig, parse_benchmark, run_benchmark
from engine.inputs import InputError, iter_lines, read_text
from engine.mechanism import ScorecardRole, mechanism_spec, resolve_callable, scorecard_roles
from engine.outcomes import diff_runs
from engine.reliability import rank_auc
from engine.runctx import progress
from engine.skip import (
    RecordedJudge,
    WorkloadSpec,
    calls_saved_interval,
    generated_labels,
    judge_quality,
    judged_states,
    simulate,
)
from engine.store import Store
from models.errors import ModelError, ReplayMiss

SCORECARD = "scorecard"
HANDRAISE_METHODS = ("judge", "likelihood")
JURY_METHODS = ("generate", "likelihood")
DIRECTOR_METHODS = ("generate", "likelihood")  # DirectorConfig.rubric_judge
SKIP_RECORDING_MODEL = ("gemma3-270m", "likelihood")  # who recorded data/recordings/skipcache-default.jsonl
Step = tuple[str | None, str | None]  # (model, method) of one row


@dataclass(frozen=True)
class Target:
    """What "good enough for this role" means: the metric, its direction and the bar (from the seeds and the
    README's goals)."""

    metric: str
    higher_is_better: bool
    value: float
    source: str

    @property
    def text(self) -> str:
        return f"{self.metric} {'≥' if self.higher_is_better else '≤'} {self.value:g}"


def roles() -> tuple[str, ...]:
    """The scorecard's roles in its order: every registered mechanism with a `ScorecardRole`."""
    return tuple(scorecard_roles())


def _role(name: str) -> ScorecardRole:
    role = mechanism_spec(name).scorecard
    if role is None:
        raise ValueError(f"mechanism {name!r} has no scorecard role")
    return role


def targets() -> dict[str, Target]:
    """Each role's target, from its mechanism's `ScorecardRole`."""
    return {name: Target(r.metric, r.higher_is_better, r.target, r.source) for name, r in scorecard_roles().items()}


MARKS = {
    "good": "✅ good enough",
    "not_good": "❌ not good enough",
    "undecided": "❔ undecided",
    "unmeasured": "– not measured",
}


def target_mark(role: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The row against its role's target, by its interval: good enough when the whole interval clears the bar,
    not good enough when the whole interval misses it, undecided when the interval straddles it (more items
    would tell), unmeasured without a figure or an interval."""
    target = targets()[role]
    value, interval = metrics.get(target.metric), metrics.get(f"{target.metric}_ci")
    out: dict[str, Any] = {"metric": target.metric, "target": target.text, "source": target.source}
    if not isinstance(value, int | float) or not isinstance(interval, list) or len(interval) != 2:
        return out | {"mark": "unmeasured", "label": MARKS["unmeasured"]}
    low, high = float(interval[0]), float(interval[1])
    clears = (low >= target.value) if target.higher_is_better else (high <= target.value)
    misses = (high < target.value) if target.higher_is_better else (low > target.value)
    mark = "good" if clears else "not_good" if misses else "undecided"
    figure = stats.fmt(float(value), stats.Interval(low, high, "stored", 0))
    return out | {"mark": mark, "label": MARKS[mark], "text": f"{target.metric} {figure} against {target.text}"}


@dataclass(frozen=True)
class ScorecardPlan:
    """What to run: models × methods per role; `limit` cuts every case set (a quick scorecard)."""

    models: Sequence[str]
    roles: Sequence[str] = field(default_factory=roles)
    handraise_methods: Sequence[str] = HANDRAISE_METHODS
    jury_methods: Sequence[str] = JURY_METHODS
    director_methods: Sequence[str] = DIRECTOR_METHODS
    repeats: int = 2
    limit: int | None = None
    can_score: Callable[[str], bool] = field(default=lambda model_id: True)


def _models(models: Models | HubModels, store: Store) -> Models:
    return models.build(store) if isinstance(models, HubModels) else models


def usage(store: Store, run_ids: Sequence[str]) -> dict[str, Any]:
    """Calls, tokens and the median latency per call of the calls these runs recorded. The latency is the live
    calls' (a replayed call takes no time: a scorecard measured in several sittings replays what it made before),
    and `replayed` says how many were replayed."""
    rows = [c for r in run_ids for c in store.calls(run_id=r, limit=1_000_000)]
    live = [c for c in rows if c.would_cost is None]
    latencies = [float(c.latency_s) for c in live if c.latency_s is not None]
    return {
        "calls": len(rows),
        "replayed": len(rows) - len(live),
        "tokens": sum(int(c.prompt_tokens or 0) + int(c.completion_tokens or 0) for c in rows),
        "latency_s": round(statistics.median(latencies), 4) if latencies else None,
    }


async def run_handraise(
    store: Store, models: Models | HubModels, model_id: str, method: str, plan: ScorecardPlan, executor: str
) -> dict[str, Any]:
    built = _models(models, store)
    path = DATA_DIR / "benchmarks" / "handraise.jsonl"
    items = parse_benchmark(read_text(path), str(path))[: plan.limit]
    run_id, lines, totals = await run_benchmark(
        store,
        items,
        built,
        HandRaiseConfig(judge_method=method, judge_model=model_id),  # the row's model judges (not only the cast)
        "3",
        repeat=plan.repeats,
        model_ids=[model_id],
        name=f"scorecard {model_id} {method}",
    )
    return {
        "metrics": {k: totals.get(k) for k in ("f1", "f1_ci", "top1", "top1_ci", "consistency", "consistency_ci")},
        "runs": [run_id],
    }


async def run_jury(
    store: Store, models: Models | HubModels, model_id: str, method: str, plan: ScorecardPlan, executor: str
) -> dict[str, Any]:
    definition = Experiment.model_validate(
        {
            "name": f"scorecard jury {model_id} {method}",
            "mechanism": "jury",
            "cases": str(DATA_DIR / "benchmarks" / "jury.jsonl"),
            "limit": plan.limit,
            "base": {"panel": "local", "model": model_id, "judge": method, "final_judgment_method": "majority_vote"},
        }
    )
    result = await run_experiment(definition, store, models, executor=executor)
    row = result.rows[0]
    keys = ("accuracy", "phase1_accuracy", "kappa_phase1", "kappa_final", "alpha_phase1", "alpha_final")

    graded = sum(case.gold is not None for case in mechanism("jury").load_cases(definition))
    cis = {f"{k}_ci": _wilson_list(row.get(k), graded) for k in ("accuracy", "phase1_accuracy", "outcome_changed_rate")}
    return {
        "metrics": {
            **{k: row.get(k) for k in keys},
            "outcome_changed_rate": row.get("outcome_changed_rate"),
            **cis,
            "cases": graded,
        },
        "runs": [row["recording_run"], row["run_id"]],
    }


def _wilson_list(rate: object, n: int) -> list[float] | None:
    """The Wilson interval of a rate stored without its count, from the number of items it is a share of."""
    if not isinstance(rate, int | float) or isinstance(rate, bool) or n <= 0:
        return None
    interval = stats.wilson(round(float(rate) * n), n)
    return interval.as_list() if interval else None


async def run_director(
    store: Store, models: Models | HubModels, model_id: str, method: str, plan: ScorecardPlan, executor: str
) -> dict[str, Any]:
    built = _models(models, store)
    lines = load_script(DATA_DIR / "scripts" / "beach.jsonl")[: plan.limit]
    result = await run_script(
        ScriptConfig(
            lines=lines,
            character="yana",
            source="beach.jsonl",
            model_id=model_id,
            director=DirectorConfig.model_validate({"rubric_judge": method}),
        ),
        built,
        store,
    )
    scored = [r for r in result.rows if r.rubric is not None and not r.rubric_failed]
    averages = [(r.rubric, r.rules_status) for r in scored if r.rubric is not None]
    agree = sum(rubric_status(avg).name == status for avg, status in averages)
    # The level agreement needs the rubric's scale to match the cut-offs; the AUC asks only whether the rubric
    # ranks the lines the rules pass above the lines they flag (0.5: no signal).
    auc = rank_auc([a for a, s in averages if s == "PASS"], [a for a, s in averages if s != "PASS"])
    agreement_ci = stats.wilson(agree, len(averages))
    auc_ci = stats.bootstrap(stats.w_auc([a for a, _ in averages], [s == "PASS" for _, s in averages]))[1]
    cfg = DirectorConfig.model_validate({"rubric_judge": method})
    scale = flat_scale(
        f"director rubric · {model_id} · {method}", [a for a, _ in averages], cutoffs=(cfg.rubric_warn, cfg.rubric_pass)
    )
    auc_value = None if auc is None else round(auc, 3)
    signal = auc_vs_chance(f"director rubric · {model_id} · {method}", auc_value, auc_ci, len(averages))
    return {
        "metrics": {
            "agreement": round(agree / len(averages), 4) if averages else None,
            "agreement_ci": agreement_ci.as_list() if agreement_ci else None,
            "auc_rules_pass": auc_value,
            "auc_rules_pass_ci": auc_ci.as_list(3) if auc_ci else None,
            "scale": scale.to_dict(),
            "signal": signal.to_dict(),  # does the rubric rank the lines the rules pass above those they flag?
            "lines_scored": len(scored),
            "rubric_failed": sum(r.rubric_failed for r in result.rows),
        },
        "runs": [result.run_id],
    }


SKIP_RECORDINGS = {  # the shipped recordings of the default workload: model → (file, how it judged)
    SKIP_RECORDING_MODEL[0]: ("skipcache-default.jsonl", SKIP_RECORDING_MODEL[1]),
    "smollm2-135m": ("skipcache-smollm2-135m.jsonl", "likelihood"),  # `judgelab skip record`, the same states
}


def skip_recording(model_id: str) -> Path:
    """The skip judge's recording made with `model_id` on the default workload: a shipped one, else
    `skipcache-<model>.jsonl` beside them."""
    name = SKIP_RECORDINGS.get(model_id, (f"skipcache-{model_id}.jsonl", ""))[0]
    return DATA_DIR / "recordings" / name


def skip_method(model_id: str, can_score: bool) -> str:
    """How the model's recording judges: as it was shipped; another by likelihood where the model can score, by
    structured JSON otherwise (what `judgelab skip record --mode` is told to record it with)."""
    if model_id in SKIP_RECORDINGS:
        return SKIP_RECORDINGS[model_id][1]
    return "likelihood" if can_score else "structured"


def _shown_path(path: Path) -> str:
    """A path as a row keeps it: relative to the checkout when inside it (a shipped scorecard stays valid on
    another machine), absolute otherwise."""
    return str(path.relative_to(DATA_DIR.parent)) if path.is_relative_to(DATA_DIR.parent) else str(path)


def _skip_scored(path: Path) -> dict[str, tuple[float, bool]]:
    """Each judged state of the default workload in a recording: p(respond) and the generator's label."""

    definition = Experiment.model_validate({"name": "scorecard skip", "mechanism": "skip", "cases": str(path)})
    messages = mechanism("skip").load_cases(definition)[0][0]
    return judged_states(RecordedJudge.load(path), generated_labels(messages))


async def run_skip(
    store: Store, models: Models | HubModels, model_id: str, method: str, plan: ScorecardPlan, executor: str
) -> dict[str, Any]:

    path = skip_recording(model_id)
    if not path.is_file():
        raise LookupError(
            f"no skip recording made with {model_id}: make one with `judgelab skip record --model {model_id} "
            f"--mode {method} --output {_shown_path(path)}`"
        )
    definition = Experiment.model_validate(
        {"name": f"scorecard skip {model_id}", "mechanism": "skip", "cases": str(path)}
    )
    result = await run_experiment(definition, store, executor=executor)
    row = result.rows[0]

    messages = mechanism("skip").load_cases(definition)[0][0]
    quality = judge_quality(RecordedJudge.load(path), generated_labels(messages))
    # the saving's interval over conversation scopes: both simulations again on the recording (no model)
    hours = WorkloadSpec().hours
    without, with_ = [
        await simulate(messages, RecordedJudge.load(path), with_cache=cached, hours=hours) for cached in (False, True)
    ]
    return {
        "metrics": {
            "auc": quality["auc"],
            "auc_ci": quality["auc_ci"],
            "accuracy": quality["accuracy"],
            "accuracy_ci": quality["accuracy_ci"],
            "calls_saved_pct": row.get("calls_saved_pct"),
            "calls_saved_pct_ci": calls_saved_interval(without, with_),
            "states": quality["judged_states"],
            "replay_misses": row.get("replay_misses"),  # states the recording lacks (a failed judgment each)
        },
        "runs": [row["recording_run"], row["run_id"]],
        # its calls were made when the recording was, not in this run
        "usage": {"calls": 0, "replayed": 0, "tokens": row.get("tokens"), "latency_s": None},
        "recording": _shown_path(path),
    }


def _confidence_items(plan: ScorecardPlan) -> list[tuple[Any, str]]:
    """The labelled set as calibration items, each with its answer (what a self-evaluation reads)."""

    path = DATA_DIR / "benchmarks" / "confidence.jsonl"
    out = []
    for number, line in iter_lines(read_text(path)):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            item = LabelledItem(
                id=str(data["id"]),
                query=str(data.get("query", "")),
                correct=bool(data["correct"]),
                factors=parse_factors(data["factors"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
        out.append((item, str(data.get("answer", ""))))
    return out[: plan.limit] if plan.limit else out


async def run_confidence(
    store: Store, models: Models | HubModels, model_id: str | None, method: str, plan: ScorecardPlan, executor: str
) -> dict[str, Any]:
    """ECE (and AUC, AURC, Brier) of the default score on the labelled set, as a stored `confidence.calibrate`
    run: with the recorded factors (`model_id` None), or with the model's own self-evaluation of each answer
    in place of the recorded `llm_self_confidence` — the one factor a model derives here."""

    source = None if model_id is None else _models(models, store)
    pairs = _confidence_items(plan)
    items = [item for item, _ in pairs]
    name = "confidence.jsonl" if model_id is None else f"confidence.jsonl · self-evaluation by {model_id} ({method})"
    flagged = 0
    # the input as `confidence.calibrate` stores it, and who derived the self-evaluation (each value an event)
    config = CalibrationConfig(labels=name, items=items).model_dump(mode="json")
    if model_id is not None:
        config["self_evaluation"] = {"model": model_id, "method": method}
    async with async_run_context(store, "confidence.calibrate", config, name=name) as run:
        if model_id is not None:
            assert source is not None
            model = source(model_id)
            evaluator = LikelihoodSelfEvaluator(model) if method == "likelihood" else LLMSelfEvaluator(model)
            progress(total=len(pairs), step=f"self-evaluation by {model_id}")
            derived = []
            for item, answer in pairs:
                factor = await evaluator.evaluate(item.query, answer)
                flagged += factor.flagged
                run.emit("self_evaluated", id=item.id, value=factor.value, flagged=factor.flagged, detail=factor.detail)
                update = {"llm_self_confidence": factor.value}
                derived.append(item.model_copy(update={"factors": item.factors.model_copy(update=update)}))
                progress(advance=1)
            items = derived
        report = calibration_report(items)
        run.emit("confidence_calibrated", **{k: v for k, v in report.items() if k != "items"})
        run.summary = {"n": report["n"], "ece": report["ece"], "aurc": report["aurc"], "result": report}
    keys = ("ece", "ece_ci", "auc", "auc_ci", "aurc", "aurc_ci", "brier", "brier_ci")
    return {
        "metrics": {
            **{k: round(report[k], 4) if isinstance(report[k], float) else report[k] for k in keys},
            "items": len(items),
            **({"self_evaluation_fallbacks": flagged} if model_id is not None else {}),
        },
        "runs": [run.run_id],
    }


def _by_method(plan: ScorecardPlan, model_id: str | None, methods: Sequence[str]) -> list[Step]:
    assert model_id is not None
    return [(model_id, m) for m in methods if m != "likelihood" or plan.can_score(model_id)]


def handraise_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return _by_method(plan, model_id, plan.handraise_methods)


def jury_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return _by_method(plan, model_id, plan.jury_methods)


def director_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return _by_method(plan, model_id, plan.director_methods)


def skip_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return [(m, skip_method(m, plan.can_score(m))) for m in plan.models]


def confidence_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return [(None, "factors"), *((m, "likelihood" if plan.can_score(m) else "generate") for m in plan.models)]


def _steps(plan: ScorecardPlan) -> list[tuple[str, str | None, str | None]]:
    """Every role × model × method to run: each model through the per-model roles in turn, then the roles that
    take every model at once (the skip judge's recordings, the confidence set)."""
    chosen = [(name, role) for name, role in scorecard_roles().items() if name in plan.roles]
    steps: list[tuple[str, str | None, str | None]] = []
    for model_id in plan.models:
        for name, role in chosen:
            if role.per_model:
                steps += [(name, *step) for step in resolve_callable(role.steps)(plan, model_id)]
    for name, role in chosen:
        if not role.per_model:
            steps += [(name, *step) for step in resolve_callable(role.steps)(plan, None)]
    return steps


async def run_scorecard(
    store: Store,
    plan: ScorecardPlan,
    models: Models | HubModels | None = None,
    *,
    executor: str = "local",
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the scorecard as a stored run of kind `scorecard`; each row is one role × model × method with its
    metrics, latency and tokens, and the runs that hold its calls. A role that fails for a model is a row
    with its error (the others still run). `on_row` gets the scorecard so far after each row (the CLI writes
    it out, so a sitting cut short keeps every row it finished)."""
    models = models if models is not None else HubModels()
    steps = _steps(plan)
    config = {
        "models": list(plan.models),
        "roles": list(plan.roles),
        "limit": plan.limit,
        "repeats": plan.repeats,
        "executor": executor,
    }
    rows: list[dict[str, Any]] = []
    async with async_run_context(store, SCORECARD, config, name="model scorecard") as run:
        progress(total=len(steps), step="starting")
        for role, model_id, method in steps:
            row: dict[str, Any] = {"role": role, "model": model_id, "method": method}
            try:
                out = await resolve_callable(_role(role).run)(store, models, model_id, method, plan, executor)
            except (ValueError, OSError, LookupError, ModelError, ReplayMiss) as exc:  # RunCancelled propagates
                row.update({"metrics": {}, "runs": [], "error": " ".join(str(exc).split())[:300]})
            else:
                spent = out.get("usage") or usage(store, out["runs"])
                row.update({"metrics": out["metrics"], **spent, "runs": out["runs"], "error": None})
                if "recording" in out:
                    row["recording"] = out["recording"]
            row["target"] = target_mark(role, row["metrics"])
            rows.append(row)
            run.emit("scorecard_row", **row)
            progress(advance=1, step=f"{role} {model_id or ''} {method or ''}".strip())
            if on_row is not None:
                on_row({"run_id": run.run_id, "rows": list(rows), **config})
        compare_with_best(store, rows)
        run.summary = {"rows": rows}
    return {"run_id": run.run_id, "rows": rows, **config}


SHIPPED = DATA_DIR / "scorecard" / "bundled.json"


def save_scorecard(result: dict[str, Any], path: Path, command: str | None = None) -> None:
    """A scorecard as JSON (rows with their targets and marks), with when and where it was measured and the
    commands that measured it (`commands`: this one added to those of the rows it was merged with)."""

    shipped = {
        **result,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "commands": list(dict.fromkeys([*result.get("commands", []), *([command] if command else [])])),
    }
    path.write_text(json.dumps(shipped, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")


def shipped_scorecard(path: Path | None = None) -> dict[str, Any] | None:
    """The scorecard measured on the bundled models and shipped in data/ (None when absent or unreadable:
    the page then says no scorecard has been run)."""

    path = path or SHIPPED
    if not path.is_file():
        return None
    try:
        data = json.loads(read_text(path))
    except (InputError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("rows"), list) else None


# Each row against the role's best row on the same items: hand-raise F1 by a paired bootstrap over dialogues
# (their evaluation runs), jury accuracy and director agreement by exact McNemar (the cells' stored right/wrong
# per case; each line's rubric level against the rules'), skip AUC by a paired bootstrap over the conversation
# states both recordings judged, confidence ECE by a paired bootstrap over the labelled items (their calibration
# runs' scores).


def paired_handraise(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    a, b = store.get_run(best["runs"][-1]), store.get_run(row["runs"][-1])
    if a is None or b is None:
        return None
    return diff_runs(store, a, b).comparisons.get("f1")


def paired_jury(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    cells = [store.get_run(r["runs"][-1]) for r in (best, row)]
    rights = [str((c.summary.get("outcomes") or {}).get("right", "")) if c else "" for c in cells]
    if not all(rights) or len(rights[0]) != len(rights[1]):
        return None
    pairs = [(x, y) for x, y in zip(rights[0], rights[1], strict=True) if "-" not in (x, y)]
    return stats.compare_correct([x == "1" for x, _ in pairs], [y == "1" for _, y in pairs])


def paired_skip(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    paths = [DATA_DIR.parent / str(r.get("recording") or "") for r in (best, row)]
    if not all(path.is_file() for path in paths):
        return None
    judged_a, judged_b = (_skip_scored(path) for path in paths)
    shared = sorted(set(judged_a) & set(judged_b))
    labels = [judged_a[k][1] for k in shared]
    return stats.paired_bootstrap(
        stats.w_auc([judged_a[k][0] for k in shared], labels), stats.w_auc([judged_b[k][0] for k in shared], labels)
    )


def paired_director(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    agreed = [_director_agreement(store, r["runs"][-1]) for r in (best, row)]
    shared = sorted(set(agreed[0]) & set(agreed[1]))
    if not shared:
        return None
    return stats.compare_correct([agreed[0][k] for k in shared], [agreed[1][k] for k in shared])


def paired_confidence(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    scored = [_calibration_scores(store, r["runs"][-1]) for r in (best, row)]
    if not all(scored):
        return None
    shared = sorted(set(scored[0]) & set(scored[1]))
    correct = [scored[0][k][1] for k in shared]
    return stats.paired_bootstrap(
        stats.w_ece([scored[0][k][0] for k in shared], correct),
        stats.w_ece([scored[1][k][0] for k in shared], correct),
    )


def _paired(store: Store, role: str, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    """Row against the role's best row on the same items, by the role's `ScorecardRole.paired` (None: none)."""
    paired = _role(role).paired
    if not paired:
        return None
    comparison: stats.Comparison | None = resolve_callable(paired)(store, best, row)
    return comparison


def _director_agreement(store: Store, run_id: str) -> dict[str, bool]:
    """Each line the rubric scored in a `director.batch` run: whether its level agrees with the hard rules'."""
    out = {}
    for event in store.events(run_id):
        p = event.payload
        if event.type == "director_line" and isinstance(p.get("rubric"), int | float) and not p.get("rubric_failed"):
            out[str(p["id"])] = rubric_status(float(p["rubric"])).name == p.get("rules_status")
    return out


def _calibration_scores(store: Store, run_id: str) -> dict[str, tuple[float, bool]]:
    """Each labelled item's score and correctness, from a `confidence.calibrate` run's stored report."""
    run = store.get_run(run_id)
    items = ((run.summary.get("result") or {}).get("items") or []) if run else []
    return {str(i["id"]): (float(i["score"]), bool(i["correct"])) for i in items}


def compare_with_best(store: Store, rows: list[dict[str, Any]]) -> None:
    """For every role where more than one row measured the same items, each row's difference from the role's
    best row (by the role's target metric and direction), its paired interval and p-value (`versus_best`), in
    place."""
    marks = targets()
    for role in roles():
        target = marks[role]
        scored = [
            r
            for r in rows
            if r["role"] == role and not r.get("error") and isinstance(r["metrics"].get(target.metric), int | float)
        ]
        for row in rows:
            if row["role"] == role:
                row.pop("versus_best", None)
        if len(scored) < 2:
            continue
        pick = max if target.higher_is_better else min
        best = pick(scored, key=lambda r: r["metrics"][target.metric])
        for row in scored:
            if row is best:
                row["versus_best"] = {"best": True}
                continue
            comparison = _paired(store, role, best, row)
            if comparison is not None:
                row["versus_best"] = {
                    "best_model": best["model"],
                    "best_method": best["method"],
                    **comparison.to_dict(),
                }


def merge_scorecards(old: dict[str, Any] | None, new: dict[str, Any], store: Store) -> dict[str, Any]:
    """`new` over `old`: a row of `new` replaces the row of `old` with the same role, model and method, the
    others of `old` stay (so the roles can be measured one command at a time, each a few minutes), and every
    role's rows are compared with its best again (their runs must be in `store`). The models and roles are
    the union; `run_ids` lists every scorecard run the rows came from."""
    if old is None:
        return {**new, "run_ids": [new["run_id"]]}

    def key(row: dict[str, Any]) -> tuple[str, str, str]:
        return (str(row["role"]), str(row.get("model")), str(row.get("method")))

    fresh = {key(r): r for r in new["rows"]}
    rows = [fresh.pop(key(r), r) for r in old.get("rows", [])] + list(fresh.values())
    order = roles()
    rows.sort(key=lambda r: order.index(r["role"]) if r["role"] in order else len(order))
    compare_with_best(store, rows)
    return {
        **old,
        **new,
        "rows": rows,
        "models": list(dict.fromkeys([*old.get("models", []), *new.get("models", [])])),
        "roles": [r for r in order if r in {*old.get("roles", []), *new.get("roles", [])}],
        "run_ids": list(dict.fromkeys([*old.get("run_ids", [old.get("run_id")]), new["run_id"]])),
    }


def latest_scorecard(store: Store) -> dict[str, Any] | None:
    """The newest finished scorecard run: its id, when it ran, and its rows."""
    for r in store.list_runs(SCORECARD, limit=50):
        if r.kind == SCORECARD and r.status == "finished" and "rows" in r.summary:
            return {"run_id": r.id, "started_at": r.started_at.isoformat(), "rows": r.summary["rows"], **r.config}
    return None


def rubric_diagnoses(
    store: Store | None, model_id: str, method: str, scorecard: dict[str, Any] | None = None
) -> list[Diagnosis]:
    """What the scorecard found about the director rubric judged by `model_id` with `method`: whether it ranks
    the lines the rules pass above those they flag (no measurable signal when its AUC interval contains 0.5) and
    whether its scale moves (flat scale), from the newest scorecard in `store` that measured it, else the shipped
    one. Empty when none did: the Director page then says nothing it has not measured."""
    sources: list[dict[str, Any] | None]
    if scorecard is not None:
        sources = [scorecard]
    else:
        sources = [latest_scorecard(store) if store is not None else None, shipped_scorecard()]
    for scorecard in sources:
        for row in (scorecard or {}).get("rows", []):
            if row.get("role") != "director" or row.get("model") != model_id or row.get("method") != method:
                continue
            if row.get("error"):
                continue
            metrics = row.get("metrics") or {}
            found = [Diagnosis.from_dict(metrics[k]) for k in ("signal", "scale") if isinstance(metrics.get(k), dict)]
            if "signal" not in metrics and isinstance(metrics.get("auc_rules_pass"), int | float):
                ci = metrics.get("auc_rules_pass_ci")  # a row stored before the signal was: from its figures
                interval = stats.Interval(ci[0], ci[1], "stored", 0) if isinstance(ci, list) and len(ci) == 2 else None
                judge = f"director rubric · {model_id} · {method}"
                lines = int(metrics.get("lines_scored") or 0)
                found.insert(0, auc_vs_chance(judge, float(metrics["auc_rules_pass"]), interval, lines))
            return found
    return []


def scorecard_judge_diagnoses(scorecard: dict[str, Any] | None = None) -> list[Diagnosis]:
    """The judges the scorecard diagnosed that have no shipped map (the director rubric, per model and method):
    listed with the shipped maps' diagnoses (`judgelab models judges`, the Models page). From the shipped
    scorecard unless another is given."""
    scorecard = scorecard if scorecard is not None else shipped_scorecard()
    out: list[Diagnosis] = []
    for row in (scorecard or {}).get("rows", []):
        if row.get("role") == "director" and not row.get("error") and row.get("model"):
            out += rubric_diagnoses(None, str(row["model"]), str(row["method"]), scorecard)
    return out
