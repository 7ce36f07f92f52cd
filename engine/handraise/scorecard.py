"""The hand raise's row of the model scorecard (`engine.experiments.scorecard`): F1, top-1 (the most willing
participant is one who should speak) and consistency over repeats, on data/benchmarks/handraise.jsonl
(`engine.handraise.run_benchmark`, one stored run) for each model and judge method; compared with the role's best by
a paired bootstrap of F1 over dialogues (their evaluation runs). F1 by language too (`f1_en`, `f1_ja`)."""

from __future__ import annotations

from typing import Any

from engine import stats
from engine.config import DATA_DIR
from engine.experiments.scorecard import built_models, by_language
from engine.handraise.benchmark import parse_benchmark, run_benchmark
from engine.handraise.decisions import HandRaiseConfig
from engine.inputs import read_text
from engine.mechanism import RoleStep, ScorecardHooks
from engine.outcomes import diff_runs
from engine.store import Store


async def run_handraise(step: RoleStep) -> dict[str, Any]:
    model_id, method = step.named()
    built = built_models(step.models, step.store)
    path = DATA_DIR / "benchmarks" / "handraise.jsonl"
    items = parse_benchmark(read_text(path), str(path))[: step.plan.limit]
    run_id, lines, totals = await run_benchmark(
        step.store,
        items,
        built,
        HandRaiseConfig(judge_method=method, judge_model=model_id),  # the row's model judges (not only the cast)
        "3",
        repeat=step.plan.repeats,
        model_ids=[model_id],
        name=f"scorecard {model_id} {method}",
    )
    return {
        "metrics": {
            **{k: totals.get(k) for k in ("f1", "f1_ci", "top1", "top1_ci", "consistency", "consistency_ci")},
            **by_language(totals.get("by_language") or {}, ("f1",)),  # English and Japanese apart
        },
        "runs": [run_id],
    }


def paired_handraise(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    a, b = store.get_run(best["runs"][-1]), store.get_run(row["runs"][-1])
    if a is None or b is None:
        return None
    return diff_runs(store, a, b).comparisons.get("f1")


HOOKS = ScorecardHooks(run_handraise, paired=paired_handraise)
