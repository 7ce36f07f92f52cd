"""What the Experiments page and the reports read off a result table (pure: rows in, numbers out): the
Pareto front of quality against a cost, the grid for a heatmap of two parameters, a side-by-side comparison
of two cells, and the jury's before/after-discussion view of a cell."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.experiments.adapters import mechanism
from engine.jury.config import JuryCase, Rubric
from engine.jury.decisions import CollaborativeJuryResult
from engine.jury.evaluation import evaluation_item
from engine.jury.redecide import redecide as derive_jury

# The costs a front can be drawn against (whichever the rows have): the lower, the better.
COSTS = ("calls", "new_calls", "tokens", "latency_s", "cost")
ROW_META = ("cell", "repeat", "trial", "new_calls", "run_id", "recording_run", "error")


# Metrics where a lower value is the better one (the Experiments page's default direction, the export's best cell).
LOWER_IS_BETTER = frozenset(
    {
        "ece",
        "aurc",
        "brier",
        "calls",
        "new_calls",
        "tokens",
        "latency_s",
        "cost",
        "no_verdict",
        "judge_calls",
        "delay_p95_s",
        "delay_max_s",
        "staleness_p95_s",
        "never_judged",
        "replay_misses",
        "retry_rate",
        "warn_rate",
    }
)


def number(value: Any) -> float | None:
    """A finite number, else None (a bool is not a metric value)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def available_costs(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return [c for c in COSTS if any(number(r.get(c)) is not None for r in rows)]


def shared_costs(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The costs every cell has, with one value for all (cells decided from one recording share its calls,
    tokens and $): said once, not on every row, and nothing to trade quality against. `new_calls` is who
    paid for a recording (its first cell), not what a setting costs: never a shared cost."""
    out: dict[str, float] = {}
    for c in COSTS:
        values = {v for v in (number(r.get(c)) for r in rows) if v is not None}  # a failed cell has none
        if c != "new_calls" and len(values) == 1:
            out[c] = values.pop()
    return out


def traded_costs(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The costs a cost-vs-quality front can be drawn against: those that differ between cells."""
    same = shared_costs(rows)
    return [c for c in available_costs(rows) if c != "new_calls" and c not in same]


def metric_columns(rows: Sequence[Mapping[str, Any]], parameters: Sequence[str]) -> list[str]:
    """The numeric columns that are neither a parameter nor bookkeeping, in the order the rows hold them."""
    out: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key in out or key in parameters or key in ROW_META:
                continue
            if number(value) is not None:
                out.append(key)
    return out


def pareto_front(
    rows: Sequence[Mapping[str, Any]], quality: str, cost: str, *, maximize: bool = True
) -> list[dict[str, Any]]:
    """The cells no other cell beats on both axes (quality up — or down with `maximize=False` — and cost
    down), sorted by cost; cells missing either value are left out."""
    points = [
        (number(r.get(cost)), number(r.get(quality)), r)
        for r in rows
        if number(r.get(cost)) is not None and number(r.get(quality)) is not None
    ]
    sign = 1.0 if maximize else -1.0
    front: list[dict[str, Any]] = []
    best = -math.inf
    # by cost ascending, then quality best-first: a cell is on the front when it beats every cheaper one
    for c, q, row in sorted(points, key=lambda p: (p[0], -sign * (p[1] or 0.0), p[2].get("cell", 0))):
        assert c is not None and q is not None
        if sign * q > best:
            front.append(dict(row))
            best = sign * q
    return front


def heatmap_grid(
    rows: Sequence[Mapping[str, Any]], x: str, y: str, metric: str, *, maximize: bool = True
) -> dict[str, Any]:
    """The best `metric` (over the other parameters and repeats) for each (x, y) pair: {x, y, z}; a pair
    with no value is None."""

    def key(v: Any) -> tuple[int, Any]:
        n = number(v)
        return (0, n) if n is not None else (1, str(v))

    xs = sorted({r.get(x) for r in rows if r.get(x) is not None}, key=key)
    ys = sorted({r.get(y) for r in rows if r.get(y) is not None}, key=key)
    pick = max if maximize else min
    z: list[list[float | None]] = []
    for yv in ys:
        line: list[float | None] = []
        for xv in xs:
            values = [v for r in rows if r.get(x) == xv and r.get(y) == yv if (v := number(r.get(metric))) is not None]
            line.append(pick(values) if values else None)
        z.append(line)
    return {"x": xs, "y": ys, "z": z}


def compare_cells(
    a: Mapping[str, Any], b: Mapping[str, Any], parameters: Sequence[str], metrics: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Two cells side by side: every parameter (flagged where they differ) and every metric with b − a."""
    config = [
        {"parameter": p, "cell A": a.get(p), "cell B": b.get(p), "differs": a.get(p) != b.get(p)}
        for p in ["repeat", *parameters]
    ]
    headline = []
    for m in metrics:
        va, vb = number(a.get(m)), number(b.get(m))
        headline.append(
            {
                "metric": m,
                "cell A": a.get(m),
                "cell B": b.get(m),
                "B − A": round(vb - va, 6) if va is not None and vb is not None else None,
            }
        )
    return {"config": config, "metrics": headline}


JURY_PAIRS = (
    ("accuracy", "phase1_accuracy", "accuracy"),
    ("Fleiss κ", "kappa_phase1", "kappa_final"),
    ("Krippendorff α", "alpha_phase1", "alpha_final"),
)


def jury_effect(row: Mapping[str, Any]) -> dict[str, Any]:
    """A jury cell's case-set evaluation: accuracy, Fleiss κ and Krippendorff α before (phase 1) and after the
    discussion, the share of cases whose outcome the discussion changed, and the mean rounds."""
    pairs = []
    for label, before, after in JURY_PAIRS:
        vb, va = number(row.get(before)), number(row.get(after))
        pairs.append(
            {
                "measure": label,
                "before discussion": vb,
                "after discussion": va,
                "change": round(va - vb, 6) if va is not None and vb is not None else None,
            }
        )
    return {
        "pairs": pairs,
        "outcome_changed_rate": number(row.get("outcome_changed_rate")),
        "rounds_mean": number(row.get("rounds_mean")),
        "no_verdict": row.get("no_verdict"),
        # κ and α of seats identical by construction are not computed: why, in words ("" otherwise)
        "agreement_note": str(row.get("agreement_note") or ""),
    }


CASE_COLUMNS = (
    "id",
    "gold",
    "phase1_outcome",
    "final_verdict",
    "correct",
    "outcome_changed",
    "positions_changed",
    "rounds",
    "termination_reason",
)


def jury_cases(
    recording: Mapping[str, Any], base: Mapping[str, Any], params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Each case of a jury cell, re-decided from its group's recording (the `experiment_recording` event's
    payload) with no call: the phase-1 majority, the final verdict, whether the discussion changed the
    outcome, how many positions moved, the rounds and why the discussion stopped."""

    config = mechanism("jury").config(base, params)
    out: list[dict[str, Any]] = []
    for entry in recording.get("cases", []):
        case = JuryCase.model_validate(entry["case"])
        result = CollaborativeJuryResult.model_validate(entry["result"])
        derived = derive_jury(result, config, case.rubric or Rubric())
        item = evaluation_item(case, derived, tie_policy=config.tie_policy)
        out.append({k: item[k] for k in CASE_COLUMNS})
    return out
