"""An experiment's results as the store holds them: the row of a cell, the finished cells of an experiment (what
`--resume` skips and `show` tables), the best row and the ties with it, and the listings `experiment list` and
`experiment show` print."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.experiments.adapters import mechanism
from engine.experiments.analysis import LOWER_IS_BETTER
from engine.experiments.definition import Experiment
from engine.experiments.evidence import table_evidence
from engine.store import FINISHED, Store

EXPERIMENT, CELL = "experiment", "experiment.cell"  # the run kinds of an experiment and of each of its cells


@dataclass
class ExperimentResult:
    experiment_id: str
    run_id: str
    rows: list[dict[str, Any]]
    metric: str
    best: dict[str, Any] | None
    new_calls: int
    executor: str
    skipped: int = 0
    trials: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "run_id": self.run_id,
            "executor": self.executor,
            "metric": self.metric,
            "best": self.best,
            "new_calls": self.new_calls,
            "cells": len(self.rows),
            "skipped": self.skipped,
            "rows": self.rows,
        }


def row_of(
    tags: Mapping[str, Any], metrics: Mapping[str, Any], *, new_calls: int, run_id: str, recording_run: str
) -> dict[str, Any]:
    """A cell's row: its index (a search's trial number) and repeat, its parameters, its metrics, the calls it
    made and the runs it was stored in and decided from (`tags`: the cell's run config)."""
    return {
        **{k: tags[k] for k in ("cell", "trial", "repeat") if k in tags},
        **tags["params"],
        **metrics,
        "new_calls": new_calls,
        "run_id": run_id,
        "recording_run": recording_run,
    }


def comparable_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The table without what differs between two runs of one definition (run ids, wall-clock latency)."""
    return [
        {k: v for k, v in r.items() if k not in ("run_id", "recording_run", "latency_s")}
        for r in sorted(rows, key=lambda r: r["cell"])
    ]


def best_row(rows: Sequence[Mapping[str, Any]], metric: str, minimize: bool = False) -> dict[str, Any] | None:
    scored = [r for r in rows if isinstance(r.get(metric), int | float)]
    if not scored:
        return None
    if minimize:
        return dict(min(scored, key=lambda r: (r[metric], r["cell"])))
    return dict(max(scored, key=lambda r: (r[metric], -r["cell"])))  # ties: the first cell


def experiment_runs(store: Store, experiment_id: str) -> list[Any]:
    return [
        r
        for r in store.list_runs(EXPERIMENT, limit=1_000_000)
        if r.kind == EXPERIMENT and r.config.get("experiment_id") == experiment_id
    ]


def cell_runs(store: Store, experiment_id: str) -> list[Any]:
    return [r for r in store.list_runs(CELL, limit=1_000_000) if r.config.get("experiment_id") == experiment_id]


def finished_outcomes(store: Store, experiment_id: str) -> dict[int, Mapping[str, Any]]:
    """The per-item outcomes of an experiment's finished cells, by cell index (cells that stored any)."""
    return {
        int(run.config["cell"]): run.summary["outcomes"]
        for run in cell_runs(store, experiment_id)
        if run.status == FINISHED and isinstance(run.summary.get("outcomes"), Mapping)
    }


def default_row(definition: Experiment, rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The position of the row decided with the mechanism's default settings (its parameters change nothing
    over the base), if the grid has one."""
    mech = mechanism(definition.mechanism)
    try:
        default = mech.config(definition.base, {})
    except (ValueError, TypeError):
        return None
    for position, row in enumerate(rows):
        params = {k: row[k] for k in definition.space if k in row and k in mech.decision}
        if any(k in row and row[k] != definition.base.get(k, row[k]) for k in mech.calls if k in definition.space):
            continue
        try:
            if mech.config(definition.base, params) == default:
                return position
        except (ValueError, TypeError):
            continue
    return None


def annotate_ties(
    definition: Experiment,
    table: list[dict[str, Any]],
    outcomes: Mapping[int, Mapping[str, Any]],
    metric: str,
) -> dict[str, Any]:
    """Each row's interval on the metric and whether it ties with the best (in place), and the one-line summary."""
    evidence = table_evidence(
        [outcomes.get(int(r["cell"])) for r in table],
        [r.get(metric) for r in table],
        metric,
        minimize=metric in LOWER_IS_BETTER,
    )
    evidence.annotate(table)
    return evidence.summary(table, default_row(definition, table))


def finished_rows(store: Store, experiment_id: str) -> dict[int, dict[str, Any]]:
    """The finished cells of an experiment (its rows), by cell index."""
    out: dict[int, dict[str, Any]] = {}
    for run in cell_runs(store, experiment_id):
        if run.status == FINISHED and "row" in run.summary:
            out[int(run.config["cell"])] = {**run.summary["row"], "run_id": run.id}
    return out


def list_experiments(store: Store) -> list[dict[str, Any]]:
    """One line per experiment (its latest run): id, name, status, cells, best."""
    latest: dict[str, Any] = {}
    for run in store.list_runs(EXPERIMENT, limit=1_000_000):
        if run.kind != EXPERIMENT:
            continue
        eid = run.config.get("experiment_id")
        if eid and eid not in latest:
            latest[eid] = run
    out = []
    for eid, run in latest.items():
        definition = run.config.get("definition", {})
        summary = run.summary
        out.append(
            {
                "experiment_id": eid,
                "name": definition.get("name"),
                "mechanism": definition.get("mechanism"),
                "status": run.status,
                "run_id": run.id,
                "started_at": run.started_at.isoformat(),
                "cells": run.config.get("cells"),
                "metric": summary.get("metric"),
                "best": summary.get("best"),
                "executor": run.config.get("executor"),
            }
        )
    return out


def show_experiment(store: Store, experiment_id: str) -> dict[str, Any]:
    """The definition, status and table of an experiment (from its finished cells, so a killed one shows
    what it finished)."""
    runs = experiment_runs(store, experiment_id)
    if not runs:
        raise KeyError(f"no experiment {experiment_id}")
    latest = runs[0]
    definition = latest.config.get("definition", {})
    finished = finished_rows(store, experiment_id)
    rows = [finished[i] for i in sorted(finished)]
    mech = mechanism(str(definition.get("mechanism")))
    metric = definition.get("metric") or mech.default_metric
    outcomes = finished_outcomes(store, experiment_id)
    try:
        ties = annotate_ties(Experiment.model_validate(definition), rows, outcomes, metric)
    except ValueError as exc:  # a stored definition this version cannot read: the table without ties
        ties = {"metric": metric, "note": f"ties not computed: {exc}", "text": ""}
    search = definition.get("search") or {}
    axes = [
        *definition.get("space", {}),
        *(["model"] if definition.get("models") else []),
        *(["panel"] if definition.get("panels") else []),
    ]
    return {
        "experiment_id": experiment_id,
        "name": definition.get("name"),
        "status": latest.status,
        "runs": [
            {
                "run_id": r.id,
                "status": r.status,
                "executor": r.config.get("executor"),
                "started_at": r.started_at.isoformat(),
                "error": r.error,
            }
            for r in runs
        ],
        "definition": definition,
        "cells": latest.config.get("cells"),
        "finished": len(rows),
        "metric": metric,
        "best": best_row(rows, search.get("metric", metric), search.get("direction") == "minimize"),
        "ties": ties,
        "outcomes": outcomes,  # per cell: another metric's intervals and ties are computed from these
        "new_calls": sum(int(r.get("new_calls") or 0) for r in rows),
        "rows": rows,
        "parameters": axes,
        "decision_parameters": sorted(mech.decision),
        "call_parameters": sorted(mech.calls),
    }
