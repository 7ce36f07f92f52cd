"""Judge diagnostics: does a judge carry measurable signal, does its scale move, are its seats one judgment?

Shown wherever a judge is offered (its page, the scorecard, the CLI); nothing is hidden — the researcher still
chooses — but nobody picks a coin flip without being told. Three marks:

- **No measurable signal**: the metric's 95 % interval contains chance (accuracy ∋ the majority-class rate,
  AUC ∋ 0.5, top-1 ∋ the share a random pick would get), or a fitted coefficient has the wrong sign (the map
  runs backwards: more evidence for the label lowers its probability).
- **Flat scale**: a rubric whose scores sit in a narrow band (interquartile range under an eighth of the scale,
  0.5 on a 1–5 scale) or never cross a cut-off, so its level never changes.
- **Identical by construction**: seats with the same model, method and input give one judgment repeated; κ, α
  and "the discussion changed" are then n/a, never agreement.

For a shipped map the figures are its stored cross-validated ones (data/calibration/*.json): accuracy and top-1
get Wilson intervals from their counts, AUC the Hanley–McNeil interval from its class counts (the per-item
predictions are not stored, so no bootstrap). `judgelab calibrate-judge` stores the diagnosis with each map it
fits.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine import stats
from engine.judgemaps import CALIBRATION_DIR, Calibration
from engine.mechanism import JudgeMapFacts
from engine.registry import mechanisms

Mark = Literal["signal", "no_signal", "flat_scale", "identical", "undecided"]
MARK_TEXT: dict[str, str] = {
    "signal": "measurable signal",
    "no_signal": "no measurable signal",
    "flat_scale": "flat scale",
    "identical": "identical by construction",
    "undecided": "not enough data to tell",
}
MARK_ICON: dict[str, str] = {"signal": "✅", "no_signal": "⚠️", "flat_scale": "⚠️", "identical": "ℹ️", "undecided": "❔"}


def _map_facts() -> dict[str, JudgeMapFacts]:
    """Every registered mechanism's fitted judge maps by name (`MechanismSpec.maps`)."""
    return {facts.name: facts for spec in mechanisms() for facts in spec.maps}


def expected_signs(name: str) -> Mapping[str, Mapping[str, int]]:
    """A map's class → feature → the sign its coefficient must have (evidence *for* the label must raise it)."""
    facts = _map_facts().get(name)
    return facts.signs if facts is not None else {}


def facts_of(name: str) -> JudgeMapFacts | None:
    """The facts of a map: its own, else its mechanism's `family` facts (`jury.seat` → `jury.likelihood`'s)."""
    known = _map_facts()
    if name in known:
        return known[name]
    head = name.partition(".")[0]
    return next((f for f in known.values() if f.family and f.name.partition(".")[0] == head), None)


def split_of_map(name: str) -> tuple[str, str] | None:
    """The labelled split a map is fitted on, and the field of its items that holds the label."""
    facts = facts_of(name)
    return (facts.split, facts.label) if facts is not None else None


@dataclass(frozen=True)
class Diagnosis:
    judge: str
    mark: Mark
    text: str  # one sentence, for a page or a terminal
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{MARK_ICON[self.mark]} {MARK_TEXT[self.mark]}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"label": self.label}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        mark = str(data.get("mark", "undecided"))
        return cls(
            judge=str(data.get("judge", "")),
            mark=mark if mark in MARK_TEXT else "undecided",  # type: ignore[arg-type]
            text=str(data.get("text", "")),
            evidence=dict(data.get("evidence") or {}),
        )


def accuracy_vs_chance(judge: str, right: int, n: int, chance: float, what: str = "accuracy") -> Diagnosis:
    """A rate against the rate of always answering the most common label (or of a random pick)."""
    interval = stats.wilson(right, n)
    if interval is None:
        return Diagnosis(judge, "undecided", f"no {what} measured yet")
    evidence = {what: round(right / n, 4), f"{what}_ci": interval.as_list(), "chance": round(chance, 4), "n": n}
    figure = stats.fmt(right / n, interval)
    if interval.contains(chance):
        return Diagnosis(
            judge,
            "no_signal",
            f"{what} {figure} on {n} items: its 95 % interval contains chance ({chance:.2f}), so the judge may be "
            "guessing",
            evidence,
        )
    if interval.high < chance:
        return Diagnosis(
            judge,
            "no_signal",
            f"{what} {figure} on {n} items: below chance ({chance:.2f}) — worse than guessing",
            evidence,
        )
    return Diagnosis(judge, "signal", f"{what} {figure} on {n} items, above chance ({chance:.2f})", evidence)


def hanley_mcneil(auc: float, positives: int, negatives: int, level: float = stats.LEVEL) -> stats.Interval | None:
    """The AUC's normal-approximation interval from its class counts (Hanley & McNeil 1982), for an AUC
    stored without its per-item scores."""
    if positives < 1 or negatives < 1:
        return None
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc**2) + (negatives - 1) * (q2 - auc**2)) / (
        positives * negatives
    )
    z = {0.95: 1.959964, 0.9: 1.644854, 0.99: 2.575829}.get(level, 1.959964)
    half = z * math.sqrt(max(var, 0.0))
    if half <= 1e-12:  # at 0 or 1 its variance vanishes: a conservative Wilson bound instead (`stats.auc_bound`)
        n_eff = min(positives, negatives)
        w = stats.wilson(round(auc * n_eff), n_eff, level)
        assert w is not None
        return stats.Interval(w.low, w.high, "wilson (pairs, smaller class)", positives + negatives, level)
    return stats.Interval(max(0.0, auc - half), min(1.0, auc + half), "Hanley–McNeil", positives + negatives, level)


def auc_vs_chance(judge: str, auc: float | None, interval: stats.Interval | None, n: int) -> Diagnosis:
    if auc is None or interval is None:
        return Diagnosis(judge, "undecided", "no AUC measured yet (one class only, or no items)")
    evidence = {"auc": round(auc, 4), "auc_ci": interval.as_list(), "chance": 0.5, "n": n}
    figure = stats.fmt(auc, interval)
    if interval.contains(0.5):
        return Diagnosis(
            judge, "no_signal", f"AUC {figure} on {n} items: its interval contains 0.5 (a coin flip)", evidence
        )
    if interval.high < 0.5:
        return Diagnosis(judge, "no_signal", f"AUC {figure} on {n} items: it ranks backwards", evidence)
    return Diagnosis(judge, "signal", f"AUC {figure} on {n} items, above 0.5", evidence)


def logistic_maps_problem(cal: Calibration, expected: Mapping[str, Sequence[str]]) -> str:
    """'' when the file holds, for each name, a logistic map over exactly those features (in that order), else
    why: a judge's `check` of its own maps (an adopted or edited file with other features is refused, never
    half-applied)."""
    for name, features in expected.items():
        fitted = cal.maps.get(name)
        if fitted is None:
            return f"no {name} map"
        if fitted.kind != "logistic" or list(fitted.features) != list(features):
            return f"{name} must be a logistic map over {', '.join(features)}"
    return ""


def wrong_signs(calibration: Calibration) -> list[str]:
    """'map.feature' for each coefficient whose sign contradicts what its feature means."""
    expected = expected_signs(calibration.name)
    out = []
    for map_name, signs in expected.items():
        fitted = calibration.maps.get(map_name)
        if fitted is None or fitted.kind != "logistic":
            continue
        for feature, sign in signs.items():
            if feature in fitted.features:
                coef = fitted.coef[fitted.features.index(feature)]
                if coef * sign < 0:
                    out.append(f"{map_name}.{feature} ({coef:+.3f})")
    return out


def flat_scale(
    judge: str, scores: Sequence[float], low: float = 1.0, high: float = 5.0, cutoffs: Sequence[float] = ()
) -> Diagnosis:
    """A rubric's scores: flat when they never cross any cut-off (every line gets the same level), or when their
    interquartile range is under an eighth of the scale (0.5 on 1–5) with no cut-off inside it. A narrow middle
    half that a cut-off splits still gives typical lines different levels (a calibrated rubric's mean is
    compressed, not flat)."""
    values = np.asarray([s for s in scores if s is not None and math.isfinite(s)], dtype=float)
    if values.size < 4:
        return Diagnosis(judge, "undecided", f"{values.size} scores: too few to judge the scale")
    q1, q3 = np.percentile(values, [25, 75])
    iqr = float(q3 - q1)
    sides = {(bool(values.min() >= c), bool(values.max() >= c)) for c in cutoffs}
    never_crosses = bool(cutoffs) and all(lo_side == hi_side for lo_side, hi_side in sides)
    evidence = {"iqr": round(iqr, 4), "min": float(values.min()), "max": float(values.max()), "n": int(values.size)}
    narrow = iqr < (high - low) / 8 and not any(q1 < c <= q3 for c in cutoffs)
    if narrow or never_crosses:
        why = []
        if narrow:
            why.append(f"half its scores sit within {iqr:.2f} of each other on a {low:g}–{high:g} scale")
        if never_crosses:
            why.append("they never cross a cut-off, so every line gets the same level")
        return Diagnosis(judge, "flat_scale", "; ".join(why), evidence)
    return Diagnosis(
        judge, "signal", f"scores spread over {values.min():.2f}–{values.max():.2f} (IQR {iqr:.2f})", evidence
    )


def identical_seats(judge: str, seats: int) -> Diagnosis:
    return Diagnosis(
        judge,
        "identical",
        f"{seats} seats with the same model, method and input give one judgment repeated: κ, α and "
        "'the discussion changed' are n/a",
        {"seats": seats},
    )


@dataclass(frozen=True)
class CrossValidated:
    """A map's stored cross-validated accuracy (`metrics.cross_validated`, as `judgelab jury calibrate-panel`
    writes it), read defensively: a map file is input, and a figure of the wrong type is no figure."""

    accuracy: float
    low: float
    high: float
    cases: int
    by_language: tuple[tuple[str, float, int], ...] = ()


def number(value: object) -> float | None:
    """A finite number read from a file (not a bool, not a string, not an integer too large for a float), else
    None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        found = float(value)
    except OverflowError:
        return None
    return found if math.isfinite(found) else None


def share(value: object) -> float | None:
    """A stored rate in [0, 1], or None for anything else (a string, NaN, a bool, out of range)."""
    found = number(value)
    return found if found is not None and 0 <= found <= 1 else None


@dataclass(frozen=True)
class Selective:
    """A stack map's stored selective figure (`metrics.selective_cross_validated`): at `rate` errors allowed among
    decided cases, the share it decided and the error it had there, cross-validated."""

    rate: float
    coverage: float
    error: float | None
    coverage_interval: tuple[float, float] | None = None
    error_interval: tuple[float, float] | None = None


def selective_figure(metrics: Mapping[str, Any]) -> Selective | None:
    fig = metrics.get("selective_cross_validated")
    if not isinstance(fig, Mapping):
        return None
    rate, coverage = share(fig.get("rate")), share(fig.get("coverage"))
    if rate is None or coverage is None:
        return None
    return Selective(
        rate,
        coverage,
        share(fig.get("error")),
        _interval(fig.get("coverage_interval")),
        _interval(fig.get("error_interval")),
    )


def _interval(value: object) -> tuple[float, float] | None:
    bounds = [share(x) for x in value] if isinstance(value, list | tuple) and len(value) == 2 else []
    low, high = (bounds + [None, None])[:2]
    return (low, high) if low is not None and high is not None and low <= high else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9 else None


def cross_validated(metrics: Mapping[str, Any], key: str = "cross_validated") -> CrossValidated | None:
    """The figure under `key`, or None when there is none or it is damaged."""
    fig = metrics.get(key)
    if not isinstance(fig, Mapping):
        return None
    acc, cases, ci = share(fig.get("accuracy")), _count(fig.get("cases")), fig.get("interval")
    bounds = [share(x) for x in ci] if isinstance(ci, list | tuple) and len(ci) == 2 else [None, None]
    low, high = bounds
    if acc is None or cases is None or low is None or high is None or not low <= acc <= high:
        return None
    langs = fig.get("by_language")
    by_language = []
    for code, v in (langs if isinstance(langs, Mapping) else {}).items():
        lang_acc = share(v.get("accuracy")) if isinstance(v, Mapping) else None
        lang_n = _count(v.get("cases")) if isinstance(v, Mapping) else None
        if lang_acc is not None and lang_n is not None and isinstance(code, str) and len(code) <= 8:
            by_language.append((code, lang_acc, lang_n))
    return CrossValidated(acc, low, high, cases, tuple(by_language))


def _split_labels(name: str, directory: Path) -> list[Any]:
    split = split_of_map(name)
    if split is None:
        return []
    path = directory / split[0]
    if not path.is_file():
        return []
    labels = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            labels.append(json.loads(line).get(split[1]))
    return labels


def _top1_chance(labels: Sequence[Any]) -> tuple[float, int] | None:
    """The top-1 a random pick gets on a split whose labels are participant → should speak (speakers ÷
    participants, averaged over items with a speaker), and how many such items there are."""
    shares = []
    for item in labels:
        if isinstance(item, Mapping) and any(item.values()):
            shares.append(sum(bool(v) for v in item.values()) / len(item))
    return (sum(shares) / len(shares), len(shares)) if shares else None


def calibration_diagnosis(calibration: Calibration, directory: Path | None = None) -> Diagnosis:
    """The diagnosis of a fitted judge from its stored cross-validated figures and its split's labels."""
    directory = directory or CALIBRATION_DIR
    judge = f"{calibration.name} · {calibration.model_id}"
    backwards = wrong_signs(calibration)
    if backwards:
        return Diagnosis(
            judge,
            "no_signal",
            "the fitted map runs backwards — more evidence for the label lowers its score (coefficient "
            + ", ".join(backwards)
            + ")",
            {"wrong_signs": backwards},
        )
    m = calibration.metrics
    labels = _split_labels(calibration.name, directory)
    facts = facts_of(calibration.name)
    figure = facts.figure if facts is not None else "auc"
    if figure == "accuracy" and isinstance(m.get("loo_case_accuracy"), int | float) and labels:
        n = int(m.get("cases") or len(labels))
        majority = Counter(labels).most_common(1)[0][1] / len(labels)
        return accuracy_vs_chance(judge, round(float(m["loo_case_accuracy"]) * n), n, majority, "accuracy")
    cv = cross_validated(m)
    if figure == "accuracy" and cv is not None and labels:
        majority = Counter(labels).most_common(1)[0][1] / len(labels)
        return accuracy_vs_chance(judge, round(cv.accuracy * cv.cases), cv.cases, majority, "accuracy")
    if figure == "own_auc":  # its label is per dialogue (anyone should speak): its own interval
        low_high = m.get("cv_auc_ci")
        auc_value = number(m.get("cv_auc"))
        if auc_value is not None and isinstance(low_high, list) and len(low_high) == 2:
            low, high = (number(v) for v in low_high)
            if low is not None and high is not None:
                interval = stats.Interval(low, high, "bootstrap", calibration.n_items)
                return auc_vs_chance(judge, auc_value, interval, calibration.n_items)
    if figure == "auc" and isinstance(m.get("cv_auc"), int | float) and labels:
        positives = sum(bool(v) for v in labels)
        auc = float(m["cv_auc"])
        return auc_vs_chance(judge, auc, hanley_mcneil(auc, positives, len(labels) - positives), len(labels))
    if figure == "top1" and isinstance(m.get("cv_top1"), int | float):
        chance = _top1_chance(labels)
        if chance is not None:
            share, n = chance
            return accuracy_vs_chance(judge, round(float(m["cv_top1"]) * n), n, share, "top-1")
    return Diagnosis(judge, "undecided", "no cross-validated figure stored with this map: refit it to measure")


def shipped_diagnoses(directory: Path | None = None) -> list[Diagnosis]:
    """Every shipped map's diagnosis, by file name."""
    directory = directory or CALIBRATION_DIR
    out = []
    for path in sorted(directory.glob("*.json")):
        calibration = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
        stored = calibration.metrics.get("diagnosis")
        out.append(
            Diagnosis.from_dict(stored)
            if isinstance(stored, Mapping)
            else calibration_diagnosis(calibration, directory)
        )
    return out


def diagnosis_for(name: str, model_id: str, directory: Path | None = None) -> Diagnosis | None:
    """The diagnosis of the map a judge would use (None when no map is shipped for it)."""
    directory = directory or CALIBRATION_DIR
    path = directory / f"{name}.{model_id}.json"
    if not path.is_file():
        return None
    calibration = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
    stored = calibration.metrics.get("diagnosis")
    if isinstance(stored, Mapping):
        return Diagnosis.from_dict(stored)
    return calibration_diagnosis(calibration, directory)
