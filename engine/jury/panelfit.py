"""The offline panel's fit: each seat's map on the labelled split, the seats' out-of-fold readings, the stack over
them (with its round weight and selective cuts), and the cross-validated figures of every seat and of the panel.

What `judgelab jury calibrate-panel` runs (a `calibration` run, every call recorded). Seats judge by likelihood
(the channel features of `engine.jury.likelihood`, plus the six cue headings of `engine.jury.roles` for a model
that measured better with them) or by neighbours (`engine.jury.neighbours`). The figures are stratified 5-fold
cross-validation repeated over three shuffles, not leave-one-case-out: with leave-one-out the left-out case's
label leaks through what is left (its class loses one case), a weak seat then scores far *below* chance (SmolLM2's
channel map: 0.08 on the first 60 cases), and a stack learns to invert it — 0.85 on those 60 cases and 0.25 on the
shipped ones. Stratified folds remove the same number of cases of each verdict, so no fold tells the label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.judgemaps import Calibration, fit_multinomial
from engine.jury.likelihood import JURY_FEATURES, JURY_MAP_C, jury_features
from engine.jury.neighbours import NEIGHBOURS_C, feature_names, features_of, fit_neighbours, neighbour_texts
from engine.jury.roles import CUE_FEATURES, cue_features
from engine.jury.stack import (
    STACK_C,
    discuss,
    fit_round_weight,
    fit_stack,
    selective_cuts,
    stack_features,
    stack_id,
)

JURY_SEAT = "jury.seat"  # engine.jury.likelihood_seats.JURY_SEAT (not imported: that module imports the models)
# What a likelihood seat reads: the channel features and the six cue headings (measured on the 120-case split,
# stratified 5-fold: Gemma 0.39 on the channel alone, 0.45 with the cues; SmolLM2 0.32 and 0.38; docs/jury.md).
LIKELIHOOD_READS: dict[str, tuple[str, ...]] = {
    "gemma3-270m": (*JURY_FEATURES, *CUE_FEATURES),
    "smollm2-135m": (*JURY_FEATURES, *CUE_FEATURES),
}
FOLDS = 5
REPEATS = 3
VETO_AT = 0.6  # JuryConfig.veto_at's default


def reads(model_id: str) -> tuple[str, ...]:
    return LIKELIHOOD_READS.get(model_id, (*JURY_FEATURES, *CUE_FEATURES))


def wilson(hits: int, n: int, z: float = 1.96) -> list[float] | None:
    if n == 0:
        return None
    p = hits / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    w = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(max(0.0, c - w), 4), round(min(1.0, c + w), 4)]


class Seat:
    """One seat to fit: its key (the model or embedder id), how it judges, and what it reads."""

    def __init__(self, key: str, judge: str) -> None:
        self.key = key
        self.judge = judge  # "likelihood" | "neighbours"
        self.features = list(feature_names()) if judge == "neighbours" else list(reads(key))
        self.c = NEIGHBOURS_C if judge == "neighbours" else JURY_MAP_C

    def fit_maps(
        self, rows: Sequence[dict[str, float]], labels: Sequence[str], classes: Sequence[str]
    ) -> dict[str, Any]:
        return fit_multinomial(rows, labels, classes, self.features, self.c)

    def predict(self, maps: dict[str, Any], rows: Sequence[dict[str, float]], classes: Sequence[str]) -> np.ndarray:
        cal = Calibration(name="cv", model_id="cv", version="cv", maps=maps)
        return np.asarray([cal.distribution(classes, r) for r in rows])


async def seat_rows(
    seat: Seat, cases: Sequence[Any], model: Any = None, embedder: Any = None
) -> list[dict[str, float]]:
    """The raw features of every case for one seat (every call recorded by the model or embedder)."""
    out = []
    for case in cases:
        if seat.judge == "neighbours":
            vectors = embedder.embed(neighbour_texts(case.content))
            out.append(features_of(vectors[0], vectors[1]))
            continue
        row, _ = await jury_features(model, case)
        if any(f in CUE_FEATURES for f in seat.features):
            row = {**row, **(await cue_features(model, case))[0]}
        out.append(row)
    return out


def _folds(labels: Sequence[str], seed: int, k: int = FOLDS) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn

    y = np.asarray(labels)
    folds = min(k, min(int((y == v).sum()) for v in set(labels)))
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def out_of_fold(
    seat: Seat, rows: Sequence[dict[str, float]], labels: Sequence[str], classes: Sequence[str], seed: int = 0
) -> np.ndarray:
    """Each case's reading by the seat's map fitted without its fold."""
    out = np.zeros((len(rows), len(classes)))
    for train, test in _folds(labels, seed):
        maps = seat.fit_maps([rows[i] for i in train], [labels[i] for i in train], classes)
        out[test] = seat.predict(maps, [rows[i] for i in test], classes)
    return out


def _stack_rows(keys: Sequence[str], dists: dict[str, np.ndarray], classes: Sequence[str]) -> list[dict[str, float]]:
    n = len(next(iter(dists.values())))
    return [stack_features(keys, {k: dists[k][i] for k in keys}, classes) for i in range(n)]


def _stack_features(keys: Sequence[str], classes: Sequence[str]) -> list[str]:
    return [f"{k}:{v}" for k in keys for v in classes]


def cross_validated(
    seats: Sequence[Seat],
    rows: dict[str, list[dict[str, float]]],
    labels: Sequence[str],
    classes: Sequence[str],
    repeats: int = REPEATS,
) -> dict[str, Any]:
    """Held-out readings of every seat and of the stack, over `repeats` shuffles of stratified folds: for each
    held-out fold, each seat's map is fitted on the rest, the stack on the rest's own out-of-fold readings."""
    keys = [s.key for s in seats]
    n = len(labels)
    index = [list(classes).index(y) for y in labels]
    seat_probs = {k: np.zeros((repeats, n, len(classes))) for k in keys}
    stack_probs = np.zeros((repeats, n, len(classes)))
    after = {k: np.zeros((repeats, n, len(classes))) for k in keys}
    selective: list[tuple[bool, bool]] = []
    vetoed: list[tuple[bool, bool]] = []  # (stack right, stack with the minority veto right)
    for r in range(repeats):
        for train, test in _folds(labels, seed=r):
            tr_labels = [labels[i] for i in train]
            inner = {}
            for s in seats:
                tr_rows = [rows[s.key][i] for i in train]
                maps = s.fit_maps(tr_rows, tr_labels, classes)
                seat_probs[s.key][r, test] = s.predict(maps, [rows[s.key][i] for i in test], classes)
                inner[s.key] = out_of_fold(s, tr_rows, tr_labels, classes, seed=100 + r)
            stack_rows = _stack_rows(keys, inner, classes)
            maps = fit_multinomial(stack_rows, tr_labels, classes, _stack_features(keys, classes), STACK_C)
            cal = Calibration(name="cv", model_id="cv", version="cv", maps=maps)
            test_d = {k: seat_probs[k][r, test] for k in keys}
            probs = np.asarray([cal.distribution(classes, row) for row in _stack_rows(keys, test_d, classes)])
            stack_probs[r, test] = probs
            # the round weight and the selective cut, chosen on the training folds only
            w = fit_round_weight(inner, [list(classes).index(y) for y in tr_labels])
            for j, i in enumerate(test):
                start = {k: list(test_d[k][j]) for k in keys}
                last = (discuss(start, w, 3) or [start])[-1]
                for k in keys:
                    after[k][r, i] = last[k]
            inner_stack = np.zeros((len(train), len(classes)))
            for a, b in _folds(tr_labels, seed=200 + r):
                m = fit_multinomial(
                    [stack_rows[i] for i in a],
                    [tr_labels[i] for i in a],
                    classes,
                    _stack_features(keys, classes),
                    STACK_C,
                )
                fold = Calibration(name="cv", model_id="cv", version="cv", maps=m)
                inner_stack[b] = [fold.distribution(classes, stack_rows[i]) for i in b]
            cut = selective_cuts(inner_stack, [list(classes).index(y) for y in tr_labels])["0.2"]["cut"]
            for j, i in enumerate(test):
                decided = cut is not None and probs[j].max() >= cut
                selective.append((decided, int(probs[j].argmax()) == index[i]))
                verdict = int(probs[j].argmax())
                if verdict == 0 and any(test_d[k][j][-1] >= VETO_AT for k in keys):
                    verdict = (len(classes) - 1) // 2
                vetoed.append((int(probs[j].argmax()) == index[i], verdict == index[i]))
    return {
        "seats": seat_probs,
        "stack": stack_probs,
        "after": after,
        "selective": selective,
        "index": index,
        "vetoed": vetoed,
    }


def figures(
    probs: np.ndarray, index: Sequence[int], languages: Sequence[str], classes: Sequence[str]
) -> dict[str, Any]:
    """Accuracy (mean over repeats; the interval is Wilson's on one repeat's n cases), per language, per verdict."""
    right = probs.argmax(axis=2) == np.asarray(index)[None, :]
    n = right.shape[1]
    acc = float(right.mean())
    lang = np.asarray(languages)
    y = np.asarray(index)
    out: dict[str, Any] = {"accuracy": round(acc, 4), "interval": wilson(round(acc * n), n), "cases": n}
    out["by_language"] = {
        str(code): {
            "accuracy": round(float(right[:, lang == code].mean()), 4),
            "cases": int((lang == code).sum()),
            "interval": wilson(
                round(float(right[:, lang == code].mean()) * int((lang == code).sum())), int((lang == code).sum())
            ),
        }
        for code in sorted(set(languages))
    }
    out["recall"] = {v: round(float(right[:, y == k].mean()), 4) for k, v in enumerate(classes) if (y == k).any()}
    return out


MIN_PER_VERDICT = 5  # a verdict held out in each of the 5 folds, and the nested fit still sees every verdict


def split_problem(labels: Sequence[str], classes: Sequence[str]) -> str:
    """'' when a panel can be fitted and measured on these labels; else why, in one line (checked before any
    model is loaded: the model pass takes minutes)."""
    unknown = sorted({v for v in labels if v not in classes})
    if unknown:
        return f"gold {unknown[0]!r} is not one of {', '.join(classes)}"
    short = [f"{v} {labels.count(v)}" for v in classes if labels.count(v) < MIN_PER_VERDICT]
    if short:
        return (
            f"stratified {FOLDS}-fold cross-validation needs at least {MIN_PER_VERDICT} cases of each verdict; "
            f"the split has {', '.join(short)}"
        )
    return ""


def fit_panel(
    seats: Sequence[Seat],
    rows: dict[str, list[dict[str, float]]],
    cases: Sequence[dict[str, Any]],
    classes: Sequence[str],
    source: Path | str,
    repeats: int = REPEATS,
) -> list[Calibration]:
    """Every seat's map and the stack, each with its cross-validated figures (ValueError: a split too small)."""
    labels = [str(c["gold"]) for c in cases]
    problem = split_problem(labels, classes)
    if problem:
        raise ValueError(problem)
    languages = [str(c.get("language") or "?") for c in cases]
    keys = [s.key for s in seats]
    cv = cross_validated(seats, rows, labels, classes, repeats)
    index = cv["index"]
    out = _seat_calibrations(seats, rows, cases, classes, source, cv, languages, repeats)
    oof = {s.key: out_of_fold(s, rows[s.key], labels, classes) for s in seats}
    stack_fig = figures(cv["stack"], index, languages, classes)
    decided = [d for d, _ in cv["selective"]]
    right_decided = [ok for d, ok in cv["selective"] if d]
    per_repeat = len(labels)

    stack_metrics = {
        "protocol": f"stratified {FOLDS}-fold, {repeats} shuffles; the stack fitted on each training part's own "
        "out-of-fold readings",
        "cross_validated": stack_fig,
        "seats_cross_validated": {k: figures(cv["seats"][k], index, languages, classes)["accuracy"] for k in keys},
        "selective_cross_validated": {
            "rate": 0.2,
            "coverage": round(float(np.mean(decided)), 4) if decided else None,
            "coverage_interval": wilson(round(float(np.mean(decided)) * per_repeat), per_repeat) if decided else None,
            "error": round(1 - float(np.mean(right_decided)), 4) if right_decided else None,
            "error_interval": (
                wilson(
                    round((1 - float(np.mean(right_decided))) * len(right_decided) / repeats),
                    max(1, round(len(right_decided) / repeats)),
                )
                if right_decided
                else None
            ),
        },
        "minority_veto_cross_validated": {
            "veto_at": VETO_AT,
            "accuracy_without": round(float(np.mean([a for a, _ in cv["vetoed"]])), 4),
            "accuracy_with": round(float(np.mean([b for _, b in cv["vetoed"]])), 4),
        },
        "rounds_cross_validated": _rounds_figures(cv, keys, classes),
    }
    stack_rows = _stack_rows(keys, oof, classes)
    cv_stack = np.zeros((len(labels), len(classes)))
    for train, test in _folds(labels, seed=7):
        m = fit_multinomial(
            [stack_rows[i] for i in train], [labels[i] for i in train], classes, _stack_features(keys, classes), STACK_C
        )
        fold = Calibration(name="cv", model_id="cv", version="cv", maps=m)
        cv_stack[test] = [fold.distribution(classes, stack_rows[i]) for i in test]
    out.append(fit_stack(keys, oof, labels, classes, stack_id(keys), source, STACK_C, stack_metrics, cv_stack))
    return out


def _seat_calibrations(
    seats: Sequence[Seat],
    rows: dict[str, list[dict[str, float]]],
    cases: Sequence[dict[str, Any]],
    classes: Sequence[str],
    source: Path | str,
    cv: dict[str, Any],
    languages: Sequence[str],
    repeats: int,
) -> list[Calibration]:
    """Each seat's map fitted on the whole split, with its cross-validated figures."""
    labels = [str(c["gold"]) for c in cases]
    index = cv["index"]
    out: list[Calibration] = []
    for s in seats:
        seat_fig = figures(cv["seats"][s.key], index, languages, classes)
        metrics = {"cross_validated": seat_fig, "protocol": f"stratified {FOLDS}-fold, {repeats} shuffles"}
        if s.judge == "neighbours":
            full = np.asarray([[r[f"full_{i}"] for i in range(len(s.features) // 2)] for r in rows[s.key]])
            last = np.asarray([[r[f"last_{i}"] for i in range(len(s.features) // 2)] for r in rows[s.key]])
            out.append(fit_neighbours(cases, full, last, classes, source, s.c, metrics))
        else:
            out.append(
                Calibration.fitted(
                    JURY_SEAT,
                    s.key,
                    s.fit_maps(rows[s.key], labels, classes),
                    source=source,
                    n_items=len(labels),
                    metrics=metrics,
                    notes="p(label) = softmax of a multinomial logistic regression over "
                    f"{', '.join(s.features)} (C={s.c}); figures: {metrics['protocol']}",
                )
            )
    return out


def _rounds_figures(cv: dict[str, Any], keys: Sequence[str], classes: Sequence[str]) -> dict[str, Any]:
    """The majority of the seats' positions after phase 1 and after the rounds, paired on the same cases (exact
    McNemar on the first shuffle), and the share of cases in which a round moved someone."""
    from scipy.stats import binomtest  # heavy: scipy

    def majority(d: dict[str, np.ndarray]) -> np.ndarray:
        votes = np.stack([d[k].argmax(axis=2) for k in keys])  # seats × repeats × cases
        counts = np.stack([(votes == c).sum(axis=0) for c in range(len(classes))])  # classes × repeats × cases
        # ties go to the more severe verdict (the jury's default tie policy)
        return np.asarray(counts.shape[0] - 1 - counts[::-1].argmax(axis=0))

    y = np.asarray(cv["index"])[None, :]
    before = majority(cv["seats"]) == y
    after = majority(cv["after"]) == y
    moved = np.stack([cv["after"][k].argmax(axis=2) != cv["seats"][k].argmax(axis=2) for k in keys]).any(axis=0)
    only_before = int((before[0] & ~after[0]).sum())
    only_after = int((~before[0] & after[0]).sum())
    mcnemar = binomtest(only_after, only_before + only_after, 0.5).pvalue if only_before + only_after else 1.0
    return {
        "majority_after_phase1": round(float(before.mean()), 4),
        "majority_after_rounds": round(float(after.mean()), 4),
        "cases_with_a_move": round(float(moved.mean()), 4),
        "first_shuffle_only_phase1_right": only_before,
        "first_shuffle_only_rounds_right": only_after,
        "first_shuffle_mcnemar_p": round(float(mcnemar), 4),
    }
