"""Uncertainty for every figure: intervals on rates, paired comparisons, multiple-comparison control.

judgelab measures mechanisms on 8–36 items, where one item moves a rate by 3–12 points, so a point estimate
alone cannot tell signal from noise. This module owns the statistics; everything else calls it.

- **Proportions** (accuracy, precision, recall, top-1, agreement, calls saved, proceed rate) get the Wilson
  score interval (scipy's `binomtest(...).proportion_ci("wilson")`): it stays inside [0, 1] and keeps close to
  its nominal coverage at small n, where the textbook Wald interval collapses at 0 or 1.
- **Everything else** (F1, AUC, ECE, Brier, κ, α, differences) gets a seeded percentile bootstrap over items,
  or over clusters (cases) where items cluster, with ≥ 1,000 resamples. Resamples are drawn as a matrix of
  multiplicities (resamples × items, multinomial), so each metric is one weighted sum over that matrix rather
  than a Python loop over resamples; κ and α, which have no weighted form here, fall back to a loop.
- **Paired comparisons** of two things judged on the same items: the difference with its interval and a
  p-value. Paired correctness (right / wrong) gets exact McNemar and Newcombe's square-and-add score interval
  for the difference of paired proportions, which is never zero-width and excludes 0 about when McNemar's p is
  below 0.05 (a bootstrap of a few discordant items is not: on 2–5 items it read [−1, −1] at p 0.06–0.5).
  Other statistics get the paired bootstrap (the same resample applied to both) and its two-sided p — on at
  least `MIN_PAIRED` items (or cases): below that, or when every resample gives the same difference, there is
  no interval and no p, and `Comparison.reason` says why ("too few items: …"), shown where the interval would be.
- **Many comparisons** (experiment cells against the best) are Holm-adjusted.

The same seed always gives the same interval; the default seed is fixed so a page, the CLI and an export of
one run agree to the digit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

LEVEL = 0.95
MIN_PAIRED = 10  # paired items (or cases) below which a paired bootstrap claims more than its resamples can show
RESAMPLES = 2000  # ≥ 1,000 as promised; 2,000 keeps the 2.5 % tail's Monte-Carlo error under ~1 point
SEED = 20261126

Weights = np.ndarray  # (resamples, units) multiplicities; the observed sample is one row of its counts
Flags = Sequence[bool] | np.ndarray
Values = Sequence[float] | np.ndarray
Kernel = Callable[..., Callable[[Weights], np.ndarray]]  # columns → (weights → one value per row, NaN: undefined)


@dataclass(frozen=True)
class Stat:
    """A statistic as a weighted sum over units: `kernel(*columns)` gives a function of a weights matrix.

    Keeping the per-item columns (not a closure over them) lets the bootstrap merge items whose columns are
    equal into one unit with a count: resampling n items and counting is then a multinomial over those few
    patterns. F1 over 10,000 items has at most 4 patterns (TP, FP, FN, TN), so 1,000 resamples are a
    1,000 × 4 draw instead of a 1,000 × 10,000 one, with exactly the same distribution."""

    kernel: Kernel
    columns: tuple[np.ndarray, ...]
    # An analytic interval (level → Interval): `exact` replaces the bootstrap (a proportion: Wilson), `fallback`
    # stands in where the bootstrap collapses to one value (F1 or AUC at 0 or 1): never a zero-width interval.
    exact: Callable[[float], Interval | None] | None = None
    fallback: Callable[[float], Interval | None] | None = None

    def __call__(self, weights: Weights) -> np.ndarray:
        return self.kernel(*self.columns)(weights)

    @property
    def n(self) -> int:
        return int(self.columns[0].shape[0])


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided interval around an estimate; `method` says how it was made."""

    low: float
    high: float
    method: str  # "wilson" | "bootstrap" | "paired bootstrap" | "paired score" | "exact McNemar" | their hulls
    n: int  # items (or clusters) it rests on
    level: float = LEVEL

    def as_list(self, digits: int = 4) -> list[float]:
        return [round(self.low, digits), round(self.high, digits)]

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def width(self) -> float:
        return self.high - self.low


def fmt(value: float | None, interval: Interval | None, digits: int = 2) -> str:
    """'0.50 (0.27–0.73)': the figure with its interval, as pages, reports and the CLI print it."""
    if value is None or not np.isfinite(value):
        return "—"
    if interval is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ({interval.low:.{digits}f}–{interval.high:.{digits}f})"


# ── proportions ──────────────────────────────────────────────────────────────────────────────────────────────


def wilson(successes: int, n: int, level: float = LEVEL) -> Interval | None:
    """The Wilson score interval of `successes` out of `n`; None when there are no trials."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in 0..{n}, got {successes}")
    from scipy.stats import binomtest  # scipy.stats takes ~0.5 s to import: CLI start-up time

    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return Interval(float(ci.low), float(ci.high), "wilson", int(n), level)


def proportion(flags: Flags, level: float = LEVEL) -> tuple[float | None, Interval | None]:
    """A rate and its Wilson interval from per-item flags."""
    arr = np.asarray(flags, dtype=bool)
    if arr.size == 0:
        return None, None
    k = int(arr.sum())
    return k / arr.size, wilson(k, arr.size, level)


# ── the bootstrap ────────────────────────────────────────────────────────────────────────────────────────────


def _cluster_index(clusters: Sequence[object], n_items: int) -> tuple[np.ndarray, int]:
    keys = list(clusters)
    if len(keys) != n_items:
        raise ValueError(f"{len(keys)} cluster keys for {n_items} items")
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return np.array([order[k] for k in keys], dtype=np.int64), len(order)


MULTINOMIAL_UNITS = 256  # up to this many units a multinomial draw is fastest; beyond, draw items and count


def _draw(rng: np.random.Generator, counts: np.ndarray, resamples: int) -> Weights:
    """Resamples of sum(counts) draws with replacement from units of these multiplicities: (resamples, units)."""
    total, units = int(counts.sum()), counts.size
    if units <= MULTINOMIAL_UNITS:
        return rng.multinomial(total, counts / total, size=resamples).astype(float)
    unit_of = np.repeat(np.arange(units), counts.astype(np.int64))
    picks = unit_of[rng.integers(0, total, size=(resamples, total))]
    picks += (np.arange(resamples) * units)[:, None]
    return np.bincount(picks.ravel(), minlength=resamples * units).reshape(resamples, units).astype(float)


def resample_weights(
    n_items: int,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
) -> Weights:
    """Multiplicities of each item in each resample (rows sum to n_items, or to the items of the drawn clusters).

    With `clusters` (one key per item, e.g. the case an item belongs to) whole clusters are drawn with
    replacement, so items that share a case move together, as they should when they are not independent."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        return _draw(rng, np.ones(n_items), resamples)
    member, n_clusters = _cluster_index(clusters, n_items)
    return _draw(rng, np.ones(n_clusters), resamples)[:, member]


@dataclass(frozen=True)
class _Units:
    """Items merged into units that resample alike: equal columns (and, with clusters, one cluster)."""

    columns: list[tuple[np.ndarray, ...]]  # per statistic, its columns at unit level
    counts: np.ndarray  # items per unit
    cluster_of: np.ndarray | None  # the cluster of each unit (clustered draws)
    n_clusters: int


def _units(stats_: Sequence[Stat], clusters: Sequence[object] | None) -> _Units:
    n = stats_[0].n
    if any(s.n != n for s in stats_):
        raise ValueError(f"statistics over different items: {[s.n for s in stats_]}")
    parts: list[np.ndarray] = []
    member = None
    n_clusters = 0
    if clusters is not None:
        member, n_clusters = _cluster_index(clusters, n)
        parts.append(member.astype(float)[:, None])
    for s in stats_:
        parts += [np.asarray(c, dtype=float).reshape(n, -1) for c in s.columns]
    table = np.concatenate(parts, axis=1)
    patterns, counts = np.unique(table, axis=0, return_counts=True)
    col = 1 if clusters is not None else 0
    columns = []
    for s in stats_:
        cols = []
        for c in s.columns:
            width = int(np.asarray(c).reshape(n, -1).shape[1])
            block = patterns[:, col : col + width]
            cols.append(block[:, 0].astype(c.dtype) if np.asarray(c).ndim == 1 else block.astype(c.dtype))
            col += width
        columns.append(tuple(cols))
    cluster_of = patterns[:, 0].astype(np.int64) if clusters is not None else None
    return _Units(columns, counts.astype(float), cluster_of, n_clusters)


def _unit_weights(units: _Units, resamples: int, seed: int) -> Weights:
    rng = np.random.default_rng(seed)
    if units.cluster_of is None:
        return _draw(rng, units.counts, resamples)
    per_cluster = _draw(rng, np.ones(units.n_clusters), resamples)
    weights: Weights = per_cluster[:, units.cluster_of] * units.counts  # a unit holds `count` of its cluster's items
    return weights


def _percentile(values: np.ndarray, level: float) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < max(10, values.size // 2):  # undefined in most resamples: no honest interval
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap(
    statistic: Stat,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> tuple[float | None, Interval | None]:
    """The statistic on the sample and its interval: a proportion's Wilson interval (`Stat.exact`; over clustered
    items, the hull of it and the cluster bootstrap's, so neither the clustering nor a collapse at 0 or 1 is
    lost), else the percentile bootstrap over items or clusters. A bootstrap that collapses to one value gives
    the statistic's analytic `fallback`, or no interval — never a zero-width one — and an interval always holds
    its estimate (a percentile interval that misses a biased statistic's estimate is widened to it)."""
    n_items = statistic.n
    if n_items <= 0:
        return None, None
    units = _units([statistic], clusters)
    fn = statistic.kernel(*units.columns[0])
    observed = float(fn(units.counts[None, :])[0])
    if not np.isfinite(observed):
        return None, None
    exact = statistic.exact(level) if statistic.exact else None
    n_units = n_items if clusters is None else units.n_clusters
    if exact is not None and (clusters is None or n_units >= n_items or n_units < 2):
        return observed, holding(exact, observed)
    boot = None
    if n_units >= 2:  # one unit resampled is itself every time
        bounds = _percentile(fn(_unit_weights(units, resamples, seed)), level)
        if bounds is not None and bounds[1] - bounds[0] > 1e-12:
            boot = Interval(bounds[0], bounds[1], "bootstrap", n_units, level)
    if exact is not None:  # the hull rests on the clusters (what the bootstrap drew)
        hull = exact if boot is None else _hull(boot, exact, "wilson + cluster bootstrap")
        return observed, holding(hull, observed)
    if boot is None and statistic.fallback is not None:
        boot = statistic.fallback(level)
    return observed, None if boot is None else holding(boot, observed)


def holding(interval: Interval, estimate: float) -> Interval:
    """The interval widened, if need be, to hold its estimate (a percentile interval of a biased statistic, e.g.
    ECE, can miss it)."""
    if interval.low <= estimate <= interval.high:
        return interval
    low, high = min(interval.low, estimate), max(interval.high, estimate)
    return Interval(low, high, interval.method + " (widened to the estimate)", interval.n, interval.level)


def looped(fn: Callable[[np.ndarray], float | None], n_items: int) -> Stat:
    """A statistic from one that takes item indices (for κ, α and others without a weighted form): each
    resample calls it once with the drawn items' indices."""

    def kernel(ids: np.ndarray) -> Callable[[Weights], np.ndarray]:
        def run(weights: Weights) -> np.ndarray:
            out = np.empty(weights.shape[0])
            for row, w in enumerate(weights):
                value = fn(np.repeat(ids, np.rint(w).astype(np.int64)))
                out[row] = np.nan if value is None else value
            return out

        return run

    return Stat(kernel, (np.arange(n_items),))


# ── weighted metrics (one value per row of weights) ─────────────────────────────────────────────────────────


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _mean(x: np.ndarray) -> Callable[[Weights], np.ndarray]:
    return lambda w: safe_div(w @ x, w.sum(axis=1))


def _binary(x: np.ndarray) -> bool:
    return bool(x.size) and bool(np.all((x == 0) | (x == 1)))


def _wilson_of(successes: float, n: float) -> Callable[[float], Interval | None]:
    return lambda level: wilson(int(round(successes)), int(round(n)), level)


def w_mean(values: Values) -> Stat:
    """The mean; of right/wrong flags (0/1 only) a proportion, whose interval is Wilson's."""
    x = np.asarray(values, dtype=float)
    return Stat(_mean, (x,), exact=_wilson_of(x.sum(), x.size) if _binary(x) else None)


def _ratio(num: np.ndarray, den: np.ndarray) -> Callable[[Weights], np.ndarray]:
    return lambda w: safe_div(w @ num, w @ den)


def w_ratio(numerator: Values, denominator: Values) -> Stat:
    """Σ numerator / Σ denominator (a ratio estimator, e.g. calls kept of calls made, per scope); of 0/1 flags
    where each counted item is one of the denominator's, a proportion (Wilson)."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    counted = _binary(num) and _binary(den) and bool(np.all(num <= den)) and den.sum() > 0
    return Stat(_ratio, (num, den), exact=_wilson_of(num.sum(), den.sum()) if counted else None)


def w_precision(predicted: Flags, actual: Flags) -> Stat:
    """Right among the said: a proportion of the predicted positives (Wilson)."""
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    return w_ratio((p & a).astype(float), p.astype(float))


def w_recall(predicted: Flags, actual: Flags) -> Stat:
    """Found among the positives: a proportion of the actual positives (Wilson)."""
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    return w_ratio((p & a).astype(float), a.astype(float))


def _f1(p: np.ndarray, a: np.ndarray) -> Callable[[Weights], np.ndarray]:
    tp, fp, fn = (p & a).astype(float), (p & ~a).astype(float), (~p & a).astype(float)
    return lambda w: safe_div(2 * (w @ tp), 2 * (w @ tp) + w @ fp + w @ fn)


def w_f1(predicted: Flags, actual: Flags) -> Stat:
    """F1 = 2TP / (2TP + FP + FN); undefined when there is nothing positive on either side. Where the bootstrap
    collapses (every positive found and nothing else said: F1 1; nothing found: F1 0), the harmonic mean of the
    Wilson bounds of precision and recall stands in (F1 lies between the two, so between their bounds' means)."""
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    tp, said, real = int((p & a).sum()), int(p.sum()), int(a.sum())

    def fallback(level: float) -> Interval | None:
        ends = [w for w in (wilson(tp, said, level), wilson(tp, real, level)) if w is not None]
        if not ends:
            return None
        low, high = (_harmonic([getattr(w, side) for w in ends]) for side in ("low", "high"))
        return Interval(low, high, "wilson (precision, recall)", p.size, level)

    return Stat(_f1, (p, a), fallback=fallback)


def _harmonic(values: Sequence[float]) -> float:
    return 0.0 if min(values) <= 0 else len(values) / sum(1 / v for v in values)


def _auc(s: np.ndarray, a: np.ndarray) -> Callable[[Weights], np.ndarray]:
    """P(positive outscores negative), ties half, from the units sorted by score: per distinct score, the
    positive and negative weight; a positive at score k beats the negative weight below k and ties half at k.
    O(resamples × units): no pairwise matrix, so 10,000 distinct scores cost what 10,000 items do."""
    order = np.argsort(s, kind="stable")
    s_sorted, pos, neg = s[order], a[order].astype(float), (~a[order]).astype(float)
    starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])

    def run(w: Weights) -> np.ndarray:
        ws = w[:, order]
        p_at = np.add.reduceat(ws * pos, starts, axis=1)
        n_at = np.add.reduceat(ws * neg, starts, axis=1)
        below = np.cumsum(n_at, axis=1) - n_at
        num = (p_at * (below + 0.5 * n_at)).sum(axis=1)
        return safe_div(num, p_at.sum(axis=1) * n_at.sum(axis=1))

    return run


def w_auc(scores: Values, actual: Flags) -> Stat:
    """ROC AUC as P(positive outscores negative), ties counted half; where the bootstrap collapses (the classes
    perfectly separated), `auc_bound`."""
    s, a = np.asarray(scores, float), np.asarray(actual, bool)
    pos = int(a.sum())
    return Stat(_auc, (s, a), fallback=lambda level: auc_bound(s, a, pos, a.size - pos, level))


def auc_bound(scores: Values, actual: Flags, positives: int, negatives: int, level: float = LEVEL) -> Interval | None:
    """An AUC at (or near) 0 or 1, where neither the bootstrap nor Hanley–McNeil has any width: the Wilson interval
    of the pairs ordered right, counted as if there were only as many independent pairs as the smaller class
    (a conservative effective n: every pair shares its positive or its negative with many others)."""
    if positives < 1 or negatives < 1:
        return None
    stat = Stat(_auc, (np.asarray(scores, float), np.asarray(actual, bool)))
    auc = float(stat(np.ones((1, stat.n)))[0])
    n_eff = min(positives, negatives)
    w = wilson(int(round(auc * n_eff)), n_eff, level)
    return None if w is None else Interval(w.low, w.high, "wilson (pairs, smaller class)", positives + negatives, level)


def auc_summary(scores: Values, labels: Flags) -> dict[str, Any] | None:
    """{auc, auc_ci (bootstrap over items), n} as the maps and evals store it, or None without both labels."""
    flags = np.asarray(labels, bool)
    if not 0 < int(flags.sum()) < len(flags):
        return None
    auc, ci = bootstrap(w_auc(scores, flags))
    if auc is None:
        return None
    return {"auc": round(auc, 4), "auc_ci": ci.as_list() if ci else None, "n": len(flags)}


def w_brier(probabilities: Values, actual: Flags) -> Stat:
    q, a = np.asarray(probabilities, float), np.asarray(actual, float)
    return w_mean((q - a) ** 2)


def _aurc(s: np.ndarray, c: np.ndarray) -> Callable[[Weights], np.ndarray]:
    """Area under risk(coverage), as engine/reliability.py draws it: keep the units scoring ≥ t for each distinct
    score t, highest first; coverage is the weight kept, risk the weight of wrong answers among it; the trapezoid
    area from coverage 0 (at the first risk). Cumulative sums over the sorted scores: no loop over resamples."""
    order = np.argsort(-s, kind="stable")
    s_sorted, wrong = s[order], (1.0 - c[order])
    starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])

    def run(w: Weights) -> np.ndarray:
        ws = w[:, order]
        kept = np.cumsum(np.add.reduceat(ws, starts, axis=1), axis=1)
        bad = np.cumsum(np.add.reduceat(ws * wrong, starts, axis=1), axis=1)
        total = kept[:, -1:]
        coverage = safe_div(kept, np.broadcast_to(total, kept.shape))
        risk = safe_div(bad, kept)
        first = np.argmax(kept > 0, axis=1)  # the first threshold that keeps anything: its risk starts the curve
        start = risk[np.arange(risk.shape[0]), first][:, None]
        risk = np.where(kept > 0, risk, start)
        xs = np.concatenate([np.zeros((w.shape[0], 1)), coverage], axis=1)
        ys = np.concatenate([start, risk], axis=1)
        area = (np.diff(xs, axis=1) * (ys[:, 1:] + ys[:, :-1]) / 2).sum(axis=1)
        return np.where(total[:, 0] > 0, area, np.nan)

    return run


def w_aurc(confidences: Values, correct: Flags) -> Stat:
    """The area under the risk–coverage curve (lower is better)."""
    return Stat(_aurc, (np.asarray(confidences, float), np.asarray(correct, float)))


def _ece(s: np.ndarray, c: np.ndarray, n_bins: np.ndarray) -> Callable[[Weights], np.ndarray]:
    bins = int(n_bins[0])
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, bins - 1)
    onehot = np.eye(bins)[index]  # units × bins

    def run(w: Weights) -> np.ndarray:
        gap = np.abs((w * s) @ onehot - (w * c) @ onehot)  # per bin: |Σ confidence − Σ correct|
        return safe_div(gap.sum(axis=1), w.sum(axis=1))

    return run


def w_ece(confidences: Values, correct: Flags, n_bins: int = 10) -> Stat:
    """ECE over equal-width bins (the last includes 1.0), as engine/reliability.py computes it."""
    s = np.asarray(confidences, float)
    return Stat(_ece, (s, np.asarray(correct, float), np.full(s.shape[0], n_bins)))


# ── paired comparisons ───────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Comparison:
    """B − A on the same items: the difference, its interval, a p-value and how it was made."""

    a: float | None
    b: float | None
    difference: float | None
    interval: Interval | None
    p_value: float | None
    test: str  # "exact McNemar" | "paired bootstrap"
    n: int
    discordant: tuple[int, int] | None = None  # McNemar: (A right & B wrong, A wrong & B right)
    reason: str | None = None  # why there is no interval ("too few items: …"), shown where it would be
    p_holm: float | None = None  # p Holm-adjusted over the metrics compared together (`engine.comparison`)

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "difference": self.difference,
            "difference_ci": self.interval.as_list() if self.interval else None,
            "p_value": None if self.p_value is None else round(self.p_value, 6),
            "test": self.test,
            "n": self.n,
            **({"discordant": list(self.discordant)} if self.discordant else {}),
            **({"difference_ci_reason": self.reason} if self.reason and self.interval is None else {}),
            **({"p_holm": round(self.p_holm, 6)} if self.p_holm is not None else {}),
        }

    def interval_text(self, digits: int = 2) -> str:
        """' (−0.07 to +0.36)', ' (too few items: 4 paired items; …)', or '' — as pages, reports and the CLI
        print it after the difference."""
        if self.interval is not None:
            return f" ({self.interval.low:+.{digits}f} to {self.interval.high:+.{digits}f})"
        return f" ({self.reason})" if self.reason else ""


def interval_text(comparison: Mapping[str, object] | None, digits: int = 2) -> str:
    """`Comparison.interval_text` of a comparison stored as its `to_dict()`."""
    if not comparison:
        return ""
    ci, reason = comparison.get("difference_ci"), comparison.get("difference_ci_reason")
    if isinstance(ci, list | tuple) and len(ci) == 2:
        return f" ({float(ci[0]):+.{digits}f} to {float(ci[1]):+.{digits}f})"
    return f" ({reason})" if isinstance(reason, str) and reason else ""


def mcnemar_exact(a_right: Flags, b_right: Flags) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at ½."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest  # scipy.stats takes ~0.5 s to import: CLI start-up time

    return float(binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue)


def t_quantile(q: float, df: int) -> float:
    """Student's t quantile (a mean's interval on few values: wider than the normal's)."""
    from scipy.stats import t as student  # scipy.stats takes ~0.5 s to import: CLI start-up time

    return float(student.ppf(q, df))


def fisher_p(table: Sequence[Sequence[int]]) -> float:
    """Fisher's exact two-sided p of a 2 × 2 table (two proportions on different items)."""
    from scipy.stats import fisher_exact  # scipy.stats takes ~0.5 s to import: CLI start-up time

    return float(fisher_exact(table).pvalue)


def _too_few(n_units: int, clusters: Sequence[object] | None) -> str:
    what = "cases" if clusters is not None else "items"
    return f"too few items: {n_units} paired {what}; a paired bootstrap needs {MIN_PAIRED}"


def paired_bootstrap(
    stat_a: Stat,
    stat_b: Stat,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> Comparison:
    """B − A with both statistics computed on the same resamples; p is the two-sided bootstrap p-value
    (twice the smaller share of resampled differences on either side of 0, with the +1 correction). Below
    `MIN_PAIRED` units, or when every resample gives the same difference, no interval and no p: `reason`."""
    n_items = stat_a.n
    if n_items <= 0:
        return Comparison(None, None, None, None, None, "paired bootstrap", 0)
    units = _units([stat_a, stat_b], clusters)
    fa, fb = stat_a.kernel(*units.columns[0]), stat_b.kernel(*units.columns[1])
    observed = units.counts[None, :]
    a, b = float(fa(observed)[0]), float(fb(observed)[0])
    if not (np.isfinite(a) and np.isfinite(b)):
        return Comparison(_finite(a), _finite(b), None, None, None, "paired bootstrap", n_items)
    n_units = n_items if clusters is None else units.n_clusters
    if n_units < MIN_PAIRED:
        return Comparison(a, b, b - a, None, None, "paired bootstrap", n_items, reason=_too_few(n_units, clusters))
    w = _unit_weights(units, resamples, seed)
    diffs = fb(w) - fa(w)
    finite = diffs[np.isfinite(diffs)]
    bounds = _percentile(diffs, level)
    if bounds is not None and bounds[1] - bounds[0] <= 0:  # the same difference in (nearly) every resample
        same = "no interval: the difference is the same in every resample (the two differ on too few items)"
        return Comparison(a, b, b - a, None, None, "paired bootstrap", n_items, reason=same)
    interval = None if bounds is None else Interval(bounds[0], bounds[1], "paired bootstrap", n_units, level)
    reason = None if bounds is not None else "no interval: the difference is undefined in most resamples"
    p = None
    if finite.size:
        below, above = (finite <= 0).sum(), (finite >= 0).sum()
        p = min(1.0, 2 * (min(below, above) + 1) / (finite.size + 1))
    return Comparison(a, b, b - a, interval, p, "paired bootstrap", n_items, reason=reason)


def paired_score_interval(a_right: Flags, b_right: Flags, level: float = LEVEL) -> Interval | None:
    """B − A of paired right/wrong outcomes: Newcombe's square-and-add interval for the difference of paired
    proportions (1998, method 10, with the continuity-corrected correlation of Fagerland, Lydersen and Laake's
    recommendation, 2014), made from each proportion's Wilson interval. It always holds the estimate and is never
    zero-width (1 item: about ±0.79). None: no items."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    n = int(a.size)
    if n == 0:
        return None
    both, only_a, only_b = int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum())
    neither = n - both - only_a - only_b
    a_n, b_n = both + only_a, both + only_b
    pa, pb = a_n / n, b_n / n
    wa, wb = wilson(a_n, n, level), wilson(b_n, n, level)
    assert wa is not None and wb is not None
    margins = a_n * (n - a_n) * b_n * (n - b_n)
    psi = 0.0
    if margins:
        cross = both * neither - only_a * only_b
        psi = ((cross - n / 2) if cross > n / 2 else min(cross, 0)) / float(np.sqrt(margins))
    # For A − B (Newcombe's first minus second); B − A is its mirror.
    down = np.sqrt((pa - wa.low) ** 2 + (wb.high - pb) ** 2 - 2 * psi * (pa - wa.low) * (wb.high - pb))
    up = np.sqrt((pb - wb.low) ** 2 + (wa.high - pa) ** 2 - 2 * psi * (pb - wb.low) * (wa.high - pa))
    low, high = (pb - pa) - float(up), (pb - pa) + float(down)
    return Interval(max(-1.0, low), min(1.0, high), "paired score", n, level)


def mcnemar_interval(a_right: Flags, b_right: Flags, level: float = LEVEL) -> Interval | None:
    """B − A of paired right/wrong outcomes, from the exact test itself: the Clopper–Pearson interval of the share
    of discordant items B gets right, as a difference given the discordant items (θ = (2π − 1)·m/n). It excludes
    0 exactly when exact McNemar's p is below 1 − level. None when no item is discordant (nothing to test)."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    m, n = only_a + only_b, int(a.size)
    if m == 0:
        return None
    from scipy.stats import binomtest  # scipy.stats takes ~0.5 s to import: CLI start-up time

    ci = binomtest(only_b, m).proportion_ci(confidence_level=level, method="exact")
    scale = m / n
    return Interval((2 * float(ci.low) - 1) * scale, (2 * float(ci.high) - 1) * scale, "exact McNemar", n, level)


def _hull(first: Interval, second: Interval | None, method: str) -> Interval:
    if second is None:
        return first
    return Interval(min(first.low, second.low), max(first.high, second.high), method, first.n, first.level)


def compare_correct(
    a_right: Flags,
    b_right: Flags,
    *,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> Comparison:
    """Accuracy of B − A on the same items: exact McNemar p, and the interval that no test here contradicts — the
    hull of Newcombe's paired score interval (never zero-width, it carries the uncertainty of both rates) and the
    exact interval of the McNemar test (so it excludes 0 only when p < 1 − level), widened to the cluster
    bootstrap's where items share a case and there are at least `MIN_PAIRED` cases."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes differ in length: {a.size} vs {b.size}")
    if a.size == 0:
        return Comparison(None, None, None, None, None, "exact McNemar", 0)
    score = paired_score_interval(a, b, level)
    assert score is not None
    interval = _hull(score, mcnemar_interval(a, b, level), "paired score + exact McNemar")
    if clusters is not None and len(set(clusters)) < a.size:
        boot = paired_bootstrap(w_mean(a), w_mean(b), seed=seed, clusters=clusters, level=level)
        if boot.interval is not None:
            interval = _hull(interval, boot.interval, interval.method + " + cluster bootstrap")
    discordant = (int((a & ~b).sum()), int((~a & b).sum()))
    pa, pb = float(a.mean()), float(b.mean())
    return Comparison(pa, pb, pb - pa, interval, mcnemar_exact(a, b), "exact McNemar", a.size, discordant)


def _finite(x: float) -> float | None:
    return x if np.isfinite(x) else None


# ── many comparisons ─────────────────────────────────────────────────────────────────────────────────────────


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order (monotone, capped at 1)."""
    p = np.asarray(p_values, float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def tied_with_best(
    comparisons: Mapping[str, Comparison], alpha: float = 1 - LEVEL
) -> dict[str, tuple[bool, float | None]]:
    """For each contender compared with the best (B = contender, A = best): is it *not* significantly worse
    once the p-values are Holm-adjusted across all contenders? Returns {key: (tied, adjusted p)}."""
    keys = [k for k, c in comparisons.items() if c.p_value is not None and np.isfinite(c.p_value)]
    adjusted = dict(zip(keys, holm([float(comparisons[k].p_value) for k in keys]), strict=True))  # type: ignore[arg-type]
    out: dict[str, tuple[bool, float | None]] = {}
    for key, comp in comparisons.items():
        p = adjusted.get(key)
        worse = comp.difference is not None and comp.difference < 0 and p is not None and p < alpha
        out[key] = (not worse, p)
    return out
