"""The hand raise's refit from labels (its `LabelSpec.refit`, `refit_hand_raise`): a hand-raise map refitted from
the user's labels and compared honestly with the map in use; versions and adoption are shared
(`engine.labels.refit`).

The labels of hands carry the judge's raw features (engine/handraise/conversation.py stores them with every
Speak / Skip), so the refit makes no model call. The candidate is the shipped fit (engine/handraise/maps.py:
relevance, confidence and novelty maps learnt jointly through the will formula, at the seed's threshold) on the
labels — optionally with the shipped split — with one more relevance feature per participant (`is:<id>`): whom
this user wants to hear. It is cross-validated on the labels (folds by message, so a message's hands are never
split between fitting and testing: one message a fold up to 50 messages, 5 folds beyond), and the map in use
decides the same held-out labels: the paired comparison is exact McNemar (engine/stats.py `compare_correct`)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.diagnostics import accuracy_vs_chance
from engine.events import run_context
from engine.handraise.benchmark import parse_benchmark
from engine.handraise.decisions import HandRaiseConfig, default_ensemble, will_from
from engine.handraise.features import novelty_of
from engine.handraise.gate import closed
from engine.handraise.judge import map_choice
from engine.handraise.maps import LIKELIHOOD_FEATURES, NOVELTY_FEATURES, _fit_will_maps, calibration_rows
from engine.handraise.selfjudge import SELF_FEATURES, SELF_NEEDED, SELF_PREFIX, is_self_map
from engine.handraise.selfmaps import self_calibration_rows
from engine.inputs import read_text
from engine.judgemaps import CALIBRATION_DIR, Calibration, is_name, load_calibration, new_version, shown
from engine.labels.items import labelable_items
from engine.labels.refit import LabelRefit, flat, map_name, rounded
from engine.labelstore import Label, LabelError, label_spec, list_labels
from engine.mechanism import RefitHooks
from engine.store import Store
from models.errors import ModelUnavailable
from models.source import model_source

if TYPE_CHECKING:
    from models.source import ModelLookup

# Folds of the cross-validation on the labels, by message: every message its own fold up to `FOLDS_ALL`
# messages (few labels: each held-out prediction comes from a fit on all the others), 5 beyond.
FOLDS = 5
FOLDS_ALL = 50
REL = LIKELIHOOD_FEATURES["relevance"]
CONF = LIKELIHOOD_FEATURES["confidence"]
NEEDED = (*REL, *CONF, *NOVELTY_FEATURES)


def family(map_id: object) -> tuple[list[str], list[str], tuple[str, ...]]:
    """The relevance and confidence features a map reads, and every feature a label needs for it: the likelihood
    judge's, or — for a self map (`self.<model>`, engine/handraise/selfjudge.py) — the self-judgment's."""
    if is_self_map(map_id):
        rel, conf = SELF_FEATURES["relevance"], SELF_FEATURES["confidence"]
        return list(rel), list(conf), (*SELF_NEEDED, *NOVELTY_FEATURES)
    return list(REL), list(CONF), NEEDED


FEATURE_LIMIT = 1e6  # the largest feature magnitude a label may carry (`is_feature`)


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
        needed = family(lab.context.get("map_id"))[2]
        if not isinstance(features, Mapping) or not all(is_feature(features.get(f)) for f in needed):
            continue  # (a hostile value is refused by name when refitting: `checked_map_ids`)
        turn = lab.item_key.rpartition("/")[0]
        rows.append(
            {
                **{k: float(v) for k, v in features.items() if is_feature(v)},
                "label": lab.label == "speak",
                "participant": participant_of(lab),
                "item": f"{lab.run_id}:{turn}",
                "key": lab.item_key,
                "run_id": lab.run_id,
                "map_id": lab.context.get("map_id"),
            }
        )
    return rows


def usable_labels(labels: Sequence[Label]) -> int:
    """Its `LabelSpec.usable`: the labels a refit can learn from, counted by the rows it fits (a hand judged by
    the likelihood judge carries the features; other hands do not)."""
    return len(label_rows(labels))


def default_map(ids: Sequence[str]) -> str | None:
    """Its `LabelSpec.default_map`: the map the Hand raise page's default judge reads (the catalog's first
    model, with its default partners); that model's own id when its map cannot be read, None for no models."""
    if not ids:
        return None
    try:
        return map_choice("likelihood", ids[0], default_ensemble(ids, ids[0])).map_id
    except ValueError:
        return ids[0]


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
    rel *= closed(row.get("needs_answer")) if config.gate else 1.0  # the gate's p, stored with the hand
    return will_from(rel, novelty_of(cal, values), conf, config.weights)


def fit_candidate(
    rows: Sequence[Mapping[str, Any]], config: HandRaiseConfig | None = None, map_id: str | None = None
) -> dict[str, Any]:
    """The maps fitted on rows (`_fit_will_maps` with the participants' indicators in the relevance map), with the
    features of `map_id`'s family (`family`)."""
    config = config or HandRaiseConfig()
    names = _indicators(rows)
    rel, conf, _ = family(map_id)
    return _fit_will_maps(_with_indicators(rows, names), [*rel, *names], conf, config)


def candidate_calibration(
    rows: Sequence[Mapping[str, Any]], model_id: str, provenance: str, config: HandRaiseConfig | None = None
) -> Calibration:
    version = new_version()
    fit = fit_candidate(rows, config, model_id)
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
    map_id: str | None = None,
) -> list[bool]:
    """Each label's held-out prediction (speak?) from a candidate fitted on the other folds (+ `extra` rows)."""
    fold_of = _folds(rows, folds, seed)
    names = _indicators([*rows, *extra])
    rel, conf, _ = family(map_id)
    predicted = [False] * len(rows)
    for f in range(min(folds, len(set(fold_of.values())))):
        train = [r for r in rows if fold_of[str(r["item"])] != f] + list(extra)
        test_ix = [i for i, r in enumerate(rows) if fold_of[str(r["item"])] == f]
        if not test_ix:
            continue
        if len({bool(r["label"]) for r in train}) < 2:
            raise LabelError("labels: a fold's fitting labels are all one value — label more Speak and Skip")
        predict: Callable[[list[dict[str, Any]]], list[float]] = _fit_will_maps(
            _with_indicators(train, names), [*rel, *names], conf, config, fit_only=True
        )["predict"]
        wills = predict(_with_indicators([rows[i] for i in test_ix], names))
        for i, w in zip(test_ix, wills, strict=True):
            predicted[i] = w >= config.threshold
    return predicted


def checked_map_ids(labels: Sequence[Label]) -> None:
    """Every map id the hand labels name (`context.map_id`, `context.judge_model`) is a map id (a closed name,
    `engine.judgemaps.is_name`), never a path, and every number among their features (`context.features`) is a
    feature value (`is_feature`): LabelError naming the first label and field that is not."""
    for lab in labels:
        if lab.mechanism != "handraise":
            continue
        item = lab.item_key if lab.item_key.isprintable() and len(lab.item_key) <= 60 else shown(lab.item_key, 60)
        for field_name in ("map_id", "judge_model"):
            value = lab.context.get(field_name)
            if value not in (None, "") and (not is_name(value) or value == SELF_PREFIX):
                raise LabelError(f"label {lab.id} ({item}): context.{field_name}: {shown(value)} is not a map id")
        features = lab.context.get("features")
        for key, value in features.items() if isinstance(features, Mapping) else ():
            if isinstance(value, int | float) and not is_feature(value):
                name = key if isinstance(key, str) and key.isprintable() and len(key) <= 40 else shown(key, 40)
                raise LabelError(
                    f"label {lab.id} ({item}): context.features.{name}: {shown(value, 40)} is not a feature value "
                    f"(a finite number within ±{FEATURE_LIMIT:g})"
                )


def is_feature(value: object) -> bool:
    """A judge's feature as a fit can read it: a number (not a boolean), finite and within ±`FEATURE_LIMIT` (the
    judge's features are log-probabilities, PMIs and cosines; a huge one overflows the fit)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value)) and abs(float(value)) <= FEATURE_LIMIT
    except OverflowError:  # an integer too large for a float
        return False


def _map_id(rows: Sequence[Mapping[str, Any]], labels: Sequence[Label]) -> str:
    ids = [str(r["map_id"]) for r in rows if r.get("map_id")]
    if ids:
        return max(sorted(set(ids)), key=ids.count)
    models = [str(lab.context.get("judge_model")) for lab in labels if lab.context.get("judge_model")]
    return max(sorted(set(models)), key=models.count) if models else HandRaiseConfig().judge_model


def _fittable_rows(labels: Sequence[Label]) -> list[dict[str, Any]]:
    """The hand labels' rows with the judge's features, or LabelError saying why they cannot be fitted."""
    rows = label_rows(labels)
    needed = label_spec("handraise").min_labels  # its `LabelSpec.min_labels`, which the Labels page counts against
    if len(rows) < needed:
        raise LabelError(
            f"labels: {len(rows)} hand label(s) with the judge's features — at least {needed} are needed "
            "to refit "
            "(labels of the likelihood judge's hands carry them)"
        )
    if len({bool(r["label"]) for r in rows}) < 2:
        raise LabelError("labels: every hand label has one value — label both Speak and Skip")
    return rows


def _rows_for(rows: Sequence[Mapping[str, Any]], model_id: str) -> list[dict[str, Any]]:
    """The rows a map of `model_id` can be fitted on: those that name it (or no map) and carry every feature of
    its family (a likelihood hand names no map but lacks a self map's features). LabelError when too few are
    left, or only one value."""
    needed = family(model_id)[2]
    kept = [dict(r) for r in rows if r.get("map_id") in (None, model_id) and all(f in r for f in needed)]
    least = label_spec("handraise").min_labels
    if len(kept) < least:
        raise LabelError(
            f"labels: {len(kept)} hand label(s) carry the features of map {model_id} — at least {least} are "
            "needed to refit it"
        )
    if len({bool(r["label"]) for r in kept}) < 2:
        raise LabelError(f"labels: every hand label for map {model_id} has one value — label both Speak and Skip")
    return kept


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
    checked_map_ids(labels)  # before anything reads them: a label never names a path
    rows = _fittable_rows(labels)
    model_id = _map_id(rows, labels)
    rows = _rows_for(rows, model_id)
    extra = _split_rows(store, model_id, models, config) if with_split else []
    messages = len({str(r["item"]) for r in rows})
    folds = messages if messages <= FOLDS_ALL else FOLDS
    candidate_right_flags = cross_validated(rows, config, folds=folds, seed=seed, extra=extra, map_id=model_id)
    current = load_calibration(map_name("handraise"), model_id)
    truth = [bool(r["label"]) for r in rows]
    if current is not None:
        current_said = [will_under(current, r, config) >= config.threshold for r in rows]
    else:
        current_said = [False] * len(rows)
    cand_right = [p == t for p, t in zip(candidate_right_flags, truth, strict=True)]
    cur_right = [p == t for p, t in zip(current_said, truth, strict=True)]
    users = sorted({lab.user for lab in labels})
    provenance = f"learnt from {len(rows)} of your approvals ({', '.join(flat(u) for u in users)})" + (
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
        "cv_accuracy": rounded(cand_score),
        "current_accuracy": rounded(cur_score),
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
    judge, *partners = model_id.removeprefix(SELF_PREFIX).split("+")
    path = CALIBRATION_DIR / "handraise-calib.jsonl"
    items = parse_benchmark(read_text(path), str(path))
    try:
        judge_model, partner_models = source(judge), [source(p) for p in partners]
    except (KeyError, ModelUnavailable) as exc:  # a map id naming a model this catalog lacks, or one not ready
        raise LabelError(f"with_split: map {model_id}: {exc.args[0] if exc.args else exc}") from None
    with run_context(store, "calibration", {"mechanism": "handraise", "model": model_id, "data": str(path)}):
        if is_self_map(model_id):  # the self-judgment's features, each seat judged by the map's model
            rows = asyncio.run(self_calibration_rows(items, judge_model, config.context_turns))
        else:
            rows = asyncio.run(calibration_rows(items, judge_model, config.context_turns, None, partner_models))
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
        needed = family(cal.model_id)[2]
        if item.mechanism != "handraise" or not all(isinstance(features.get(f), int | float) for f in needed):
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


HOOKS = RefitHooks(refit_hand_raise, usable=usable_labels, default_map=default_map)
