"""The judges' agreement with the user's labels, per mechanism and per judge/map: the confusion matrix, accuracy
with its Wilson interval, Cohen's κ with its bootstrap interval and the base rates, the most confidently wrong
items (linked to their runs) and the agreement over time. Statistics from engine/stats.py.

A label's `context` says what the judge predicted when the item was labelled (`predicted`, and its probability
and cut where it has them); a label without a prediction does not count."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from engine import stats
from engine.labelstore import Label, label_specs, list_labels
from engine.store import Store

WRONG_SHOWN = 10


def judge_of(label: Label) -> str:
    """The judge/map a label's prediction came from: `judge` in its context, or, for a hand, the method and the
    map with its version."""
    ctx = label.context
    if ctx.get("judge"):
        return str(ctx["judge"])
    if label.mechanism == "handraise" and ctx.get("judge_method"):
        map_id = ctx.get("map_id") or ctx.get("judge_model") or "-"
        return f"{ctx['judge_method']}:{map_id}@{ctx.get('map_version') or 'uncalibrated'}"
    return "unknown"


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def probability_of(label: Label) -> tuple[float | None, float | None]:
    """(probability of the positive value, cut) from a label's context (a hand: its will and threshold)."""
    ctx = label.context
    p = _float(ctx.get("probability"))
    cut = _float(ctx.get("cut"))
    if p is None:
        p = _float(ctx.get("will"))
    if cut is None:
        cut = _float(ctx.get("threshold"))
    return p, cut


@dataclass
class Agreement:
    """One judge/map against the labels of one mechanism."""

    mechanism: str
    judge: str
    n: int
    labels: list[str]
    confusion: dict[str, dict[str, int]]  # truth → predicted → count
    accuracy: float | None
    accuracy_ci: stats.Interval | None
    kappa: float | None
    kappa_ci: stats.Interval | None
    base_rates: dict[str, tuple[float, float]]  # value → (share in the labels, share in the predictions)
    confidently_wrong: list[dict[str, Any]] = field(default_factory=list)
    over_time: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `labels agreement --json` shape."""
        return {
            "mechanism": self.mechanism,
            "judge": self.judge,
            "n": self.n,
            "labels": self.labels,
            "confusion": self.confusion,
            "accuracy": _round(self.accuracy),
            "accuracy_ci": self.accuracy_ci.as_list() if self.accuracy_ci else None,
            "kappa": _round(self.kappa),
            "kappa_ci": self.kappa_ci.as_list() if self.kappa_ci else None,
            "base_rates": {k: {"labels": round(h, 4), "judge": round(j, 4)} for k, (h, j) in self.base_rates.items()},
            "confidently_wrong": self.confidently_wrong,
            "over_time": self.over_time,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def cohen_kappa(confusion: np.ndarray) -> float | None:
    """Cohen's κ of a k × k count matrix (None when chance agreement is 1: one value everywhere)."""
    n = confusion.sum()
    if n <= 0:
        return None
    observed = np.trace(confusion) / n
    expected = float((confusion.sum(axis=1) * confusion.sum(axis=0)).sum()) / n**2
    if expected >= 1:
        return None
    return float((observed - expected) / (1 - expected))


def _kappa_kernel(k: int) -> Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """κ as a weighted statistic: each resample's confusion matrix from the items' weights (the bootstrap
    merges equal (truth, predicted) pairs into one unit, so 10,000 labels are at most k² units)."""

    def kernel(truth: np.ndarray, pred: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        def run(w: np.ndarray) -> np.ndarray:
            cells = np.zeros((w.shape[0], k, k))
            for i in range(k):
                for j in range(k):
                    mask = (truth == i) & (pred == j)
                    if mask.any():
                        cells[:, i, j] = w[:, mask].sum(axis=1)
            n = cells.sum(axis=(1, 2))
            observed = np.trace(cells, axis1=1, axis2=2) / np.where(n > 0, n, 1)
            expected = (cells.sum(axis=2) * cells.sum(axis=1)).sum(axis=1) / np.where(n > 0, n, 1) ** 2
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where((n > 0) & (expected < 1), (observed - expected) / (1 - expected), np.nan)

        return run

    return kernel


def kappa_stat(truth: Sequence[str], predicted: Sequence[str]) -> stats.Stat:
    """Cohen's κ of two label lists as a statistic the bootstrap resamples."""
    values = sorted(set(truth) | set(predicted))
    index = {v: i for i, v in enumerate(values)}
    t = np.asarray([index[v] for v in truth], dtype=np.int64)
    p = np.asarray([index[v] for v in predicted], dtype=np.int64)
    return stats.Stat(_kappa_kernel(len(values)), (t, p))


def _values(mechanism: str, seen: Sequence[str]) -> list[str]:
    spec = label_specs().get(mechanism)
    known = spec.values if spec is not None else None
    ordered = list(known) if known else []
    return ordered + sorted({v for v in seen if v not in ordered})


def _over_time(rows: Sequence[tuple[Label, str]]) -> list[dict[str, Any]]:
    """Agreement by day; when every label is of one day, by tens of labels (in the order given)."""
    by_day: dict[date, list[tuple[Label, str]]] = {}
    for lab, p in rows:
        by_day.setdefault(lab.created_at.date(), []).append((lab, p))
    days = [d.isoformat() for d in sorted(by_day)]
    if len(days) >= 2:
        groups = [(day.isoformat(), by_day[day]) for day in sorted(by_day)]
    else:
        groups = [
            (f"{days[0]} #{i + 1}–{min(i + 10, len(rows))}", list(rows[i : i + 10])) for i in range(0, len(rows), 10)
        ]
    out = []
    for name, group in groups:
        right = sum(lab.label == p for lab, p in group)
        ci = stats.wilson(right, len(group))
        out.append(
            {
                "date": name,
                "n": len(group),
                "accuracy": round(right / len(group), 4),
                "accuracy_ci": ci.as_list() if ci else None,
            }
        )
    return out


def _confidently_wrong(rows: Sequence[tuple[Label, str]]) -> list[dict[str, Any]]:
    wrong = []
    for lab, predicted in rows:
        if lab.label == predicted:
            continue
        p, cut = probability_of(lab)
        cut = cut if cut is not None else 0.5
        margin = abs(p - cut) if p is not None else -1.0
        wrong.append((margin, lab, predicted, p, cut))
    wrong.sort(key=lambda t: (-t[0], t[1].id))
    return [
        {
            "key": lab.item_key,
            "run_id": lab.run_id,
            "label": lab.label,
            "predicted": predicted,
            "probability": None if p is None else round(p, 4),
            "cut": None if p is None else round(cut, 4),
            "margin": None if p is None else round(margin, 4),  # how far the probability was from the cut
            "text": str(lab.context.get("text") or ""),
        }
        for margin, lab, predicted, p, cut in wrong[:WRONG_SHOWN]
    ]


def agreement_of(mechanism: str, judge: str, rows: Sequence[tuple[Label, str]], *, seed: int = stats.SEED) -> Agreement:
    """The figures of one judge from (label, predicted value) pairs."""
    values = _values(mechanism, [lab.label for lab, _ in rows] + [p for _, p in rows])
    index = {v: i for i, v in enumerate(values)}
    truth = np.asarray([index[lab.label] for lab, _ in rows], dtype=np.int64)
    pred = np.asarray([index[p] for _, p in rows], dtype=np.int64)
    k = len(values)
    matrix = np.zeros((k, k), dtype=np.int64)
    np.add.at(matrix, (truth, pred), 1)
    n = len(rows)
    right = int(np.trace(matrix))
    kappa, kappa_ci = (None, None)
    if n:
        kappa, kappa_ci = stats.bootstrap(stats.Stat(_kappa_kernel(k), (truth, pred)), seed=seed)
    human, judged = Counter(lab.label for lab, _ in rows), Counter(p for _, p in rows)
    return Agreement(
        mechanism=mechanism,
        judge=judge,
        n=n,
        labels=values,
        confusion={t: {p: int(matrix[index[t], index[p]]) for p in values} for t in values},
        accuracy=right / n if n else None,
        accuracy_ci=stats.wilson(right, n),
        kappa=kappa,
        kappa_ci=kappa_ci,
        base_rates={v: (human[v] / n, judged[v] / n) for v in values} if n else {},
        confidently_wrong=_confidently_wrong(rows),
        over_time=_over_time(rows) if n else [],
    )


def agreement(
    store: Store, *, mechanism: str, user: str | None = None, judge: str | None = None, seed: int = stats.SEED
) -> list[Agreement]:
    """One Agreement per judge/map that predicted the labelled items (most labels first)."""
    return agreement_from(list_labels(store, mechanism=mechanism, user=user), mechanism, judge=judge, seed=seed)


def agreement_from(
    labels: Sequence[Label], mechanism: str, *, judge: str | None = None, seed: int = stats.SEED
) -> list[Agreement]:
    by_judge: dict[str, list[tuple[Label, str]]] = {}
    for lab in labels:
        predicted = lab.context.get("predicted")
        if lab.mechanism != mechanism or not isinstance(predicted, str) or not predicted:
            continue
        name = judge_of(lab)
        if judge is None or name == judge:
            by_judge.setdefault(name, []).append((lab, predicted))
    ordered = sorted(by_judge.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [agreement_of(mechanism, name, rows, seed=seed) for name, rows in ordered]
