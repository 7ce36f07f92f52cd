"""The model scorecard: a built-in experiment that, for every model and judge method asked, runs each
mechanism's shipped benchmark and stores the runs, so a user sees which model and method fit which role.

Each role is a mechanism's `ScorecardRole` (`engine.mechanism`): what it measures, its target, its steps and its
runner, which lives with the mechanism (`engine/<mechanism>/scorecard.py`); this module is the shared driver.

Within a role, every row is compared with the role's best on the same items (`compare_with_best`).

Each row carries latency (median per call) and tokens, read from the calls its runs recorded, and the ids of
those runs. The scorecard itself is a run of kind `scorecard` whose summary holds the rows.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine import stats
from engine.comparison import with_holm
from engine.config import DATA_DIR
from engine.diagnostics import Diagnosis
from engine.events import async_run_context
from engine.experiments.adapters.base import Models
from engine.experiments.execution import HubModels
from engine.inputs import InputError, read_text
from engine.mechanism import RoleStep, ScorecardRole, Step
from engine.registry import mechanism_spec, scorecard_roles
from engine.runctx import progress
from engine.store import Store
from models.errors import ModelError, ReplayMiss
from models.files import write_atomic

SCORECARD = "scorecard"


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


def default_methods() -> dict[str, tuple[str, ...]]:
    """Each role's judge methods, where it has a choice: all of its `ScorecardRole.methods`."""
    return {name: role.methods for name, role in scorecard_roles().items() if role.methods}


@dataclass(frozen=True)
class ScorecardPlan:
    """What to run: models × methods per role (`methods`: the judge methods of each role that has a choice, its
    `ScorecardRole.methods` where not named); `limit` cuts every case set (a quick scorecard)."""

    models: Sequence[str]
    roles: Sequence[str] = field(default_factory=roles)
    methods: Mapping[str, Sequence[str]] = field(default_factory=default_methods)
    repeats: int = 2
    limit: int | None = None
    can_score: Callable[[str], bool] = field(default=lambda model_id: True)


def built_models(models: Models | HubModels, store: Store) -> Models:
    """The models a role's runner calls: `models` itself, or the hub's models logging to `store`."""
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


def by_method(plan: ScorecardPlan, name: str, model_id: str | None) -> list[Step]:
    """A per-model role's steps when its `ScorecardRole.steps` is empty: the model with each of the role's methods
    in the plan (its `ScorecardRole.methods` unless the plan names others), likelihood only where the model can
    score."""
    assert model_id is not None
    methods = plan.methods.get(name, _role(name).methods)
    return [(model_id, m) for m in methods if m != "likelihood" or plan.can_score(model_id)]


def role_steps(plan: ScorecardPlan, name: str, model_id: str | None) -> list[Step]:
    """The (model, method) rows role `name` runs for `model_id` (None: a role that takes every model at once)."""
    steps = _role(name).hooks().steps
    if steps is None:
        return by_method(plan, name, model_id)
    return steps(plan, model_id)


def _steps(plan: ScorecardPlan) -> list[tuple[str, str | None, str | None]]:
    """Every role × model × method to run: each model through the per-model roles in turn, then the roles that
    take every model at once (the skip judge's recordings, the confidence set)."""
    chosen = [(name, role) for name, role in scorecard_roles().items() if name in plan.roles]
    steps: list[tuple[str, str | None, str | None]] = []
    for model_id in plan.models:
        for name, role in chosen:
            if role.per_model:
                steps += [(name, *step) for step in role_steps(plan, name, model_id)]
    for name, role in chosen:
        if not role.per_model:
            steps += [(name, *step) for step in role_steps(plan, name, None)]
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
        progress(total=len(steps), step="starting", unit="rows")
        for role, model_id, method in steps:
            row: dict[str, Any] = {"role": role, "model": model_id, "method": method}
            try:
                out = await _role(role).hooks().run(RoleStep(store, models, model_id, method, plan, executor))
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
    write_atomic(path, json.dumps(shipped, ensure_ascii=False, indent=1, default=str) + "\n")  # whole or not at all


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


def _paired(store: Store, role: str, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    """Row against the role's best row on the same items, by the role's `ScorecardRole.paired` (None: none)."""
    paired = _role(role).hooks().paired
    return None if paired is None else paired(store, best, row)


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
        earlier = {id(row): row.pop("versus_best", None) for row in rows if row["role"] == role}
        if len(scored) < 2:
            continue
        pick = max if target.higher_is_better else min
        best = pick(scored, key=lambda r: r["metrics"][target.metric])
        fresh: dict[int, stats.Comparison] = {}
        for row in scored:
            if row is best:
                row["versus_best"] = {"best": True}
                continue
            comparison = _paired(store, role, best, row)
            kept = earlier.get(id(row)) or {}
            if comparison is None and _measured_elsewhere(store, row) and _same_best(kept, best):
                row["versus_best"] = kept  # neither run is here (a merged file): the comparison made there holds
            elif comparison is not None:
                fresh[id(row)] = comparison
        # every row of a role tested against its best: one family, Holm-adjusted (`Comparison.p_holm`)
        adjusted = with_holm({str(k): c for k, c in fresh.items()})
        for row in scored:
            if id(row) in fresh:
                row["versus_best"] = {
                    "best_model": best["model"],
                    "best_method": best["method"],
                    **adjusted[str(id(row))].to_dict(),
                }


def _measured_elsewhere(store: Store, row: Mapping[str, Any]) -> bool:
    """The row's runs are not in this store: it was measured where the scorecard file was written before."""
    runs = row.get("runs") or []
    return bool(runs) and all(store.get_run(str(r)) is None for r in runs)


def _same_best(kept: Mapping[str, Any], best: Mapping[str, Any]) -> bool:
    return (kept.get("best_model"), kept.get("best_method")) == (best["model"], best["method"])


def by_language(figures: Mapping[str, Mapping[str, Any] | None], keys: Sequence[str]) -> dict[str, Any]:
    """Per-language figures as flat metrics beside the pooled ones ('f1_ja', 'f1_ja_ci'), so that every surface
    that shows a row's metrics shows them with their intervals; languages without a figure are left out."""
    out: dict[str, Any] = {}
    for code, figure in sorted(figures.items()):
        for key in keys:
            if figure and figure.get(key) is not None:
                out[f"{key}_{code}"] = figure[key]
                if figure.get(f"{key}_ci") is not None:
                    out[f"{key}_{code}_ci"] = figure[f"{key}_ci"]
    return out


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


def scorecard_judge_diagnoses(scorecard: dict[str, Any] | None = None) -> list[Diagnosis]:
    """The judges the scorecard diagnosed that have no shipped map (the director rubric, per model and method), by
    each role's `ScorecardRole.diagnoses`: listed with the shipped maps' diagnoses (`judgelab models judges`, the
    Models page). From the shipped scorecard unless another is given."""
    scorecard = scorecard if scorecard is not None else shipped_scorecard()
    out: list[Diagnosis] = []
    for role in scorecard_roles().values():
        diagnoses = role.hooks().diagnoses
        if diagnoses is not None:
            out += diagnoses(scorecard)
    return out
