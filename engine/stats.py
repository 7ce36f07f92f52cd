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
- **Paired comparisons** of two things judged on the same items: the difference with its paired bootstrap
  interval (the same resample applied to both), and a p-value: exact McNemar for paired correctness, the
  paired bootstrap's two-sided p otherwise.
- **Many comparisons** (experiment cells against the best) are Holm-adjusted.

The same seed always gives the same interval; the default seed is fixed so a page, the CLI and an export of
one run agree to the digit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000  # ≥ 1,000 as promised; 2,000 keeps the 2.5 % tail's Monte-Carlo error under ~1 point
SEED = 20261126

Weights = np.ndarray  # (resamples, items) multiplicities; a row of ones is the observed sample
WeightedStatistic = Callable[[Weights], np.ndarray]  # weights → one value per row (NaN where undefined)
Flags = Sequence[bool] | np.ndarray
Values = Sequence[float] | np.ndarray


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided interval around an estimate; `method` says how it was made."""

    low: float
    high: float
    method: str  # "wilson" | "bootstrap" | "paired bootstrap"
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
        return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=resamples).astype(float)
    keys = list(clusters)
    if len(keys) != n_items:
        raise ValueError(f"{len(keys)} cluster keys for {n_items} items")
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    member = np.array([order[k] for k in keys])
    n_clusters = len(order)
    counts = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples)
    return counts[:, member].astype(float)


def _percentile(values: np.ndarray, level: float) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < max(10, values.size // 2):  # undefined in most resamples: no honest interval
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap(
    statistic: WeightedStatistic,
    n_items: int,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> tuple[float | None, Interval | None]:
    """The statistic on the sample and its percentile bootstrap interval."""
    if n_items <= 0:
        return None, None
    observed = float(statistic(np.ones((1, n_items)))[0])
    if not np.isfinite(observed):
        return None, None
    units = n_items if clusters is None else len(set(clusters))
    if units < 2:  # one unit resampled is itself every time: no interval, rather than a zero-width one
        return observed, None
    weights = resample_weights(n_items, resamples, seed, clusters)
    bounds = _percentile(statistic(weights), level)
    if bounds is None:
        return observed, None
    return observed, Interval(bounds[0], bounds[1], "bootstrap", units, level)


def looped(fn: Callable[[np.ndarray], float | None]) -> WeightedStatistic:
    """A weighted statistic from one that takes item indices (for κ, α and others without a weighted form)."""

    def run(weights: Weights) -> np.ndarray:
        out = np.empty(weights.shape[0])
        for row, w in enumerate(weights):
            value = fn(np.repeat(np.arange(w.size), w.astype(int)))
            out[row] = np.nan if value is None else value
        return out

    return run


# ── weighted metrics (one value per row of weights) ─────────────────────────────────────────────────────────


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def w_mean(values: Values) -> WeightedStatistic:
    x = np.asarray(values, dtype=float)
    return lambda w: safe_div(w @ x, w.sum(axis=1))


def w_precision(predicted: Flags, actual: Flags) -> WeightedStatistic:
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    return lambda w: safe_div(w @ (p & a), w @ p)


def w_recall(predicted: Flags, actual: Flags) -> WeightedStatistic:
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    return lambda w: safe_div(w @ (p & a), w @ a)


def w_f1(predicted: Flags, actual: Flags) -> WeightedStatistic:
    """F1 = 2TP / (2TP + FP + FN); undefined when there is nothing positive on either side."""
    p, a = np.asarray(predicted, bool), np.asarray(actual, bool)
    tp, fp, fn = (p & a).astype(float), (p & ~a).astype(float), (~p & a).astype(float)
    return lambda w: safe_div(2 * (w @ tp), 2 * (w @ tp) + w @ fp + w @ fn)


def w_auc(scores: Values, actual: Flags) -> WeightedStatistic:
    """ROC AUC as P(positive outscores negative), ties half: with G[i, j] = 1[s_i > s_j] + ½·1[s_i = s_j] over
    all item pairs, a resample's AUC is (w·pos)ᵀ G (w·neg) / (Σ w·pos · Σ w·neg), one matrix product."""
    s, a = np.asarray(scores, float), np.asarray(actual, bool)
    g = (s[:, None] > s[None, :]) + 0.5 * (s[:, None] == s[None, :])
    pos, neg = a.astype(float), (~a).astype(float)

    def run(w: Weights) -> np.ndarray:
        wp, wn = w * pos, w * neg
        return safe_div(np.einsum("bi,ij,bj->b", wp, g, wn), wp.sum(axis=1) * wn.sum(axis=1))

    return run


def w_brier(probabilities: Values, actual: Flags) -> WeightedStatistic:
    q, a = np.asarray(probabilities, float), np.asarray(actual, float)
    return w_mean((q - a) ** 2)


def w_ece(confidences: Values, correct: Flags, n_bins: int = 10) -> WeightedStatistic:
    """ECE over equal-width bins (the last includes 1.0), as engine/calibration.py computes it."""
    s, c = np.asarray(confidences, float), np.asarray(correct, float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    onehot = np.eye(n_bins)[index]  # items × bins

    def run(w: Weights) -> np.ndarray:
        gap = np.abs((w * s) @ onehot - (w * c) @ onehot)  # per bin: |Σ confidence − Σ correct|
        return safe_div(gap.sum(axis=1), w.sum(axis=1))

    return run


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
        }


def mcnemar_exact(a_right: Flags, b_right: Flags) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at ½."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest  # scipy.stats takes ~0.5 s to import: CLI start-up time

    return float(binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue)


def paired_bootstrap(
    stat_a: WeightedStatistic,
    stat_b: WeightedStatistic,
    n_items: int,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> Comparison:
    """B − A with both statistics computed on the same resamples; p is the two-sided bootstrap p-value
    (twice the smaller share of resampled differences on either side of 0, with the +1 correction)."""
    if n_items <= 0:
        return Comparison(None, None, None, None, None, "paired bootstrap", 0)
    ones = np.ones((1, n_items))
    a, b = float(stat_a(ones)[0]), float(stat_b(ones)[0])
    if not (np.isfinite(a) and np.isfinite(b)):
        return Comparison(_finite(a), _finite(b), None, None, None, "paired bootstrap", n_items)
    w = resample_weights(n_items, resamples, seed, clusters)
    diffs = stat_b(w) - stat_a(w)
    finite = diffs[np.isfinite(diffs)]
    bounds = _percentile(diffs, level)
    units = n_items if clusters is None else len(set(clusters))
    interval = None if bounds is None else Interval(bounds[0], bounds[1], "paired bootstrap", units, level)
    p = None
    if finite.size:
        below, above = (finite <= 0).sum(), (finite >= 0).sum()
        p = min(1.0, 2 * (min(below, above) + 1) / (finite.size + 1))
    return Comparison(a, b, b - a, interval, p, "paired bootstrap", n_items)


def compare_correct(
    a_right: Flags,
    b_right: Flags,
    *,
    seed: int = SEED,
    clusters: Sequence[object] | None = None,
    level: float = LEVEL,
) -> Comparison:
    """Accuracy of B − A on the same items: paired bootstrap interval, exact McNemar p."""
    a, b = np.asarray(a_right, bool), np.asarray(b_right, bool)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes differ in length: {a.size} vs {b.size}")
    boot = paired_bootstrap(w_mean(a), w_mean(b), a.size, seed=seed, clusters=clusters, level=level)
    discordant = (int((a & ~b).sum()), int((~a & b).sum()))
    p = mcnemar_exact(a, b) if a.size else None
    return Comparison(boot.a, boot.b, boot.difference, boot.interval, p, "exact McNemar", a.size, discordant)


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
    keys = [k for k, c in comparisons.items() if c.p_value is not None]
    adjusted = dict(zip(keys, holm([comparisons[k].p_value or 1.0 for k in keys]), strict=True))
    out: dict[str, tuple[bool, float | None]] = {}
    for key, comp in comparisons.items():
        p = adjusted.get(key)
        worse = comp.difference is not None and comp.difference < 0 and p is not None and p < alpha
        out[key] = (not worse, p)
    return out
