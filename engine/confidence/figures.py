"""The figures of labelled answers judged by the confidence score (`confidence eval`, and the signals' held-out
answers at fit time): AUC of the final score and of p(supported) against "supported" with bootstrap intervals, the
share of right answers that proceed and of wrong ones stopped with Wilson's, by language and by sources. Computed
from per-answer lines only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import stats
from engine.confidence.levels import InterventionLevel

PROCEED = (InterventionLevel.SILENT.value, InterventionLevel.NOTIFY.value)


def _rate(flags: Sequence[bool]) -> dict[str, Any]:
    n, k = len(flags), sum(flags)
    ci = stats.wilson(k, n)
    return {"rate": round(k / n, 4) if n else None, "ci": ci.as_list() if ci else None, "k": k, "n": n}


def _part(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    y = [bool(x["supported"]) for x in lines]
    right = [x for x in lines if x["supported"]]
    wrong = [x for x in lines if not x["supported"]]
    final = stats.auc_summary([x["score"] for x in lines], y) or {}
    read = [x for x in lines if x.get("p_supported") is not None]  # a fallback read nothing of the answer
    prob = stats.auc_summary([x["p_supported"] for x in read], [bool(x["supported"]) for x in read]) or {}
    return {
        "n": len(lines),
        "auc": final.get("auc"),
        "auc_ci": final.get("auc_ci"),
        "self_confidence_auc": prob.get("auc"),
        "self_confidence_auc_ci": prob.get("auc_ci"),
        "right_proceed": _rate([x["proceeds"] for x in right]),
        "wrong_stopped": _rate([not x["proceeds"] for x in wrong]),
    }


def eval_totals(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The totals, from the per-item lines only. AUCs with a bootstrap interval over items, rates with Wilson's."""
    levels: dict[str, dict[str, int]] = {"supported": {}, "unsupported": {}}
    for x in lines:
        side = levels["supported" if x["supported"] else "unsupported"]
        side[x["level"]] = side.get(x["level"], 0) + 1
    languages = sorted({str(x["language"]) for x in lines})
    return _part(lines) | {
        "levels": levels,
        "fallbacks": sum(bool(x["flagged"]) for x in lines),
        "by_language": {code: _part([x for x in lines if x["language"] == code]) for code in languages},
        "by_sources": {
            "with_sources": _part([x for x in lines if x["sources"]]),
            "without_sources": _part([x for x in lines if not x["sources"]]),
        },
    }
