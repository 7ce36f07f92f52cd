"""Evidence for an experiment table: each cell's interval on the metric, and which cells tie with the best.

Every cell of an experiment is decided on the same items, so cells compare *paired*. A mechanism's `decide`
returns, beside its metrics, the per-item outcomes under `OUTCOMES` (kept out of the table, stored with the
cell): speak / stay quiet against the label for the hand raise, right or wrong per case for the jury, the score
and the correctness per item for the confidence lab. From those:

- each cell's 95 % interval: a seeded bootstrap over clusters (a dialogue's decisions, a case) — one matrix of
  cluster multiplicities shared by every cell, each cell reduced to per-cluster sufficient statistics (TP/FP/FN,
  right/n, per-bin sums), so a 1,000-cell table is a few tensor products, not 1,000 bootstraps;
- every cell against the best on the same resamples (paired): exact McNemar for accuracy of right/wrong outcomes,
  otherwise a Wald test of the difference with its paired-bootstrap standard error (the percentile p cannot go
  below 1/1,000, too coarse for Holm over many cells), Holm-adjusted over all cells; a cell is **tied with
  best** unless it is significantly worse after adjustment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import stats
from engine.comparison import compare_items, with_holm
from engine.outcomes import MALFORMED, cell_items

OUTCOMES = "_outcomes"  # the key of `decide`'s per-item outcomes (never a table column)
TIE_RESAMPLES = 1000
ECE_BINS = 10


def split_outcomes(values: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """A cell's metrics without its outcomes, and the outcomes (None when the mechanism gives none)."""
    metrics = {k: v for k, v in values.items() if k != OUTCOMES}
    outcomes = values.get(OUTCOMES)
    return metrics, outcomes if isinstance(outcomes, Mapping) else None


def binary_outcomes(
    predicted: Sequence[bool], gold: Sequence[bool], clusters: Sequence[int], keys: Sequence[str] = ()
) -> dict[str, Any]:
    """Decisions against labels (the hand raise): compact, one character per decision; `keys` name the items
    (dialogue/participant) for a per-item diff of two cells."""
    return {
        "kind": "binary",
        "pred": "".join("1" if p else "0" for p in predicted),
        "gold": "".join("1" if g else "0" for g in gold),
        "cluster": list(clusters),
        **({"keys": list(keys)} if keys else {}),
    }


def correct_outcomes(right: Sequence[bool | None], keys: Sequence[str] = ()) -> dict[str, Any]:
    """Right or wrong per item (the jury); '-' for an item without gold."""
    return {
        "kind": "correct",
        "right": "".join("-" if r is None else "1" if r else "0" for r in right),
        **({"keys": list(keys)} if keys else {}),
    }


def score_outcomes(
    scores: Sequence[float], correct: Sequence[bool], proceed: Sequence[bool] | None = None, keys: Sequence[str] = ()
) -> dict[str, Any]:
    """A score per item, whether the answer was right, and whether the agent went ahead without asking (the
    confidence lab)."""
    out: dict[str, Any] = {
        "kind": "scores",
        "score": [round(float(s), 6) for s in scores],
        "correct": "".join("1" if c else "0" for c in correct),
    }
    if proceed is not None:
        out["proceed"] = "".join("1" if p else "0" for p in proceed)
    if keys:
        out["keys"] = list(keys)
    return out


def label_outcomes(labels: Sequence[str], keys: Sequence[str] = ()) -> dict[str, Any]:
    """A label per item and no gold (the director's status per line): the shares of each label compare."""
    return {"kind": "labels", "labels": [str(x) for x in labels], **({"keys": list(keys)} if keys else {})}


def cell_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Cell A against cell B on the same items: the items whose outcome really differs (right→wrong, wrong→right,
    another decision — not a score that moved under the same decision) with both outputs and the gold label, and
    every metric both cells' outcomes support as B − A with its interval and p, Holm-adjusted
    (`engine.comparison.compare_items`, as for two runs)."""
    try:
        left, right = cell_items(a), cell_items(b)
    except MALFORMED as exc:  # not the shape a cell stores
        return {"error": f"a cell's stored outcomes are malformed ({type(exc).__name__}): not compared", "changes": []}
    if [x.key for x in left] != [y.key for y in right]:
        return {"error": "the cells judged different items: not compared item by item", "changes": []}
    changes = []
    for x, y in zip(left, right, strict=True):
        if x.correct is not None and y.correct is not None and x.correct != y.correct:
            change = "right→wrong" if x.correct else "wrong→right"
        elif x.label != y.label:
            change = "decision changed" if x.score is not None else "label changed"
        else:
            continue
        row: dict[str, Any] = {
            "item": x.key,
            "change": change,
            "gold": x.gold or "",
            "cell A": x.label,
            "cell B": y.label,
        }
        if x.score is not None and y.score is not None:
            row |= {"score A": round(x.score, 2), "score B": round(y.score, 2)}
        changes.append(row if x.gold else {k: v for k, v in row.items() if k != "gold"})
    comparisons = dict(compare_items(left, right))
    if str(a.get("kind")) == "labels":  # a status's share is the cell's `<status>_rate` (pass_rate, retry_rate…)
        comparisons = {(f"{k[6:].lower()}_rate" if k.startswith("share ") else k): v for k, v in comparisons.items()}
    comparisons = with_holm(comparisons)
    accuracy = comparisons.get("accuracy")
    return {
        "changes": changes,
        "comparisons": comparisons,
        "comparison": accuracy.to_dict() if accuracy else None,
        "items": len(left),
    }


def _bits(text: str) -> np.ndarray:
    bits: np.ndarray = np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord("1")
    return bits


# Per kind: metric → (sufficient statistics per item, the metric from their sums). Statistics are columns of
# an (items × m) array; the metric reads the (…, m) sums.
Family = tuple[Callable[[Mapping[str, Any]], np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _binary_stats(o: Mapping[str, Any]) -> np.ndarray:
    p, g = _bits(str(o["pred"])), _bits(str(o["gold"]))
    return np.stack([p & g, p & ~g, ~p & g, p == g, np.ones_like(p)], axis=1).astype(float)  # tp fp fn right n


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return stats.safe_div(num, den)


BINARY: dict[str, Family] = {
    "f1": (_binary_stats, lambda s: _div(2 * s[..., 0], 2 * s[..., 0] + s[..., 1] + s[..., 2])),
    "precision": (_binary_stats, lambda s: _div(s[..., 0], s[..., 0] + s[..., 1])),
    "recall": (_binary_stats, lambda s: _div(s[..., 0], s[..., 0] + s[..., 2])),
    "accuracy": (_binary_stats, lambda s: _div(s[..., 3], s[..., 4])),
}


def _correct_stats(o: Mapping[str, Any]) -> np.ndarray:
    text = str(o["right"])
    graded = np.frombuffer(text.encode("ascii"), dtype=np.uint8) != ord("-")
    return np.stack([_bits(text), graded], axis=1).astype(float)


CORRECT: dict[str, Family] = {"accuracy": (_correct_stats, lambda s: _div(s[..., 0], s[..., 1]))}


def _score_stats(o: Mapping[str, Any]) -> np.ndarray:
    s = np.asarray(o["score"], dtype=float)
    c = _bits(str(o["correct"])).astype(float)
    edges = np.linspace(0.0, 1.0, ECE_BINS + 1)
    index = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, ECE_BINS - 1)
    onehot = np.eye(ECE_BINS)[index]
    p = _bits(str(o["proceed"])).astype(float) if o.get("proceed") else np.full(s.size, np.nan)
    extra = np.stack([p, p * c, (1 - p) * (1 - c), 1 - c], axis=1)  # proceed, right & proceed, wrong & stopped, wrong
    return np.concatenate(
        [onehot * s[:, None], onehot * c[:, None], extra, ((s - c) ** 2)[:, None], np.ones((s.size, 1))], 1
    )


SCORES: dict[str, Family] = {
    "ece": (
        _score_stats,
        lambda s: _div(np.abs(s[..., :ECE_BINS] - s[..., ECE_BINS : 2 * ECE_BINS]).sum(-1), s[..., -1]),
    ),
    "brier": (_score_stats, lambda s: _div(s[..., -2], s[..., -1])),
    "proceed_rate": (_score_stats, lambda s: _div(s[..., 2 * ECE_BINS], s[..., -1])),
    "proceed_precision": (_score_stats, lambda s: _div(s[..., 2 * ECE_BINS + 1], s[..., 2 * ECE_BINS])),
    "wrong_stopped": (_score_stats, lambda s: _div(s[..., 2 * ECE_BINS + 2], s[..., 2 * ECE_BINS + 3])),
}
STATUSES = ("PASS", "WARN", "MODIFY", "RETRY")  # the director's, in order (a label kind's shares)


def _label_stats(o: Mapping[str, Any]) -> np.ndarray:
    labels = [str(x) for x in o.get("labels") or []]
    return np.array([[x == s for s in STATUSES] + [True] for x in labels], dtype=float).reshape(len(labels), -1)


def _share_of(j: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda s: _div(s[..., j], s[..., -1])


def _count_of(j: int) -> Callable[[np.ndarray], tuple[float, float]]:
    return lambda s: (s[j], s[-1])


LABELS: dict[str, Family] = {f"{x.lower()}_rate": (_label_stats, _share_of(j)) for j, x in enumerate(STATUSES)}
FAMILIES: dict[str, dict[str, Family]] = {"binary": BINARY, "correct": CORRECT, "scores": SCORES, "labels": LABELS}


def supports(outcomes: Mapping[str, Any] | None, metric: str) -> bool:
    return bool(outcomes) and metric in FAMILIES.get(str(outcomes.get("kind")), {})  # type: ignore[union-attr]


@dataclass
class TableEvidence:
    """Intervals and ties for the rows that have outcomes (by row position)."""

    metric: str
    method: str
    best: int | None = None  # row position of the best cell
    intervals: dict[int, list[float]] = field(default_factory=dict)
    tied: dict[int, bool] = field(default_factory=dict)
    p_adjusted: dict[int, float] = field(default_factory=dict)
    note: str = ""

    def annotate(self, rows: list[dict[str, Any]]) -> None:
        """Write `<metric>_ci`, `tied_with_best` and `tie_p` into the rows (in place)."""
        for i, row in enumerate(rows):
            if i in self.intervals:
                row[f"{self.metric}_ci"] = self.intervals[i]
            if i in self.tied:
                row["tied_with_best"] = self.tied[i]
                row["tie_p"] = self.p_adjusted.get(i)

    def summary(self, rows: Sequence[Mapping[str, Any]], default: int | None = None) -> dict[str, Any]:
        tied = sum(self.tied.values())
        out: dict[str, Any] = {
            "metric": self.metric,
            "method": self.method,
            "best_cell": None if self.best is None else rows[self.best].get("cell"),
            "tied_with_best": tied,
            "compared": len(self.tied),
            "note": self.note,
        }
        if default is not None and default in self.tied:
            out["default_cell"] = rows[default].get("cell")
            out["default_tied"] = self.tied[default]
        out["text"] = tie_sentence(out)
        return out


def tie_sentence(summary: Mapping[str, Any]) -> str:
    """One line for the page and the CLI."""
    if summary.get("best_cell") is None:
        return summary.get("note") or "no cell has per-item outcomes for this metric: no ties computed"
    text = (
        f"{summary['tied_with_best']} of {summary['compared']} cells are not significantly worse than the best "
        f"(cell {summary['best_cell']}) on {summary['metric']} ({summary['method']}, Holm-adjusted, 5 %)"
    )
    if summary.get("default_tied") is True and summary.get("default_cell") != summary["best_cell"]:
        text += f"; the default settings (cell {summary['default_cell']}) tie with the best: the sweep found no "
        text += "measurable improvement"
    if summary.get("note"):
        text += f" — {summary['note']}"
    return text


def table_evidence(
    outcomes: Sequence[Mapping[str, Any] | None],
    observed: Sequence[float | None],
    metric: str,
    *,
    minimize: bool = False,
    resamples: int = TIE_RESAMPLES,
    seed: int = stats.SEED,
) -> TableEvidence:
    """Intervals and ties over the rows whose outcomes support `metric` (same items in every row); outcomes not of
    the shape a cell stores (an imported or damaged experiment) leave them out and say so."""
    try:
        return _table_evidence(outcomes, observed, metric, minimize=minimize, resamples=resamples, seed=seed)
    except MALFORMED as exc:
        note = f"the cells' stored outcomes are malformed ({type(exc).__name__}): intervals and ties not computed"
        return TableEvidence(metric, "", note=note)


def _table_evidence(
    outcomes: Sequence[Mapping[str, Any] | None],
    observed: Sequence[float | None],
    metric: str,
    *,
    minimize: bool,
    resamples: int,
    seed: int,
) -> TableEvidence:
    usable = [i for i, o in enumerate(outcomes) if supports(o, metric) and isinstance(observed[i], int | float)]
    if not usable:
        return TableEvidence(metric, "", note=f"no per-item outcomes for {metric}: intervals and ties not computed")
    kinds = {str(outcomes[i]["kind"]) for i in usable}  # type: ignore[index]
    if len(kinds) != 1:
        return TableEvidence(metric, "", note="cells of different outcome kinds: not compared")
    kind = kinds.pop()
    item_stats, metric_of = FAMILIES[kind][metric]
    per_item = [item_stats(outcomes[i]) for i in usable]  # type: ignore[arg-type]
    sizes = {a.shape[0] for a in per_item}
    if len(sizes) != 1:
        return TableEvidence(metric, "", note="cells judged different numbers of items: not compared")
    first = outcomes[usable[0]]
    assert first is not None
    clusters = np.asarray(first.get("cluster") or range(sizes.pop()), dtype=np.int64)
    _, member = np.unique(clusters, return_inverse=True)
    n_clusters = int(member.max()) + 1
    # cells × clusters × statistics: each cell's sums per cluster
    suff = np.stack(
        [np.stack([np.bincount(member, a[:, j], n_clusters) for j in range(a.shape[1])], 1) for a in per_item]
    )
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples).astype(float)
    boot = metric_of(np.einsum("bk,ckm->cbm", weights, suff))  # cells × resamples
    point = metric_of(suff.sum(axis=1))  # cells
    evidence = TableEvidence(metric, "")
    tail = (1 - stats.LEVEL) / 2 * 100
    for j, i in enumerate(usable):
        finite = boot[j][np.isfinite(boot[j])]
        interval = None
        if finite.size >= resamples // 2 and n_clusters >= 2:
            low, high = np.percentile(finite, [tail, 100 - tail])
            interval = [float(low), float(high)] if high - low > 1e-12 else None  # collapsed: no width to claim
        interval = _never_certain(kind, metric, suff[j].sum(axis=0), interval)
        if interval is not None and np.isfinite(point[j]):
            value = float(point[j])
            evidence.intervals[i] = [round(min(interval[0], value), 4), round(max(interval[1], value), 4)]
    scored = [j for j in range(len(usable)) if np.isfinite(point[j])]
    if not scored:
        return evidence
    if minimize:
        best_j = min(scored, key=lambda j: (point[j], j))
    else:
        best_j = max(scored, key=lambda j: (point[j], -j))
    evidence.best = usable[best_j]
    others = [j for j in scored if j != best_j]
    if kind == "correct" and metric == "accuracy":
        evidence.method = "exact McNemar"
        p_raw = _mcnemar_against(per_item, best_j, others)
    elif n_clusters < stats.MIN_PAIRED:  # a bootstrap of so few cannot tell a worse cell from chance
        evidence.method = "paired bootstrap"
        evidence.note = (
            f"too few items: {n_clusters} paired; a paired bootstrap needs {stats.MIN_PAIRED} — no cell is called "
            "worse than the best"
        )
        p_raw = [1.0] * len(others)
    else:
        evidence.method = "paired bootstrap"
        p_raw = _bootstrap_z(boot[others] - boot[best_j], point[others] - point[best_j])
    adjusted = stats.holm(p_raw) if p_raw else []
    evidence.tied[usable[best_j]] = True
    for j, p in zip(others, adjusted, strict=True):
        worse = (point[j] > point[best_j]) if minimize else (point[j] < point[best_j])
        evidence.tied[usable[j]] = not (worse and p < 1 - stats.LEVEL)
        evidence.p_adjusted[usable[j]] = round(float(p), 6)
    return evidence


# (kind, metric) → (successes, trials) from a cell's sums: a proportion, whose interval is Wilson's, hulled with
# the cluster bootstrap's (so neither the clustering nor a collapse at 0 or 1 is lost).
E = ECE_BINS
COUNTS: dict[tuple[str, str], Callable[[np.ndarray], tuple[float, float]]] = {
    ("binary", "precision"): lambda s: (s[0], s[0] + s[1]),
    ("binary", "recall"): lambda s: (s[0], s[0] + s[2]),
    ("binary", "accuracy"): lambda s: (s[3], s[4]),
    ("correct", "accuracy"): lambda s: (s[0], s[1]),
    ("scores", "proceed_rate"): lambda s: (s[2 * E], s[-1]),
    ("scores", "proceed_precision"): lambda s: (s[2 * E + 1], s[2 * E]),
    ("scores", "wrong_stopped"): lambda s: (s[2 * E + 2], s[2 * E + 3]),
    **{("labels", f"{x.lower()}_rate"): _count_of(j) for j, x in enumerate(STATUSES)},
}


def _never_certain(kind: str, metric: str, sums: np.ndarray, boot: list[float] | None) -> list[float] | None:
    """A cell's interval as `stats.bootstrap` makes one: Wilson for a proportion (hulled with the bootstrap's),
    the Wilson bounds of precision and recall for an F1 whose bootstrap collapsed, else the bootstrap's or none."""
    counts = COUNTS.get((kind, metric))
    if counts is not None:
        k, n = counts(sums)
        usable = np.isfinite(k) and np.isfinite(n) and n >= 1 and 0 <= k <= n
        w = stats.wilson(int(round(k)), int(round(n))) if usable else None
        if w is None:
            return boot
        return [min(w.low, boot[0]), max(w.high, boot[1])] if boot else [w.low, w.high]
    if kind == "binary" and metric == "f1" and boot is None:
        tp, fp, fn = (int(round(float(x))) for x in sums[:3])
        predicted = [True] * (tp + fp) + [False] * fn
        actual = [True] * tp + [False] * fp + [True] * fn
        fallback = stats.w_f1(predicted, actual).fallback
        interval = fallback(stats.LEVEL) if fallback and predicted else None
        return None if interval is None else [interval.low, interval.high]
    return boot


def _bootstrap_z(diffs: np.ndarray, observed: np.ndarray) -> list[float]:
    """Two-sided p-values of paired differences from their bootstrap standard errors (a Wald test). Not the
    percentile p: with 1,000 resamples that cannot go below 0.002, and Holm over hundreds of cells would then
    never find any cell worse than the best, however bad."""
    from scipy.stats import norm  # scipy.stats takes ~0.5 s to import: CLI start-up time

    out = []
    for d, obs in zip(diffs, observed, strict=True):
        finite = d[np.isfinite(d)]
        se = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
        if not np.isfinite(obs):
            out.append(1.0)
        elif se == 0.0:  # the same difference in every resample: a degenerate bootstrap shows no evidence
            out.append(1.0)
        else:
            out.append(float(2 * norm.sf(abs(obs) / se)))
    return out


def _mcnemar_against(per_item: list[np.ndarray], best: int, others: list[int]) -> list[float]:
    from scipy.stats import binom  # scipy.stats takes ~0.5 s to import: CLI start-up time

    right_best, graded = per_item[best][:, 0] > 0, per_item[best][:, 1] > 0
    b, c = [], []
    for j in others:
        right = per_item[j][:, 0] > 0
        both = graded & (per_item[j][:, 1] > 0)
        b.append(int((right_best & ~right & both).sum()))
        c.append(int((~right_best & right & both).sum()))
    nb, nc = np.asarray(b), np.asarray(c)
    n = nb + nc
    p = np.where(n > 0, np.minimum(1.0, 2 * binom.cdf(np.minimum(nb, nc), np.maximum(n, 1), 0.5)), 1.0)
    return [float(x) for x in p]
