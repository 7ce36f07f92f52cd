"""Behaviour unchanged across the renovation of issue #27 (one driver for grid, search and Ray; the adapters
split; the mechanism packages): experiments of every mechanism, run on scripted models, store exactly what the
code stored before it (tests/golden/experiments.json.gz, made by main at 9dca4cc). The jury, conversation,
director, confidence and skip runs of the demo are replayed against their recordings in test_demo.py."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.engine.behaviour import golden, stored_experiments

# Fields added since the golden was made (#36: the stacked panel's distributions and figures, a seat's `judge`, the
# selective verdict and minority veto settings): new keys only, never a changed value of a key the golden holds.
ADDED_SINCE = frozenset(
    {
        "distribution",
        "judge",
        "minority_veto",
        "veto_at",
        "selective_error",
        "language",
        "stacked_verdict",
        "stacked_correct",
        "decided",
        "rounds_outcome",
        "rounds_correct",
        "by_language",
        "recall",
        "cases_with_a_move",
        "rounds_effect",
        "stacked_accuracy",
        "selective",
        "modify_rate",  # #39: the director's MODIFY, a status of its own, and the mends it proposed
        "mend",
        # #38: the director's cells store their lines' statuses, so cells compare item by item with intervals
        "outcomes",
        "pass_rate_ci",
        "warn_rate_ci",
        "modify_rate_ci",
        "retry_rate_ci",
        "tied_with_best",
        "tie_p",
    }
)


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if path.endswith("score") and isinstance(a, float) and isinstance(b, int) and b == math.floor(a + 0.5):
        return None  # #39: the jury's final score is the seed's int (0–100), the golden's float rounded once
    if path.endswith("_ci") and _widened(a, b):
        return None  # #38: a proportion's interval is Wilson's hulled with the bootstrap's: it may only widen
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {json.dumps(a, default=str)[:200]} ≠ {json.dumps(b, default=str)[:200]}"
    if isinstance(a, dict) and path.endswith(".ties") and a.get("best_cell") is None and "outcomes" in str(a):
        return None  # #38: cells that stored no per-item outcomes (the director's) now have ties computed
    if isinstance(a, dict):
        a, b = _modify_folded(a, b)
        for k in sorted(set(a) | set(b)):
            if k not in a and k in ADDED_SINCE:
                continue
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'before' if k in a else 'now'}"
            found = _first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if path.endswith(".rules") and len(b) == len(a) + 1:  # #39: the line-length rule, a row of its own
            b = [r for r in b if not (isinstance(r, dict) and r.get("rule") == "line_length" and r["status"] == "PASS")]
        if len(a) != len(b):
            return f"{path}: {len(a)} items before, {len(b)} now"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if path.endswith(".panel") and (a, b) == ("local", "local-gemma"):
        return None  # #36: the three-Gemma panel the golden ran kept its seats under a new name
    return None if a == b else f"{path}: {a!r} before, {b!r} now"


def _widened(a: Any, b: Any) -> bool:
    pair = [isinstance(x, list) and len(x) == 2 and all(isinstance(v, int | float) for v in x) for x in (a, b)]
    return all(pair) and b[0] <= a[0] and b[1] >= a[1] and b != a


def _modify_folded(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """#39: a line the director now mends (MODIFY) was shown as written before (PASS or WARN): a recorded line
    that carries its mend may read MODIFY where the golden read PASS or WARN, and a cell's pass and warn rates may
    give way to `modify_rate` — as long as the lines shown stay the lines shown (retries unchanged)."""
    if b.get("status") == "MODIFY" and "mend" in b and a.get("status") in ("PASS", "WARN"):
        return a, b | {"status": a["status"]}
    if "modify_rate" in b and "modify_rate" not in a and {"pass_rate", "warn_rate", "retry_rate"} <= set(a):
        shown_before = round(a["pass_rate"] + a["warn_rate"], 4)
        shown_now = round(b["pass_rate"] + b["warn_rate"] + b["modify_rate"], 4)
        if shown_before == shown_now and a["retry_rate"] == b["retry_rate"]:
            keep = {"pass_rate": a["pass_rate"], "warn_rate": a["warn_rate"]}
            return a, b | keep
    return a, b


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_experiments_store_what_they_stored_before_the_renovation() -> None:
    before, now = golden(), json.loads(json.dumps(stored_experiments(), default=str))
    assert sorted(now) == sorted(before)
    for name in before:
        assert _first_difference(before[name], now[name], name) is None
