"""The director mechanism's export tables (the lines reviewed, the rules' hit rates, a script scored),
named by its `MechanismSpec` (spec.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.exports.record import RunRecord, flat
from engine.mechanism import ExportTable


def lines(record: RunRecord) -> list[dict[str, Any]]:
    """Every reviewed line (or draft) with its status (MODIFY with its `mended` line and `changes`), each rule's
    status, tone and rubric.

    Two shapes are stored: a review (`director_verdict`: rules a list of {rule, status, …}, tone a mapping of
    its parts, rubric a mapping) and a script line (`director_line`: rules a mapping rule → status, tone its
    score, rubric the average). Both become the same columns; anything else is kept as its text."""
    rows = []
    for type_, p in record.pairs("director_verdict", "director_line"):
        row = {k: v for k, v in p.items() if k not in ("rules", "tone", "rubric", "reasons", "changes")}
        row["event"] = type_
        row |= _rule_columns(p.get("rules"))
        tone = p.get("tone")
        if isinstance(tone, Mapping):
            row |= {f"tone.{key}": value for key, value in tone.items()}
        elif tone is not None:
            row["tone.score"] = tone
        rubric = p.get("rubric")
        if isinstance(rubric, Mapping):
            row |= {f"rubric.{k}": rubric.get(k) for k in ("average", "status", "failed") if k in rubric}
        elif rubric is not None:
            row["rubric.average"] = rubric
        for name in ("reasons", "changes"):  # lists as one cell: a MODIFY line's changes beside its mended line
            value = p.get(name)
            if value is not None:
                row[name] = " · ".join(map(str, value)) if isinstance(value, list) else str(value)
        rows.append(row)
    return rows


def _rule_columns(rules: object) -> dict[str, Any]:
    """`rule.<name>` → status, from a list of rule results or a mapping of rule → status."""
    if isinstance(rules, Mapping):
        return {f"rule.{name}": status for name, status in rules.items()}
    if isinstance(rules, list):
        return {f"rule.{r.get('rule')}": r.get("status") for r in rules if isinstance(r, Mapping)}
    return {} if rules is None else {"rules": rules}


def hit_rates(record: RunRecord) -> list[dict[str, Any]]:
    """A script's rule hit rates with their 95 % Wilson intervals (a `director.batch` run's stored result)."""
    if not record.run.kind.startswith("director.batch"):
        return []
    result = record.run.summary.get("result")
    rates = result.get("hit_rates") if isinstance(result, Mapping) else None
    if not isinstance(rates, Mapping):
        return []
    rows = []
    for rule, rate in rates.items():
        if not isinstance(rate, Mapping):
            continue
        row: dict[str, Any] = {"rule": rule}
        for name in ("warn", "retry"):
            ci = rate.get(f"{name}_ci")
            low, high = (ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else (None, None)
            row |= {name: rate.get(name), f"{name}_ci_low": low, f"{name}_ci_high": high}
        rows.append(row)
    return rows


def batch(record: RunRecord) -> list[dict[str, Any]]:
    """A script scored line by line: the rubric average per line (and whatever else each line's event holds)."""
    if not record.run.kind.startswith("director.batch"):
        return []
    return [flat(p) | {"event": t} for t, p in record.pairs() if t.startswith("director_") and t != "director_verdict"]


TABLES = (
    ExportTable("director_lines", "each reviewed line or draft with every rule's status", lines),
    ExportTable("director_turns", "each turn of a dialogue", events=("director_turn",)),
    ExportTable("director_batch", "a script's lines scored by the rubric", batch),
    ExportTable("director_eval_items", "one line per labelled line of `director eval`", events=("director_eval_item",)),
    ExportTable("director_hit_rates", "a script's rule hit rates with 95 % Wilson intervals", hit_rates),
)
