"""Calibration of the likelihood and embedding judges: their raw features on a labelled split, and the
maps fitted through the will formula."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import stats
from engine.embeddings import EMBEDDER_ID, get_embedder
from engine.handraise.benchmark import BenchItem, ContextMode
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.features import cos_scale, embedding_features
from engine.handraise.gate import closed
from engine.handraise.judge import EMBEDDING
from engine.handraise.likelihood import handraise_features
from engine.judgemaps import Calibration, FittedMap, new_version

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.embeddings import TextEmbedder
    from engine.handraise.cast import Participant
    from engine.judgemaps import Calibration
    from models.base import ChatModel

    Vector = npt.NDArray[np.float64]

# The features each judge's maps read (chosen by cross-validation on the calibration split, see fit_calibrations).
LIKELIHOOD_FEATURES = {"relevance": ["pmi_mean", "pmi_rel", "pmi_last_rel"], "confidence": ["pmi_max", "max_rel"]}
EMBEDDING_FEATURES = {"relevance": ["last_cos", "last_rel"], "confidence": ["last_exp_cos", "last_exp_rel"]}
NOVELTY_FEATURES = ["answer_cos", "own_cos"]

# The benchmark's context windows by their number of turns (any other count uses 3).
CONTEXT_MODES: dict[int, ContextMode] = {1: "1", 3: "3", 5: "5"}


async def calibration_rows(
    items: Sequence[BenchItem],
    model: ChatModel | None,
    context_turns: int = 3,
    embedder: TextEmbedder | None = None,
    partners: Sequence[ChatModel] = (),
    embedder_id: str = EMBEDDER_ID,
) -> list[dict[str, Any]]:
    """The raw features of both judges for every labelled participant of a calibration split (with `partners`:
    the likelihood ensemble's features, see `handraise_features`). The embedding features are those of
    `embedder_id` (`embedder`, else that embedder live); each row names it (`embedder`) and its item's
    `language`, so the fit picks each embedder's rows and reports its held-out figures by language."""

    embedder = embedder or get_embedder(embedder_id)
    rows = []
    for item in items:
        cast, turns = item.cast(), item.turns(CONTEXT_MODES.get(context_turns, "3"))
        features = (
            (await handraise_features(model, cast, turns, context_turns, partners))[0] if model is not None else {}
        )
        for p, emb in zip(cast, embedding_features(cast, turns, context_turns, embedder), strict=True):
            if p.id in item.labels:
                rows.append(split_row(item, cast, p, features.get(p.id, {}), emb) | {"embedder": embedder_id})
    return rows


def split_row(
    item: BenchItem, cast: Sequence[Participant], p: Participant, features: Mapping[str, Any], emb: Mapping[str, Any]
) -> dict[str, Any]:
    """One labelled participant of a calibration split as a fitting row: who and what it is (item, cast, label,
    language), the judge's features and the embedding features (the expertise named is not a number)."""
    return {
        "item": item.id,
        "cast": ",".join(sorted(q.id for q in cast)),
        "participant": p.id,
        "label": bool(item.labels[p.id]),
        "language": item.language,
        **features,
        **{k: v for k, v in emb.items() if k != "expertise"},
    }


def fit_calibrations(
    rows: Sequence[dict[str, Any]],
    model_id: str | None,
    source: str,
    data_sha256: str,
    config: HandRaiseConfig | None = None,
    embedders: Sequence[str] | None = None,
) -> list[Calibration]:
    """Maps fitted *through the will formula*: relevance = σ(a·x_r + b) and confidence = σ(c·x_c + d) are
    learnt jointly so that the seed's will (weights, novelty) crossing the seed's threshold separates the
    labelled speakers from the rest — P(speak) = σ(20·(will − threshold)), class-balanced log-loss with a
    small L2 penalty. The formula and the threshold stay the seed's; only the maps into them are fitted.
    Likelihood judge: x_r = PMI mean and its lead over the roster, and the lead on the last user message
    alone (`pmi_last_rel`), x_c = best PMI and its lead. Embedding
    judge: x_r = last message–profile cosine and its lead over the roster, x_c = the best expertise cosine
    to the last message and its lead. Novelty, in both, n = σ(e·x_n + f) of the answers already given
    (x_n = the closest answer by another participant and the participant's own, `answer_cos`, `own_cos`).
    These feature sets scored best in 5-fold cross-validation by cast on the calibration split.

    One embedding map is fitted per embedder (`handraise.embedding.<embedder>`) on that embedder's rows (each row
    names it, `embedder`; a row without one is MiniLM's): `embedders` says which, by default every embedder
    the rows hold. The likelihood map (`model_id`; None: none) is fitted on MiniLM's rows, since its novelty
    reads MiniLM's cosines at judgment time."""

    config = config or HandRaiseConfig()
    version = new_version()
    by_embedder: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_embedder.setdefault(str(r.get("embedder") or EMBEDDER_ID), []).append(r)
    wanted = list(by_embedder) if embedders is None else list(dict.fromkeys(embedders))
    missing = [e for e in wanted if e not in by_embedder]
    if model_id is not None and EMBEDDER_ID not in by_embedder:
        missing.append(f"{EMBEDDER_ID} (the likelihood map's novelty reads its cosines)")
    if missing:
        raise ValueError(f"no calibration rows with the features of {', '.join(missing)}")

    def fitted(part: Sequence[dict[str, Any]], rel: list[str], conf: list[str]) -> dict[str, Any]:
        fit = _fit_will_maps(part, rel, conf, config)
        if all("cast" in r and "item" in r for r in part):
            fit["metrics"] |= cross_validate(part, rel, conf, config)
        return fit

    def common(part: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "version": version,
            "fitted_on": source,
            "data_sha256": data_sha256,
            "n_items": len(part),
            "fitted_at": version,
        }

    out = [
        Calibration(
            name=EMBEDDING,
            model_id=embedder_id,
            **common(by_embedder[embedder_id]),
            **fitted(by_embedder[embedder_id], EMBEDDING_FEATURES["relevance"], EMBEDDING_FEATURES["confidence"]),
        )
        for embedder_id in wanted
    ]
    if model_id is not None:
        minilm = by_embedder[EMBEDDER_ID]
        out.append(
            Calibration(
                name="handraise.likelihood",
                model_id=model_id,
                **common(minilm),
                **fitted(minilm, LIKELIHOOD_FEATURES["relevance"], LIKELIHOOD_FEATURES["confidence"]),
            )
        )
    return out


def _fit_will_maps(
    rows: Sequence[dict[str, Any]],
    rel: list[str],
    conf: list[str],
    config: HandRaiseConfig,
    nov: list[str] | None = None,
    l2: float = 0.01,
    sharpness: float = 20.0,
    fit_only: bool = False,
) -> dict[str, Any]:
    from scipy.optimize import minimize  # heavy: scipy, ~0.5 s

    y = np.asarray([bool(r["label"]) for r in rows], dtype=float)
    if y.min() == y.max():
        raise ValueError("the calibration split needs participants who should speak and participants who should not")
    nov = NOVELTY_FEATURES if nov is None else nov
    nr, nc, nn = len(rel), len(conf), len(nov)
    names = [*rel, *conf, *nov]
    raw = np.asarray([[float(r[f]) for f in names] for r in rows]).reshape(len(rows), len(names))
    # Fitted on standardised features, so one L2 penalty weighs a cosine (spread ~0.1) and a PMI (spread ~2)
    # alike; the coefficients are turned back into the features' own units below.
    mu, sd = raw.mean(axis=0), raw.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    x = (raw - mu) / sd
    xr, xc, xn = x[:, :nr], x[:, nr : nr + nc], x[:, nr + nc :]
    fixed = np.asarray([1 - cos_scale(float(r["answer_cos"])) for r in rows])
    w = config.weights
    total = w.relevance + w.novelty + w.confidence
    balance = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))

    def sig(z: Vector) -> Vector:
        return 1 / (1 + np.exp(-np.clip(z, -500.0, 500.0)))  # exp overflows past ±709

    def will(t: Vector) -> Vector:
        r = sig(xr @ t[:nr] + t[nr])
        c = sig(xc @ t[nr + 1 : nr + 1 + nc] + t[nr + 1 + nc])
        n = sig(xn @ t[nr + nc + 2 : nr + nc + 2 + nn] + t[nr + nc + 2 + nn]) if nn else fixed
        return (w.relevance * r + w.novelty * n + w.confidence * c) / total

    def loss(t: Vector) -> float:
        # The sharpness is fixed, not fitted: a free one lets the penalty shrink every map towards a constant
        # while the sharpness grows, and every will then sits a hair from the threshold (no spread for the
        # cooldown, brainstorm or the cards to work with). At 20, a will 0.05 above the threshold means p ≈ 0.73.
        p = np.clip(sig(sharpness * (will(t) - config.threshold)), 1e-9, 1 - 1e-9)
        return float(-(balance * (y * np.log(p) + (1 - y) * np.log(1 - p))).mean() + l2 * np.sum(t**2))

    t_std = minimize(loss, np.zeros(nr + nc + 2 + (nn + 1 if nn else 0)), method="L-BFGS-B").x
    predicted_std = will(t_std) >= config.threshold
    t = _raw_units(t_std, mu, sd, (nr, nc, nn))
    if fit_only:
        return {"predict": lambda test: _will_of(test, t, rel, conf, nov, config)}
    return _will_maps_result(t, (rel, conf, nov), predicted_std, y, sharpness, config)


def _raw_units(t_std: Vector, mu: Vector, sd: Vector, sizes: tuple[int, int, int]) -> Vector:
    """Coefficients fitted on standardised features, back in the features' own units:
    σ(Σ a·(x − μ)/s + b) = σ(Σ (a/s)·x + b − Σ a·μ/s)."""
    nr, nc, nn = sizes
    t = t_std.copy()
    offset = 0
    for n_features, start in ((nr, 0), (nc, nr), (nn, nr + nc)):
        if n_features == 0:
            continue
        a = t_std[offset : offset + n_features]
        t[offset : offset + n_features] = a / sd[start : start + n_features]
        t[offset + n_features] = t_std[offset + n_features] - float(
            np.sum(a * mu[start : start + n_features] / sd[start : start + n_features])
        )
        offset += n_features + 1
    return t


def _will_maps_result(
    t: Vector,
    features: tuple[list[str], list[str], list[str]],
    predicted: Any,  # bool per row
    y: Vector,
    sharpness: float,
    config: HandRaiseConfig,
) -> dict[str, Any]:
    """The fitted maps (relevance, confidence, and novelty when it has features) and the fit's own figures."""
    rel, conf, nov = features
    nr, nc, nn = len(rel), len(conf), len(nov)
    tp = int((predicted & (y == 1)).sum())
    precision = tp / max(1, int(predicted.sum()))
    recall = tp / max(1, int(y.sum()))
    return {
        "maps": {
            "relevance": FittedMap(
                kind="logistic", features=rel, coef=[float(v) for v in t[:nr]], intercept=float(t[nr])
            ),
            "confidence": FittedMap(
                kind="logistic",
                features=conf,
                coef=[float(v) for v in t[nr + 1 : nr + 1 + nc]],
                intercept=float(t[nr + 1 + nc]),
            ),
        }
        | (
            {
                "novelty": FittedMap(
                    kind="logistic",
                    features=nov,
                    coef=[float(v) for v in t[nr + nc + 2 : nr + nc + 2 + nn]],
                    intercept=float(t[nr + nc + 2 + nn]),
                )
            }
            if nn
            else {}
        ),
        "metrics": {
            "fit_f1": round(2 * precision * recall / max(1e-9, precision + recall), 4),
            "fit_precision": round(precision, 4),
            "fit_recall": round(recall, 4),
            "sharpness": sharpness,
            "threshold": config.threshold,
        },
        "notes": "relevance/confidence/novelty maps fitted jointly through the will formula (see fit_calibrations)",
    }


def _will_of(
    rows: Sequence[dict[str, Any]], t: Vector, rel: list[str], conf: list[str], nov: list[str], config: HandRaiseConfig
) -> list[float]:
    """The seed's will of held-out rows under fitted parameters `t` (the layout of `_fit_will_maps`)."""

    def sig(z: float) -> float:
        return 1 / (1 + math.exp(-max(-500.0, min(500.0, z))))

    nr, nc, nn = len(rel), len(conf), len(nov)
    w = config.weights
    out = []
    for r in rows:
        rv = sig(sum(float(t[i]) * float(r[f]) for i, f in enumerate(rel)) + float(t[nr]))
        rv *= closed(r.get("needs_answer")) if config.gate else 1.0  # the held-out gate (engine/handraise/gate.py)
        cv = sig(sum(float(t[nr + 1 + i]) * float(r[f]) for i, f in enumerate(conf)) + float(t[nr + 1 + nc]))
        nv = (
            sig(sum(float(t[nr + nc + 2 + i]) * float(r[f]) for i, f in enumerate(nov)) + float(t[nr + nc + 2 + nn]))
            if nn
            else 1 - cos_scale(float(r["answer_cos"]))
        )
        out.append((w.relevance * rv + w.novelty * nv + w.confidence * cv) / (w.relevance + w.novelty + w.confidence))
    return out


def cross_validate(
    rows: Sequence[dict[str, Any]],
    rel: list[str],
    conf: list[str],
    config: HandRaiseConfig | None = None,
    nov: list[str] | None = None,
    folds: int = 5,
    group: str = "cast",
) -> dict[str, Any]:
    """Held-out figures of the fitting: rows are split into `folds` folds by `group` (whole casts by default,
    so a fold's casts are never seen in fitting), the maps are fitted on the other folds, and the held-out
    wills at the seed's threshold give F1 / precision / recall and top-1 (the most willing participant of
    an item with a speaker is labelled to speak)."""

    config = config or HandRaiseConfig()
    keys = sorted({str(r[group]) for r in rows})
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    wills: dict[tuple[str, str], float] = {}
    for f in range(min(folds, len(keys))):
        train = [r for r in rows if fold_of[str(r[group])] != f]
        test = [r for r in rows if fold_of[str(r[group])] == f]
        predict = _fit_will_maps(train, rel, conf, config, nov, fit_only=True)["predict"]
        for r, w in zip(test, predict(test), strict=True):
            wills[(str(r["item"]), str(r["participant"]))] = w
    out: dict[str, Any] = {"cv_folds": f"{folds} by {group}", **_held_out_figures(rows, wills, config.threshold)}
    languages = sorted({str(r.get("language") or "unknown") for r in rows})
    if len(languages) > 1 and any("language" in r for r in rows):
        out["cv_by_language"] = {
            language: _held_out_figures(
                [r for r in rows if str(r.get("language") or "unknown") == language], wills, config.threshold, True
            )
            for language in languages
        }
    return out


def _held_out_figures(
    rows: Sequence[dict[str, Any]], wills: dict[tuple[str, str], float], threshold: float, counts: bool = False
) -> dict[str, Any]:
    """F1 / precision / recall of the held-out wills at the threshold, and top-1, with their 95 % intervals: F1
    by the seeded bootstrap over items (a dialogue's decisions move together, as the benchmark's `f1_ci`), top-1
    by Wilson (one held-out ranking per item with a speaker, as the map's diagnosis). `counts`: also the rows,
    the items and the items with a speaker the figures rest on."""
    said: list[bool] = []
    gold: list[bool] = []
    of_item: list[str] = []
    items: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for r in rows:
        w, label = wills[(str(r["item"]), str(r["participant"]))], bool(r["label"])
        said.append(w >= threshold)
        gold.append(label)
        of_item.append(str(r["item"]))
        items[str(r["item"])].append((w, label))
    tp = sum(s and g for s, g in zip(said, gold, strict=True))
    fp = sum(s and not g for s, g in zip(said, gold, strict=True))
    fn = sum(g and not s for s, g in zip(said, gold, strict=True))
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    with_speaker = [v for v in items.values() if any(g for _, g in v)]
    first = sum(max(v)[1] for v in with_speaker)
    f1_ci = stats.bootstrap(stats.w_f1(said, gold), clusters=of_item)[1] if said else None
    top1_ci = stats.wilson(first, len(with_speaker))
    return {
        "cv_f1": round(2 * precision * recall / max(1e-9, precision + recall), 4),
        "cv_precision": round(precision, 4),
        "cv_recall": round(recall, 4),
        "cv_top1": round(first / max(1, len(with_speaker)), 4),
        "cv_f1_ci": f1_ci.as_list() if f1_ci else None,
        "cv_top1_ci": top1_ci.as_list() if top1_ci else None,
    } | ({"rows": len(rows), "items": len(items), "items_with_speaker": len(with_speaker)} if counts else {})
