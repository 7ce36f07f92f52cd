"""The jury's row of the model scorecard (`engine.experiments.scorecard`): accuracy, Fleiss κ / Krippendorff α before
and after the discussion and the outcomes it changed, on data/benchmarks/jury.jsonl (an experiment cell: the local
panel seated on the model), for each model and judge method; compared with the role's best by exact McNemar on the
cells' stored right/wrong per case."""

from __future__ import annotations

from typing import Any

from engine import stats
from engine.config import DATA_DIR
from engine.experiments.adapters import mechanism
from engine.experiments.definition import Experiment
from engine.experiments.run import run_experiment
from engine.mechanism import RoleStep, ScorecardHooks
from engine.store import Store


async def run_jury(step: RoleStep) -> dict[str, Any]:
    model_id, method = step.named()
    definition = Experiment.model_validate(
        {
            "name": f"scorecard jury {model_id} {method}",
            "mechanism": "jury",
            "cases": str(DATA_DIR / "benchmarks" / "jury.jsonl"),
            "limit": step.plan.limit,
            "base": {
                "panel": "local-gemma",
                "model": model_id,
                "judge": method,
                "final_judgment_method": "majority_vote",
            },
        }
    )
    result = await run_experiment(definition, step.store, step.models, executor=step.executor)
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


def paired_jury(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    cells = [store.get_run(r["runs"][-1]) for r in (best, row)]
    rights = [str((c.summary.get("outcomes") or {}).get("right", "")) if c else "" for c in cells]
    if not all(rights) or len(rights[0]) != len(rights[1]):
        return None
    pairs = [(x, y) for x, y in zip(rights[0], rights[1], strict=True) if "-" not in (x, y)]
    return stats.compare_correct([x == "1" for x, _ in pairs], [y == "1" for _, y in pairs])


HOOKS = ScorecardHooks(run_jury, paired=paired_jury)
