"""A hand-raise map refitted from the user's labels, compared honestly with the map in use, versioned, and
adopted only on request.

The labels of hands carry the judge's raw features (engine/handraise/conversation.py stores them with every
Speak / Skip), so the refit makes no model call. The candidate is the shipped fit (engine/handraise/calibration.py:
relevance, confidence and novelty maps learnt jointly through the will formula, at the seed's threshold) on the
labels — optionally with the shipped split — with one more relevance feature per participant (`is:<id>`): whom
this user wants to hear. It is cross-validated on the labels (folds by message, so a message's hands are never
split between fitting and testing: one message a fold up to 50 messages, 5 folds beyond), and the map in use
decides the same held-out labels: the paired comparison is exact McNemar (engine/stats.py `compare_correct`).
Saved as a new version whose provenance names the labels, it is used only once adopted (`adopt_map`); any
earlier version, or the shipped map, can be restored.

`refit_from_labels` and the versions are any mechanism's: a mechanism's `LabelSpec` names its refit (`refit`:
the hand raise's is `refit_hand_raise`, the one mechanism whose judge records features) and its map
(`map_name`)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.diagnostics import accuracy_vs_chance
from engine.events import run_context
from engine.handraise.benchmark import parse_benchmark
from engine.handraise.decisions import HandRaiseConfig, will_from
from engine.handraise.judge import novelty_of
from engine.handraise.maps import LIKELIHOOD_FEATURES, NOVELTY_FEATURES, _fit_will_maps, calibration_rows
from engine.inputs import read_text
from engine.judgemaps import (
    CALIBRATION_DIR,
    SHIPPED,
    Calibration,
    adopt_version,
    adopted_version,
    calibration_path,
    load_calibration,
    new_version,
    save_version,
    saved_versions,
)
from engine.labels.items import labelable_items
from engine.labelstore import Label, LabelError, label_specs, list_labels
from engine.mechanism import mechanism_spec, resolve_callable
from engine.store import Store
from models.source import model_source

if TYPE_CHECKING:
    from models.source import ModelLookup

# Folds of the cross-validation on the labels, by message: every message its own fold up to `FOLDS_ALL`
# messages (few labels: each held-out prediction comes from a fit on all the others), 5 beyond.
FOLDS = 5
FOLDS_ALL = 50
MIN_LABELS = 10  # usable hand labels (rows from `label_rows`) a refit needs; the Labels page counts against it
REL = LIKELIHOOD_FEATURES["relevance"]
CONF = LIKELIHOOD_FEATURES["confidence"]
NEEDED = (*REL, *CONF, *NOVELTY_FEATURES)


@dataclass
class LabelRefit:
    """A candidate map from the user's labels beside the map in use, on the same held-out labels."""

    mechanism: str
    model_id: str  # the map id (the judge model, or its ensemble's id)
    n_labels: int
    folds: int
    candidate: Calibration
    current: Calibration | None
    candidate_score: float | None
    candidate_score_ci: stats.Interval | None
    current_score: float | None
    current_score_ci: stats.Interval | None
    comparison: stats.Comparison  # candidate − current, paired, exact McNemar
    provenance: str
    held_out: list[dict[str, Any]] = field(default_factory=list)  # key, run_id, label, current, candidate
    n_split: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "model_id": self.model_id,
            "n_labels": self.n_labels,
            "n_split": self.n_split,
            "folds": self.folds,
            "candidate_version": self.candidate.version,
            "current_version": None if self.current is None else self.current.version,
            "candidate_score": _r(self.candidate_score),
            "candidate_score_ci": self.candidate_score_ci.as_list() if self.candidate_score_ci else None,
            "current_score": _r(self.current_score),
            "current_score_ci": self.current_score_ci.as_list() if self.current_score_ci else None,
            "comparison": self.comparison.to_dict(),
            "provenance": self.provenance,
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass(frozen=True)
class MapVersion:
    """One version of a map: `shipped` (data/calibration/) or one refitted from labels."""

    version: str
    created: str
    provenance: str
    in_use: bool
    n_labels: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created": self.created,
            "provenance": self.provenance,
            "in_use": self.in_use,
            "n_labels": self.n_labels,
        }


# -- rows: a labelled hand's features ----------------------------------------------------------------------------


def participant_of(label: Label) -> str:
    return str(label.context.get("participant") or label.item_key.rpartition("/")[2])


def label_rows(labels: Sequence[Label]) -> list[dict[str, Any]]:
    """One fitting row per hand label whose context holds the likelihood judge's features (others are left
    out: a judge that writes its numbers has nothing to refit)."""
    rows = []
    for lab in labels:
        if lab.mechanism != "handraise":
            continue
        features = lab.context.get("features")
        if not isinstance(features, Mapping) or not all(isinstance(features.get(f), int | float) for f in NEEDED):
            continue
        turn = lab.item_key.rpartition("/")[0]
        rows.append(
            {
                **{k: float(v) for k, v in features.items() if isinstance(v, int | float)},
                "label": lab.label == "speak",
                "participant": participant_of(lab),
                "item": f"{lab.run_id}:{turn}",
                "key": lab.item_key,
                "run_id": lab.run_id,
                "map_id": lab.context.get("map_id"),
            }
        )
    return rows


def _indicators(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One `is:<participant>` feature per participant of the user's labels (the shipped split's are not this
    user's cast: they get none)."""
    return sorted(
        {
            f"is:{r['participant']}"
            for r in rows
            if r.get("participant") and not str(r["participant"]).startswith("split:")
        }
    )


def _with_indicators(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    return [dict(r) | {n: 1.0 if n == f"is:{r.get('participant')}" else 0.0 for n in names} for r in rows]


def will_under(cal: Calibration, row: Mapping[str, Any], config: HandRaiseConfig) -> float:
    """The raw will (no cooldown, no over-raise: a label judges the hand itself) of a row under a map."""
    values = {k: float(v) for k, v in row.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    values[f"is:{row.get('participant')}"] = 1.0
    rel, conf = cal.apply("relevance", values), cal.apply("confidence", values)
    return will_from(rel, novelty_of(cal, values), conf, config.weights)


def fit_candidate(rows: Sequence[Mapping[str, Any]], config: HandRaiseConfig | None = None) -> dict[str, Any]:
    """The maps fitted on rows (`_fit_will_maps` with the participants' indicators in the relevance map)."""
    config = config or HandRaiseConfig()
    names = _indicators(rows)
    return _fit_will_maps(_with_indicators(rows, names), [*REL, *names], list(CONF), config)


def candidate_calibration(
    rows: Sequence[Mapping[str, Any]], model_id: str, provenance: str, config: HandRaiseConfig | None = None
) -> Calibration:
    version = new_version()
    fit = fit_candidate(rows, config)
    return Calibration(
        name=map_name("handraise"),
        model_id=model_id,
        version=version,
        maps=fit["maps"],
        fitted_on=provenance,
        data_sha256="",
        n_items=len(rows),
        fitted_at=version,
        metrics=fit["metrics"],
        notes=provenance,
    )


def _folds(rows: Sequence[Mapping[str, Any]], folds: int, seed: int) -> dict[str, int]:
    groups = sorted({str(r["item"]) for r in rows})
    random.Random(seed).shuffle(groups)
    return {g: i % folds for i, g in enumerate(groups)}


def cross_validated(
    rows: Sequence[Mapping[str, Any]],
    config: HandRaiseConfig,
    *,
    folds: int = FOLDS,
    seed: int = 0,
    extra: Sequence[Mapping[str, Any]] = (),
) -> list[bool]:
    """Each label's held-out prediction (speak?) from a candidate fitted on the other folds (+ `extra` rows)."""
    fold_of = _folds(rows, folds, seed)
    names = _indicators([*rows, *extra])
    predicted = [False] * len(rows)
    for f in range(min(folds, len(set(fold_of.values())))):
        train = [r for r in rows if fold_of[str(r["item"])] != f] + list(extra)
        test_ix = [i for i, r in enumerate(rows) if fold_of[str(r["item"])] == f]
        if not test_ix:
            continue
        if len({bool(r["label"]) for r in train}) < 2:
            raise LabelError("labels: a fold's fitting labels are all one value — label more Speak and Skip")
        predict: Callable[[list[dict[str, Any]]], list[float]] = _fit_will_maps(
            _with_indicators(train, names), [*REL, *names], list(CONF), config, fit_only=True
        )["predict"]
        wills = predict(_with_indicators([rows[i] for i in test_ix], names))
        for i, w in zip(test_ix, wills, strict=True):
            predicted[i] = w >= config.threshold
    return predicted


def _map_id(rows: Sequence[Mapping[str, Any]], labels: Sequence[Label]) -> str:
    ids = [str(r["map_id"]) for r in rows if r.get("map_id")]
    if ids:
        return max(sorted(set(ids)), key=ids.count)
    models = [str(lab.context.get("judge_model")) for lab in labels if lab.context.get("judge_model")]
    return max(sorted(set(models)), key=models.count) if models else HandRaiseConfig().judge_model


def _fittable_rows(labels: Sequence[Label]) -> list[dict[str, Any]]:
    """The hand labels' rows with the judge's features, or LabelError saying why they cannot be fitted."""
    rows = label_rows(labels)
    if len(rows) < MIN_LABELS:
        raise LabelError(
            f"labels: {len(rows)} hand label(s) with the judge's features — at least {MIN_LABELS} are needed "
            "to refit "
            "(labels of the likelihood judge's hands carry them)"
        )
    if len({bool(r["label"]) for r in rows}) < 2:
        raise LabelError("labels: every hand label has one value — label both Speak and Skip")
    return rows


def _diagnosis(name: str, model_id: str, right: Sequence[bool], truth: Sequence[bool]) -> dict[str, Any]:
    """What the refit measured, stored as the map's diagnosis: pages that offer the map read it (not "no
    figure")."""
    speak_share = sum(truth) / len(truth)
    return accuracy_vs_chance(
        f"{name} · {model_id} (from your labels)",
        sum(right),
        len(right),
        max(speak_share, 1 - speak_share),
        "agreement with your labels",
    ).to_dict()


def refittable() -> tuple[str, ...]:
    """The mechanisms whose judge can be refitted from labels (`LabelSpec.refit`: it records the features a fit
    reads), in the labels' order."""
    return tuple(name for name, spec in label_specs().items() if spec.refit)


def refit_from_labels(
    store: Store,
    *,
    mechanism: str = "handraise",
    user: str | None = None,
    with_split: bool = False,
    seed: int = 0,
    labels: Sequence[Label] | None = None,
    models: ModelLookup | None = None,
    config: HandRaiseConfig | None = None,
) -> LabelRefit:
    """Refit `mechanism`'s judge from the user's labels, by its own refit (`LabelSpec.refit`); LabelError when it
    has none (its judge records no features) or the labels cannot be fitted."""
    names = refittable()
    if mechanism not in names:
        covered = " and ".join(f"the {mechanism_spec(name).label.lower()}" for name in names)
        raise LabelError(f"mechanism: refitting from labels covers {covered}; {mechanism!r} has no recorded features")
    refit: LabelRefit = resolve_callable(label_specs()[mechanism].refit)(
        store, user=user, with_split=with_split, seed=seed, labels=labels, models=models, config=config
    )
    return refit


def refit_hand_raise(
    store: Store,
    *,
    user: str | None = None,
    with_split: bool = False,
    seed: int = 0,
    labels: Sequence[Label] | None = None,
    models: ModelLookup | None = None,
    config: HandRaiseConfig | None = None,
) -> LabelRefit:
    """The hand raise's refit (its `LabelSpec.refit`): fit a candidate map on the user's hand labels (with the
    shipped split's rows when `with_split`: their features need the judge model, `models`, and are recorded as a
    `calibration` run), cross-validate it on the labels and compare it with the map in use on the same held-out
    labels. Raises LabelError when the labels cannot be fitted (too few, one value only, no recorded features)."""
    config = config or HandRaiseConfig()
    labels = list(labels) if labels is not None else list_labels(store, mechanism="handraise", user=user)
    rows = _fittable_rows(labels)
    model_id = _map_id(rows, labels)
    rows = [r for r in rows if r.get("map_id") in (None, model_id)]
    extra = _split_rows(store, model_id, models, config) if with_split else []
    messages = len({str(r["item"]) for r in rows})
    folds = messages if messages <= FOLDS_ALL else FOLDS
    candidate_right_flags = cross_validated(rows, config, folds=folds, seed=seed, extra=extra)
    current = load_calibration(map_name("handraise"), model_id)
    truth = [bool(r["label"]) for r in rows]
    if current is not None:
        current_said = [will_under(current, r, config) >= config.threshold for r in rows]
    else:
        current_said = [False] * len(rows)
    cand_right = [p == t for p, t in zip(candidate_right_flags, truth, strict=True)]
    cur_right = [p == t for p, t in zip(current_said, truth, strict=True)]
    users = sorted({lab.user for lab in labels})
    provenance = f"learnt from {len(rows)} of your approvals ({', '.join(users)})" + (
        f" and {len(extra)} rows of the shipped split" if extra else ""
    )
    candidate = candidate_calibration([*rows, *extra], model_id, provenance, config)
    cand_score, cand_ci = stats.proportion(cand_right)
    cur_score, cur_ci = stats.proportion(cur_right)
    comparison = stats.compare_correct(cur_right, cand_right, seed=stats.SEED)
    candidate.metrics |= {
        "labels": len(rows),
        "label_users": users,
        "cv_folds": f"{folds} by message" if folds < messages else "leave one message out",
        "cv_accuracy": _r(cand_score),
        "current_accuracy": _r(cur_score),
        "current_version": None if current is None else current.version,
        "comparison": comparison.to_dict(),
    }
    candidate.metrics["diagnosis"] = _diagnosis(candidate.name, model_id, cand_right, truth)
    return LabelRefit(
        mechanism="handraise",
        model_id=model_id,
        n_labels=len(rows),
        folds=folds,
        candidate=candidate,
        current=current,
        candidate_score=cand_score,
        candidate_score_ci=cand_ci,
        current_score=cur_score,
        current_score_ci=cur_ci,
        comparison=comparison,
        provenance=provenance,
        held_out=[
            {
                "key": r["key"],
                "run_id": r["run_id"],
                "label": "speak" if t else "skip",
                "current": "speak" if c else "skip",
                "candidate": "speak" if k else "skip",
            }
            for r, t, c, k in zip(rows, truth, current_said, candidate_right_flags, strict=True)
        ],
        n_split=len(extra),
    )


def _split_rows(
    store: Store, model_id: str, models: ModelLookup | None, config: HandRaiseConfig
) -> list[dict[str, Any]]:
    """The shipped calibration split's features for the map's models (a `calibration` run, every call recorded)."""
    if models is None:
        raise LabelError("with_split: the shipped split's features need the judge model (no model source given)")
    source = model_source(models)
    judge, *partners = model_id.split("+")
    path = CALIBRATION_DIR / "handraise-calib.jsonl"
    items = parse_benchmark(read_text(path), str(path))
    with run_context(store, "calibration", {"mechanism": "handraise", "model": model_id, "data": str(path)}):
        rows = asyncio.run(
            calibration_rows(items, source(judge), config.context_turns, None, [source(p) for p in partners])
        )
    return [r | {"item": f"split:{r['item']}", "participant": f"split:{r['participant']}"} for r in rows]


def whatif_map(store: Store, run_id: str, cal: Calibration) -> list[dict[str, Any]]:
    """How `cal` (a candidate) would have decided the hands already played in a stored conversation: per hand
    with recorded features, the will then and under the candidate (raw will, no cooldown), and both decisions
    at the conversation's threshold. Hands without features (a judge that writes numbers) are left out."""
    run = store.get_run(run_id)
    if run is None:
        raise LabelError(f"run_id: no run {run_id}")
    config = HandRaiseConfig()
    out = []
    for item in labelable_items(store, run):
        features = item.context.get("features") or {}
        if item.mechanism != "handraise" or not all(isinstance(features.get(f), int | float) for f in NEEDED):
            continue
        threshold = float(item.cut if item.cut is not None else config.threshold)
        row = {**features, "participant": item.context.get("participant")}
        will = will_under(cal, row, config)
        out.append(
            {
                "key": item.key,
                "participant": item.context.get("participant"),
                "will_then": item.probability,
                "will_candidate": round(will, 4),
                "then": item.predicted,
                "candidate": "speak" if will >= threshold else "skip",
            }
        )
    return out


# -- versions ---------------------------------------------------------------------------------------------------


def save_candidate(refit: LabelRefit) -> Path:
    """Save the candidate as a new version of its map (not in use until `adopt_map`)."""
    return save_version(refit.candidate)


def map_name(mechanism: str) -> str:
    """The map file `mechanism`'s judge reads (`<name>.<model_id>.json`: its `LabelSpec.map_name`)."""
    names = {name: spec.map_name for name, spec in label_specs().items() if spec.map_name}
    if mechanism not in names:
        raise LabelError(f"mechanism: {mechanism!r} has no map ({', '.join(names)})")
    return names[mechanism]


def adopt_map(store: Store | None, mechanism: str, model_id: str, version: str) -> None:
    """ "Use this map": `version` (or `shipped`) is the map the judge reads from now on, in every process."""
    try:
        adopt_version(map_name(mechanism), model_id, version)
    except ValueError as exc:
        raise LabelError(f"version: {exc}") from None


def map_versions(mechanism: str, model_id: str) -> list[MapVersion]:
    """The shipped map (when there is one) and every version refitted from labels, oldest first."""
    name = map_name(mechanism)
    in_use = adopted_version(name, model_id)
    out = []
    shipped = calibration_path(name, model_id)
    if shipped.is_file():
        cal = load_calibration(name, model_id, shipped.parent)
        out.append(
            MapVersion(
                version=SHIPPED,
                created=cal.fitted_at if cal else "",
                provenance=f"shipped: fitted on {cal.fitted_on if cal else shipped}",
                in_use=in_use is None,
            )
        )
    for cal in saved_versions(name, model_id):
        out.append(
            MapVersion(
                version=cal.version,
                created=cal.fitted_at,
                provenance=cal.notes,
                in_use=cal.version == in_use,
                n_labels=int(cal.metrics.get("labels", 0) or 0),
            )
        )
    return out


def map_in_use(mechanism: str, model_id: str) -> MapVersion | None:
    """The version the judge reads now (what the Conversation caption names)."""
    return next((v for v in map_versions(mechanism, model_id) if v.in_use), None)


def created_at(version: MapVersion) -> datetime | None:
    try:
        return datetime.strptime(version.created, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return None
