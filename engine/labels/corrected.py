"""A judge's rate corrected by the user's labels: prediction-powered inference (PPI++).

A judge says "30 % unsafe" over a run. That is the judge's rate, and its Wilson interval only says how sure we are
of *what the judge said*, not of the truth: a judge that calls too many items unsafe gives a tight interval around
the wrong number. Labels on a few of the run's items say what is true there, but alone they are few. PPI++
(Angelopoulos, Duchi and Zrnic, 2023, "PPI++: Efficient prediction-powered inference") uses both: the judge's
predictions on every item, corrected by the judge's errors measured on the labelled ones —

    θ̂ = mean(Y on the labelled) + λ · (mean(f on the unlabelled) − mean(f on the labelled)),

where f is 1 when the judge gave the value and Y is 1 when the label is that value; its variance is
Var(Y − λf)/n + λ²·Var(f)/N. λ = Cov(Y, f) / ((1 + n/N)·Var(f)), clipped to [0, 1], weighs the judge by how well it
tracks the labels: λ = 0 is the labels alone (a judge that tells nothing), λ = 1 is classic PPI. The interval uses
Student's t with n − 1 degrees of freedom, and under `FEW_LABELS` labels it is never narrower than the labels' own
Wilson interval (a variance estimated from ten 0/1 labels runs small: 88 % coverage in the seeded simulation without
this, 93 %+ with it); it never claims certainty: where its variance is 0 (every label and prediction the same) the
labels' Wilson interval stands in.

The width goes as √(a/N + b/n): the label budget that would halve it solves a/N + b/n' = (a/N + b/n)/4 — none when
the judge's own term a/N is already over a quarter (then more labels alone cannot halve it).

`corrected_rates(store, run)` reads a stored run's items (`labelable_items`) and the user's labels on them;
`ppi_mean` is the estimator on plain arrays. docs/evidence.md explains it with an example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import stats
from engine.labels.items import labelable_items
from engine.labelstore import label_spec, list_labels
from engine.store import Run, Store

MIN_LABELS = 2  # labels below which no correction is made (no variance to estimate)
FEW_LABELS = 30  # below, the interval is widened to the labels' Wilson interval (seeded coverage: 88 % at 10 without)


@dataclass(frozen=True)
class PPIEstimate:
    """The corrected mean, its interval, the weight on the judge (λ) and the two variance terms."""

    estimate: float
    interval: stats.Interval
    lam: float
    judge_term: float  # λ²·Var(f): over N (the unlabelled items)
    label_term: float  # Var(Y − λf): over n (the labelled items)
    n_labelled: int
    n_unlabelled: int

    def labels_to_halve(self) -> int | None:
        """Labels in all that would halve the interval's width (the judge's predictions unchanged); None when the
        judge's own term alone is over a quarter of the variance."""
        n, big_n = self.n_labelled, max(self.n_unlabelled, 1)
        now = self.judge_term / big_n + self.label_term / n
        room = now / 4 - self.judge_term / big_n
        if room <= 0 or self.label_term <= 0:
            return None
        needed = math.ceil(self.label_term / room)
        return needed if needed <= self.n_labelled + self.n_unlabelled else None  # more labels than the run has


def ppi_mean(
    f_unlabelled: stats.Values, f_labelled: stats.Values, y_labelled: stats.Values, level: float = stats.LEVEL
) -> PPIEstimate | None:
    """PPI++ for a mean (a rate, from 0/1 values): the judge's values on the unlabelled items, and the judge's values
    and the labels on the labelled ones. None below `MIN_LABELS` labels."""
    fu, fl, y = (np.asarray(v, dtype=float) for v in (f_unlabelled, f_labelled, y_labelled))
    n, big_n = int(y.size), int(fu.size)
    if n < MIN_LABELS or fl.size != n:
        return None
    if big_n == 0:  # every item labelled: the labels are the truth of this run
        lam, var_f = 0.0, 0.0
    else:
        pooled = np.concatenate([fu, fl])
        var_f = float(pooled.var(ddof=1)) if pooled.size > 1 else 0.0
        cov = float(np.cov(y, fl, ddof=1)[0, 1]) if n > 1 else 0.0
        lam = 0.0 if var_f <= 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f)))
    estimate = float(y.mean() + (lam * (fu.mean() - fl.mean()) if big_n else 0.0))
    label_term = float((y - lam * fl).var(ddof=1))
    judge_term = lam**2 * var_f
    variance = label_term / n + (judge_term / big_n if big_n else 0.0)
    total_n = n + big_n
    if variance <= 0:  # every label and prediction alike: the labels' Wilson interval, never a zero width
        wilson = stats.wilson(int(round(y.sum())), n, level)
        assert wilson is not None
        interval = stats.Interval(wilson.low, wilson.high, "wilson (labels; no variance to correct)", total_n, level)
    else:
        half = stats.t_quantile(0.5 + level / 2, n - 1) * math.sqrt(variance)
        low, high = max(0.0, estimate - half), min(1.0, estimate + half)
        method = "PPI++"
        if n < FEW_LABELS:  # a variance from a few 0/1 labels runs small: no narrower than the labels' own interval
            wilson = stats.wilson(int(round(y.sum())), n, level)
            assert wilson is not None
            low, high, method = min(low, wilson.low), max(high, wilson.high), "PPI++ (few labels: with their Wilson)"
        interval = stats.holding(stats.Interval(low, high, method, total_n, level), min(1.0, max(0.0, estimate)))
    return PPIEstimate(min(1.0, max(0.0, estimate)), interval, lam, judge_term, label_term, n, big_n)


@dataclass(frozen=True)
class CorrectedRate:
    """One value's share over a run: as the judge says it, as the labels say it, and corrected (PPI++)."""

    value: str
    n_items: int
    n_labelled: int
    judge_rate: float
    judge_ci: stats.Interval | None
    labels_rate: float | None
    labels_ci: stats.Interval | None
    corrected: PPIEstimate | None
    note: str = ""
    judge_on_labelled: float | None = None  # the judge's rate on the items you labelled
    judge_on_rest: float | None = None  # and on the others

    def why_outside(self) -> str:
        """Why the corrected rate lies outside both the judge's and the labels' (it can: the labels say how far the
        judge is off on the items they cover, and the rest is corrected by as much); "" when it lies between."""
        c, mine, there, rest = self.corrected, self.labels_rate, self.judge_on_labelled, self.judge_on_rest
        if c is None or mine is None or there is None or rest is None:
            return ""
        if min(self.judge_rate, mine) <= c.estimate <= max(self.judge_rate, mine):
            return ""
        return (
            f"The corrected {self.value} rate ({c.estimate:.2f}) is outside both: the judge said {self.value} on "
            f"{there:.0%} of the items you labelled but on {rest:.0%} of the others, so the others are estimated "
            f"{'lower' if rest < there else 'higher'} than your labels' {mine:.0%}."
        )

    def to_dict(self) -> dict[str, Any]:
        c = self.corrected
        halve = c.labels_to_halve() if c else None
        return {
            "value": self.value,
            "items": self.n_items,
            "labelled": self.n_labelled,
            "judge_rate": round(self.judge_rate, 4),
            "judge_ci": self.judge_ci.as_list() if self.judge_ci else None,
            "labels_rate": None if self.labels_rate is None else round(self.labels_rate, 4),
            "labels_ci": self.labels_ci.as_list() if self.labels_ci else None,
            "corrected": None if c is None else round(c.estimate, 4),
            "corrected_ci": None if c is None else c.interval.as_list(),
            "method": None if c is None else c.interval.method,
            "judge_weight": None if c is None else round(c.lam, 3),
            "labels_to_halve": halve,
            "note": self.note or _budget_note(c, halve),
        }


def _budget_note(c: PPIEstimate | None, halve: int | None) -> str:
    if c is None:
        return ""
    if halve is None:
        return "more labels of this run cannot halve the interval (too few items left, or the judge's spread)"
    return f"about {halve} labels in all ({max(0, halve - c.n_labelled)} more) would halve the interval"


def rate_of(value: str, predicted: Sequence[str | None], labelled: dict[int, str]) -> CorrectedRate:
    """`value`'s share over items whose judge said `predicted` (None: no prediction, left out), with the labels
    `labelled` (item index → label value) on some of them."""
    judged = [i for i, p in enumerate(predicted) if p is not None]
    f = {i: 1.0 if predicted[i] == value else 0.0 for i in judged}
    hits = int(sum(f.values()))
    with_label = [i for i in judged if i in labelled]
    y = [1.0 if labelled[i] == value else 0.0 for i in with_label]
    labels_rate = sum(y) / len(y) if y else None
    rest = [f[i] for i in judged if i not in labelled]
    on_labels = [f[i] for i in with_label]
    corrected = ppi_mean(rest, on_labels, y)
    note = "" if corrected else f"{len(y)} label(s) on this run's items: at least {MIN_LABELS} are needed to correct"
    return CorrectedRate(
        value=value,
        n_items=len(judged),
        n_labelled=len(y),
        judge_rate=hits / len(judged) if judged else 0.0,
        judge_ci=stats.wilson(hits, len(judged)),
        labels_rate=labels_rate,
        labels_ci=stats.wilson(int(sum(y)), len(y)) if y else None,
        corrected=corrected,
        note=note,
        judge_on_labelled=sum(on_labels) / len(on_labels) if on_labels else None,
        judge_on_rest=sum(rest) / len(rest) if rest else None,
    )


def corrected_rates(store: Store, run: Run, *, user: str | None = None) -> list[CorrectedRate]:
    """Each value's share over a stored run's items — the judge's, the labels', and corrected by the labels
    (PPI++) — the mechanism's positive value first; [] when the run has no labelled item. One label per item:
    the newest (by any user, or by `user`)."""
    items = labelable_items(store, run)
    if not items:
        return []
    mechanism = items[0].mechanism
    index = {item.key: i for i, item in enumerate(items)}
    labelled: dict[int, str] = {}
    for lab in list_labels(store, mechanism=mechanism, run_id=run.id, user=user):  # oldest first: newest wins
        if lab.item_key in index:
            labelled[index[lab.item_key]] = lab.label
    if not labelled:
        return []
    predicted = [item.predicted for item in items]
    spec = label_spec(mechanism)
    seen = [v for v in predicted if v] + list(labelled.values())
    values = list(dict.fromkeys([*(v for v in [spec.positive] if v), *(spec.values or ()), *seen]))
    values = [v for v in values if v in seen]
    if len(values) == 2 and spec.positive in values:  # two values: the positive one's share says it all
        values = [spec.positive]
    return [rate_of(v, predicted, labelled) for v in values]


def rate_line(rate: CorrectedRate) -> str:
    """'unsafe: judge 0.48 (0.43–0.53) · your 40 labels 0.30 (0.18–0.46) · corrected 0.31 (0.22–0.40), PPI++ — about
    170 labels in all (130 more) would halve the interval' (the CLI's and the pages' words)."""
    d = rate.to_dict()
    parts = [f"{rate.value}: judge {stats.fmt(rate.judge_rate, rate.judge_ci)} over {rate.n_items} items"]
    if rate.labels_rate is not None:
        parts.append(f"your {rate.n_labelled} labels {stats.fmt(rate.labels_rate, rate.labels_ci)}")
    if rate.corrected is not None:
        parts.append(f"corrected {stats.fmt(rate.corrected.estimate, rate.corrected.interval)}, {d['method']}")
    return " · ".join(parts) + (f" — {d['note']}" if d["note"] else "")


def corrected_row(rate: CorrectedRate) -> dict[str, str]:
    """One row of the pages' and exports' table: value, the judge's rate, the labels', the corrected one, and the
    labels that would halve its interval — each rate with its 95 % interval."""
    d = rate.to_dict()
    c = rate.corrected
    return {  # the corrected rate right after the value: what a narrow window must not cut off
        "share of": rate.value,
        "corrected (95 %)": "—" if c is None else stats.fmt(c.estimate, c.interval),
        "judge says": f"{stats.fmt(rate.judge_rate, rate.judge_ci)} of {rate.n_items}",
        "your labels say": "—"
        if rate.labels_rate is None
        else f"{stats.fmt(rate.labels_rate, rate.labels_ci)} of {rate.n_labelled}",
        "judge's weight": "—" if c is None else f"{c.lam:.2f}",
        "labels to halve it": _halve_words(c, d["labels_to_halve"]) if c is not None else d["note"],
    }


def _halve_words(c: PPIEstimate, halve: int | None) -> str:
    if halve is None:
        return "not by more labels (too few items left, or the judge's spread)"
    return f"about {halve} in all ({max(0, halve - c.n_labelled)} more)"


RUNS_SHOWN = 20  # the newest labelled runs a mechanism's list of corrected rates shows


def corrected_by_run(store: Store, mechanism: str, user: str | None = None) -> list[tuple[Run, CorrectedRate]]:
    """The runs of `mechanism` whose items you labelled (newest first, at most `RUNS_SHOWN`), each with its first
    corrected rate (the mechanism's positive value's share)."""
    run_ids = list(dict.fromkeys(lab.run_id for lab in reversed(list_labels(store, mechanism=mechanism, user=user))))
    out = []
    for run_id in [r for r in run_ids if r][:RUNS_SHOWN]:
        run = store.get_run(run_id)
        rates = corrected_rates(store, run, user=user) if run is not None else []
        if run is not None and rates:
            out.append((run, rates[0]))
    return out


# What the correction assumes, said wherever a corrected rate is shown.
FAIR_SAMPLE = (
    'It assumes the items you labelled are a fair sample of the run: draw the queue "At random" on the Labels '
    "page for these figures (a queue ordered by where a label teaches most, or where the judge was least sure, "
    "over-weights the hard items)."
)
