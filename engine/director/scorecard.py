"""The director rubric's row of the model scorecard (`engine.experiments.scorecard`): agreement of the LLM rubric's
status with the hard rules' on the shipped script (`engine.director.run_script`, one stored run), for each model and
judge method; compared with the role's best by exact McNemar on each line's rubric level against the rules'. Also
what the scorecard found about a rubric judge (`rubric_diagnoses`), for the Director page and `judgelab models
judges`."""

from __future__ import annotations

from typing import Any

from engine import stats
from engine.config import DATA_DIR
from engine.diagnostics import Diagnosis, auc_vs_chance, flat_scale
from engine.director.batch import ScriptConfig, run_script
from engine.director.config import DirectorConfig
from engine.director.rubric import rubric_status
from engine.director.scripts import load_script
from engine.director.signals import READER
from engine.experiments.scorecard import ScorecardPlan, built_models, by_method, latest_scorecard, shipped_scorecard
from engine.mechanism import RoleStep, ScorecardHooks
from engine.reliability import rank_auc
from engine.store import Store


def director_steps(plan: ScorecardPlan, model_id: str | None) -> list[tuple[str | None, str | None]]:
    """The model with each judge method the plan picks: likelihood where it can score, the signals only for the
    bundled Gemma (their maps read its log-probabilities) where it can score."""
    assert model_id is not None
    steps = by_method(plan, "director", model_id)
    return [(m, how) for m, how in steps if how != "signals" or (m == READER and plan.can_score(m))]


async def run_director(step: RoleStep) -> dict[str, Any]:
    model_id, method = step.named()
    built = built_models(step.models, step.store)
    lines = load_script(DATA_DIR / "scripts" / "beach.jsonl")[: step.plan.limit]
    result = await run_script(
        ScriptConfig(
            lines=lines,
            character="yana",
            source="beach.jsonl",
            model_id=model_id,
            director=DirectorConfig.model_validate({"rubric_judge": method}),
        ),
        built,
        step.store,
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


def paired_director(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    agreed = [_director_agreement(store, r["runs"][-1]) for r in (best, row)]
    shared = sorted(set(agreed[0]) & set(agreed[1]))
    if not shared:
        return None
    return stats.compare_correct([agreed[0][k] for k in shared], [agreed[1][k] for k in shared])


def _director_agreement(store: Store, run_id: str) -> dict[str, bool]:
    """Each line the rubric scored in a `director.batch` run: whether its level agrees with the hard rules'."""
    out = {}
    for event in store.events(run_id):
        p = event.payload
        if event.type == "director_line" and isinstance(p.get("rubric"), int | float) and not p.get("rubric_failed"):
            out[str(p["id"])] = rubric_status(float(p["rubric"])).name == p.get("rules_status")
    return out


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


def judge_diagnoses(scorecard: dict[str, Any] | None) -> list[Diagnosis]:
    """The director rubric's diagnoses in `scorecard`, per model and method it measured (the role's
    `ScorecardRole.diagnoses`: the rubric has no shipped map to diagnose)."""
    out: list[Diagnosis] = []
    for row in (scorecard or {}).get("rows", []):
        if row.get("role") == "director" and not row.get("error") and row.get("model"):
            out += rubric_diagnoses(None, str(row["model"]), str(row["method"]), scorecard)
    return out


HOOKS = ScorecardHooks(run_director, steps=director_steps, paired=paired_director, diagnoses=judge_diagnoses)
