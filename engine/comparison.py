"""One comparison of two runs (or two experiment cells) on their items: every headline metric both sides share,
B − A with its interval and p-value, Holm-adjusted across the metrics compared together.

- On the items both judged (paired): exact McNemar for paired right/wrong outcomes and for the share of a label
  (speaks, PASS, ESCALATE…: a paired proportion), the paired bootstrap (over clusters where items cluster) for F1,
  AUC, ECE and Brier — `engine.stats`.
- On different items (no item in common): a two-sample test, said so in the test's name — Newcombe's interval and
  Fisher's exact p for proportions, an independent bootstrap for the rest.
- Figures are printed to the digits their interval supports (`supported_digits`).

Item outcomes come from `engine.outcomes` (a stored run's items) or from an experiment cell's outcomes
(`engine.experiments.evidence`); this module only compares them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import stats

if TYPE_CHECKING:
    from engine.outcomes import ItemOutcome

LOWER_BETTER = frozenset({"ece", "brier", "aurc"})  # metrics where a smaller value is the better one
MAX_SHARES = 8  # label values whose share is compared (beyond, the labels are free text: no shares)
HAND_LABELS = frozenset({"speaks", "stays quiet"})
NAMED_SHARES = ("speaks", "goes ahead")
ACTING = frozenset({"goes ahead", "asks first"})  # of two values, the share people watch (hands raised, acting unasked)


def compare_proportions(a_flags: stats.Flags, b_flags: stats.Flags, level: float = stats.LEVEL) -> stats.Comparison:
    """B − A of two proportions on *different* items: Newcombe's hybrid score interval (1998, method 10, from each
    side's Wilson interval; never zero-width) and Fisher's exact two-sided p."""
    test = "two-sample (Newcombe, Fisher)"
    a, b = np.asarray(a_flags, bool), np.asarray(b_flags, bool)
    n = int(a.size + b.size)
    if a.size == 0 or b.size == 0:
        return stats.Comparison(None, None, None, None, None, test, n)
    ka, kb = int(a.sum()), int(b.sum())
    pa, pb = ka / a.size, kb / b.size
    wa, wb = stats.wilson(ka, a.size, level), stats.wilson(kb, b.size, level)
    assert wa is not None and wb is not None
    low = (pb - pa) - float(np.sqrt((pb - wb.low) ** 2 + (wa.high - pa) ** 2))
    high = (pb - pa) + float(np.sqrt((wb.high - pb) ** 2 + (pa - wa.low) ** 2))
    p = stats.fisher_p([[ka, a.size - ka], [kb, b.size - kb]])
    interval = stats.Interval(max(-1.0, low), min(1.0, high), "Newcombe (two samples)", n, level)
    return stats.Comparison(pa, pb, pb - pa, interval, min(1.0, p), test, n)


def unpaired_bootstrap(
    stat_a: stats.Stat, stat_b: stats.Stat, *, resamples: int = stats.RESAMPLES, seed: int = stats.SEED
) -> stats.Comparison:
    """B − A of a statistic on *different* items: each side resampled on its own; the percentile interval and the
    two-sided bootstrap p (as `stats.paired_bootstrap`), none below `stats.MIN_PAIRED` items a side."""
    test, n = "two-sample bootstrap", stat_a.n + stat_b.n
    nan = float("nan")
    a = float(stat_a(np.ones((1, stat_a.n)))[0]) if stat_a.n else nan
    b = float(stat_b(np.ones((1, stat_b.n)))[0]) if stat_b.n else nan
    if not (np.isfinite(a) and np.isfinite(b)):
        return stats.Comparison(a if np.isfinite(a) else None, b if np.isfinite(b) else None, None, None, None, test, n)
    if min(stat_a.n, stat_b.n) < stats.MIN_PAIRED:
        few = f"too few items: {min(stat_a.n, stat_b.n)} on one side; a two-sample bootstrap needs {stats.MIN_PAIRED}"
        return stats.Comparison(a, b, b - a, None, None, test, n, reason=few)
    diffs = stat_b(stats.resample_weights(stat_b.n, resamples, seed + 1)) - stat_a(
        stats.resample_weights(stat_a.n, resamples, seed)
    )
    finite = diffs[np.isfinite(diffs)]
    if finite.size < resamples // 2 or float(np.ptp(finite)) <= 1e-12:
        same = "no interval: the difference is the same (or undefined) in most resamples"
        return stats.Comparison(a, b, b - a, None, None, test, n, reason=same)
    tail = (1 - stats.LEVEL) / 2 * 100
    low, high = (float(v) for v in np.percentile(finite, [tail, 100 - tail]))
    interval = stats.holding(stats.Interval(low, high, test, n), b - a)
    p = min(1.0, 2 * (min((finite <= 0).sum(), (finite >= 0).sum()) + 1) / (finite.size + 1))
    return stats.Comparison(a, b, b - a, interval, float(p), test, n)


def supported_digits(interval: stats.Interval | None, most: int = 4) -> int:
    """Decimals an estimate can carry given its interval: down to the first significant digit of the interval's
    width, and one more (0.1763 with an interval 0.30 wide reads 0.18; with one 0.004 wide, 0.1763). `most`
    without an interval."""
    if interval is None or not np.isfinite(interval.width) or interval.width <= 0:
        return most
    return int(min(most, max(0, -np.floor(np.log10(interval.width)) + 1)))


# ── two lists of item outcomes ───────────────────────────────────────────────────────────────────────────────


def _is_probability(items: Sequence[ItemOutcome]) -> bool:
    return all(x.score is not None and 0.0 <= x.score <= 1.0 for x in items)


def _shares(a: Sequence[ItemOutcome], b: Sequence[ItemOutcome]) -> list[str]:
    """The label values whose share is compared: every value either side gave (ordered by first use), unless the
    labels are free text."""
    labels = [x.label for x in a] + [y.label for y in b]
    values = list(dict.fromkeys(labels))
    if len(values) == 2:  # two values: one share says it all — hands raised, going ahead, else the rarer value
        named = [v for v in NAMED_SHARES if v in values]
        return named[:1] or [min(values, key=labels.count)]
    return values if 1 < len(values) <= MAX_SHARES else []


def _paired(pairs: Sequence[tuple[ItemOutcome, ItemOutcome]], seed: int) -> dict[str, stats.Comparison]:
    out: dict[str, stats.Comparison] = {}
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    graded = [(x, y) for x, y in pairs if x.correct is not None and y.correct is not None]
    if graded:
        clusters = [x.cluster or x.key for x, _ in graded]
        out["accuracy"] = stats.compare_correct(
            [bool(x.correct) for x, _ in graded], [bool(y.correct) for _, y in graded], seed=seed, clusters=clusters
        )
        if {x.gold for x, _ in graded} <= HAND_LABELS:
            gold = [x.gold == "speaks" for x, _ in graded]
            said_a, said_b = [x.label == "speaks" for x, _ in graded], [y.label == "speaks" for _, y in graded]
            for name, rate in (("precision", stats.w_precision), ("recall", stats.w_recall), ("f1", stats.w_f1)):
                out[name] = stats.paired_bootstrap(rate(said_a, gold), rate(said_b, gold), seed=seed, clusters=clusters)
    scored = [(x, y) for x, y in pairs if x.score is not None and y.score is not None and x.truth is not None]
    if scored and len({bool(x.truth) for x, _ in scored}) == 2:
        truth = [bool(x.truth) for x, _ in scored]
        sa, sb = [float(x.score or 0) for x, _ in scored], [float(y.score or 0) for _, y in scored]
        clusters = [x.cluster or x.key for x, _ in scored]
        metrics: dict[str, Callable[[stats.Values, stats.Flags], stats.Stat]] = {"auc": stats.w_auc}
        if _is_probability([x for x, _ in scored] + [y for _, y in scored]):
            metrics |= {"ece": stats.w_ece, "brier": stats.w_brier, "aurc": stats.w_aurc}
        for name, make in metrics.items():
            out[name] = stats.paired_bootstrap(make(sa, truth), make(sb, truth), seed=seed, clusters=clusters)
    if {x.label for x in a + b} <= ACTING and all(x.truth is not None for x in a):
        out |= _acting(a, b, seed)
    clusters = [x.cluster or x.key for x in a]
    for value in _shares(a, b):
        out[f"share {value}"] = stats.compare_correct(
            [x.label == value for x in a], [y.label == value for y in b], seed=seed, clusters=clusters
        )
    return out


def _acting(a: Sequence[ItemOutcome], b: Sequence[ItemOutcome], seed: int) -> dict[str, stats.Comparison]:
    """Going ahead unasked (the confidence lab's decision) against whether the answer was right: how often it went
    ahead and was right (`proceed_precision`), how often a wrong answer was stopped (`wrong_stopped`)."""
    out = {}
    for name, of in (
        ("proceed_precision", lambda x: (x.label == "goes ahead" and bool(x.truth), x.label == "goes ahead")),
        ("wrong_stopped", lambda x: (x.label == "asks first" and not x.truth, not x.truth)),
    ):
        na, da = zip(*map(of, a), strict=True)
        nb, db = zip(*map(of, b), strict=True)
        out[name] = stats.paired_bootstrap(
            stats.w_ratio(np.asarray(na, float), np.asarray(da, float)),
            stats.w_ratio(np.asarray(nb, float), np.asarray(db, float)),
            seed=seed,
        )
    return out


def _two_sample(a: Sequence[ItemOutcome], b: Sequence[ItemOutcome], seed: int) -> dict[str, stats.Comparison]:
    out: dict[str, stats.Comparison] = {}
    ga, gb = [x for x in a if x.correct is not None], [y for y in b if y.correct is not None]
    if ga and gb:
        out["accuracy"] = compare_proportions([bool(x.correct) for x in ga], [bool(y.correct) for y in gb])
        if {x.gold for x in ga + gb} <= HAND_LABELS:
            for name, rate in (("precision", stats.w_precision), ("recall", stats.w_recall), ("f1", stats.w_f1)):
                out[name] = unpaired_bootstrap(
                    rate([x.label == "speaks" for x in ga], [x.gold == "speaks" for x in ga]),
                    rate([y.label == "speaks" for y in gb], [y.gold == "speaks" for y in gb]),
                    seed=seed,
                )
    sa = [x for x in a if x.score is not None and x.truth is not None]
    sb = [y for y in b if y.score is not None and y.truth is not None]
    if sa and sb and len({bool(x.truth) for x in sa}) == 2 == len({bool(y.truth) for y in sb}):
        metrics: dict[str, Callable[[stats.Values, stats.Flags], stats.Stat]] = {"auc": stats.w_auc}
        if _is_probability(sa + sb):
            metrics |= {"ece": stats.w_ece, "brier": stats.w_brier, "aurc": stats.w_aurc}
        for name, make in metrics.items():
            out[name] = unpaired_bootstrap(
                make([float(x.score or 0) for x in sa], [bool(x.truth) for x in sa]),
                make([float(y.score or 0) for y in sb], [bool(y.truth) for y in sb]),
                seed=seed,
            )
    for value in _shares(a, b):
        out[f"share {value}"] = compare_proportions([x.label == value for x in a], [y.label == value for y in b])
    return out


RENAMED = {"share goes ahead": "proceed_rate"}  # a share with a name of its own (the confidence lab's)


def compare_items(
    a: Sequence[ItemOutcome], b: Sequence[ItemOutcome], *, seed: int = stats.SEED
) -> dict[str, stats.Comparison]:
    """Every metric both sides share, B − A: paired on the items both judged (by key), or — when they judged no
    item in common — as two samples. The p-values are Holm-adjusted across the metrics (`Comparison.p_holm`)."""
    left = {x.key: x for x in a}
    pairs = [(left[y.key], y) for y in b if y.key in left]
    if pairs:
        order = {k: i for i, k in enumerate(left)}
        pairs.sort(key=lambda p: order[p[0].key])
        out = _paired(pairs, seed)
    else:
        out = _two_sample(list(a), list(b), seed)
    return with_holm({RENAMED.get(k, k): v for k, v in out.items()})


def with_holm(comparisons: Mapping[str, stats.Comparison]) -> dict[str, stats.Comparison]:
    """The comparisons with their p-values Holm-adjusted across them (a family of tests on one pair of runs)."""
    tested = [k for k, c in comparisons.items() if c.p_value is not None and math.isfinite(c.p_value)]
    p_values = [float(comparisons[k].p_value) for k in tested]  # type: ignore[arg-type]  # finite, just checked
    adjusted = dict(zip(tested, stats.holm(p_values), strict=True))
    return {k: dataclasses.replace(c, p_holm=adjusted.get(k)) for k, c in comparisons.items()}


# Metrics whose identifier says nothing to a person: the words a table shows them by (the identifier stays the key
# of the JSON and the exports).
METRIC_WORDS = {
    "proceed_precision": "right when it goes ahead",
    "wrong_stopped": "wrong answers stopped",
    "proceed_rate": "share it goes ahead",
}


def metric_words(name: str) -> str:
    """A metric as a table shows it: `proceed_rate` → "share it goes ahead", `share unsafe_fail` → "share of unsafe
    fail" (the identifier stays the key of the JSON and the exports)."""
    if name in METRIC_WORDS:
        return METRIC_WORDS[name]
    if name.startswith("share "):
        return "share of " + name.removeprefix("share ").replace("_", " ")
    return name


def comparison_row(name: str, comp: stats.Comparison) -> dict[str, Any]:
    """One row of the comparison table (page, CLI, export): A, B, B − A with its interval, p and Holm p — each
    figure to the digits its interval supports."""
    digits = supported_digits(comp.interval) if comp.interval is not None else 2
    shown = (lambda v: "—" if v is None else f"{v:.{digits}f}") if comp.difference is not None else _plain
    better = "lower is better" if name in LOWER_BETTER else ""
    interval = (
        f"{signed(comp.interval.low, digits)} to {signed(comp.interval.high, digits)}"
        if comp.interval is not None
        else (comp.reason or "—")
    )
    paired = comp.test.startswith("two-sample") or "paired" in comp.test
    return {  # the difference, its interval and the Holm p first: what a narrow window must not cut off
        "metric": metric_words(name) + (f" ({better})" if better else ""),
        "A": shown(comp.a),
        "B": shown(comp.b),
        "B − A": "—" if comp.difference is None else signed(comp.difference, digits),
        "95 % interval": interval,
        "p (Holm)": _p(comp.p_holm),
        "p": _p(comp.p_value),
        "test": comp.test + ("" if paired else " (paired)"),
        "items": comp.n,
    }


ROUNDING = (
    "Each figure is rounded to what its interval supports, and B − A is taken before rounding (it can differ from "
    "the rounded A and B by one in the last digit); an interval that holds 0 is no evidence of a change."
)


def compact_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The comparison table without the columns every row shares (the test, the items), and those said once
    ("exact McNemar (paired) on 14 items"): the figures keep the room in a narrow window."""
    if not rows:
        return rows, ""
    tests, items = {r["test"] for r in rows}, {r["items"] for r in rows}
    drop = [c for c, values in (("test", tests), ("items", items)) if len(values) == 1]
    said = []
    if "test" in drop:
        said.append(str(rows[0]["test"]))
    if "items" in drop:
        said.append(f"on {rows[0]['items']} items")
    return [{k: v for k, v in r.items() if k not in drop} for r in rows], " ".join(said)


def signed(value: float, digits: int) -> str:
    """'+0.36', '-0.04', and '0.000' for what rounds to zero (never '-0.000')."""
    if abs(value) < 0.5 * 10**-digits:
        return f"{0:.{digits}f}"
    return f"{value:+.{digits}f}"


def _plain(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _p(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.2g}"


def stored_text(comparison: Mapping[str, Any]) -> str:
    """A comparison stored as `Comparison.to_dict()` in words: '−0.12 (−0.30 to +0.05), p 0.21, Holm 0.42
    (paired bootstrap)' — to the digits its interval supports; '' without a difference."""
    diff = comparison.get("difference")
    if not isinstance(diff, int | float) or isinstance(diff, bool) or not math.isfinite(diff):
        return ""
    ci = comparison.get("difference_ci")
    interval = None
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(_finite(v) for v in ci):
        interval = stats.Interval(float(ci[0]), float(ci[1]), "stored", 0)
    d = supported_digits(interval) if interval is not None else 2
    p, holm = comparison.get("p_value"), comparison.get("p_holm")
    spread = f" ({signed(interval.low, d)} to {signed(interval.high, d)})" if interval is not None else ""
    reason = comparison.get("difference_ci_reason")
    if interval is None and isinstance(reason, str) and reason:
        spread = f" ({reason})"
    text = f"{signed(diff, d)}{spread}"
    text += f", p {_p(p)}" if _finite(p) else ""
    text += f", Holm {_p(holm)}" if _finite(holm) and holm != p else ""
    return text + (f" ({comparison['test']})" if comparison.get("test") else "")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
