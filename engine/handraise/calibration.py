"""Calibration of the likelihood and embedding judges: their raw features on a labelled split, and the
maps fitted through the will formula."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.handraise.benchmark import BenchItem, ContextMode
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.judge import EMBEDDER_ID, EMBEDDING, cos_scale, embedding_features

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.embeddings import Embedder
    from engine.judgemaps import Calibration
    from models.base import ChatModel

    Vector = npt.NDArray[np.float64]

# The benchmark's context windows by their number of turns (any other count uses 3).
CONTEXT_MODES: dict[int, ContextMode] = {1: "1", 3: "3", 5: "5"}


async def calibration_rows(
    items: Sequence[BenchItem], model: ChatModel | None, context_turns: int = 3, embedder: Embedder | None = None
) -> list[dict[str, Any]]:
    """The raw features of both judges for every labelled participant of a calibration split."""
    from engine.likelihood import handraise_features

    rows = []
    for item in items:
        cast, turns = item.cast(), item.turns(CONTEXT_MODES.get(context_turns, "3"))
        features = (await handraise_features(model, cast, turns, context_turns))[0] if model is not None else {}
        for p, emb in zip(cast, embedding_features(cast, turns, context_turns, embedder), strict=True):
            if p.id in item.labels:
                rows.append(
                    {
                        "item": item.id,
                        "participant": p.id,
                        "label": bool(item.labels[p.id]),
                        **features.get(p.id, {}),
                        **{k: v for k, v in emb.items() if k != "expertise"},
                    }
                )
    return rows


def fit_calibrations(
    rows: Sequence[dict[str, Any]],
    model_id: str | None,
    source: str,
    data_sha256: str,
    config: HandRaiseConfig | None = None,
) -> list[Calibration]:
    """Maps fitted *through the will formula*: relevance = σ(a·x_r + b) and confidence = σ(c·x_c + d) are
    learnt jointly so that the seed's will (weights, novelty) crossing the seed's threshold separates the
    labelled speakers from the rest — P(speak) = σ(k·(will − threshold)), class-balanced log-loss with a
    small L2 penalty. The formula and the threshold stay the seed's; only the maps into them are fitted.
    Likelihood judge: x_r = PMI mean and its lead over the roster, x_c = best PMI. Embedding judge:
    x_r = context–profile cosine, x_c = best expertise cosine. Novelty is the fixed embedding novelty."""
    from engine.judgemaps import Calibration, new_version

    config = config or HandRaiseConfig()
    version = new_version()
    common = {
        "version": version,
        "fitted_on": source,
        "data_sha256": data_sha256,
        "n_items": len(rows),
        "fitted_at": version,
    }
    out = [
        Calibration(
            name=EMBEDDING, model_id=EMBEDDER_ID, **common, **_fit_will_maps(rows, ["rel_cos"], ["conf_cos"], config)
        )
    ]
    if model_id is not None:
        out.append(
            Calibration(
                name="handraise.likelihood",
                model_id=model_id,
                **common,
                **_fit_will_maps(rows, ["pmi_mean", "pmi_rel"], ["pmi_max"], config),
            )
        )
    return out


def _fit_will_maps(
    rows: Sequence[dict[str, Any]], rel: list[str], conf: list[str], config: HandRaiseConfig, l2: float = 0.01
) -> dict[str, Any]:
    import numpy as np
    from scipy.optimize import minimize

    from engine.judgemaps import FittedMap

    y = np.asarray([bool(r["label"]) for r in rows], dtype=float)
    if y.min() == y.max():
        raise ValueError("the calibration split needs participants who should speak and participants who should not")
    xr = np.asarray([[float(r[f]) for f in rel] for r in rows])
    xc = np.asarray([[float(r[f]) for f in conf] for r in rows])
    novelty = np.asarray([1 - cos_scale(float(r["answer_cos"])) for r in rows])
    w = config.weights
    total = w.relevance + w.novelty + w.confidence
    balance = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    nr, nc = len(rel), len(conf)

    def sig(z: Vector) -> Vector:
        return 1 / (1 + np.exp(-np.clip(z, -500.0, 500.0)))  # exp overflows past ±709

    def will(t: Vector) -> Vector:
        r = sig(xr @ t[:nr] + t[nr])
        c = sig(xc @ t[nr + 1 : nr + 1 + nc] + t[nr + 1 + nc])
        return (w.relevance * r + w.novelty * novelty + w.confidence * c) / total

    def loss(t: Vector) -> float:
        p = np.clip(sig(np.exp(t[-1]) * (will(t) - config.threshold)), 1e-9, 1 - 1e-9)
        return float(-(balance * (y * np.log(p) + (1 - y) * np.log(1 - p))).mean() + l2 * np.sum(t[:-1] ** 2))

    start = np.zeros(nr + nc + 3)
    start[-1] = np.log(10.0)
    t = minimize(loss, start, method="L-BFGS-B").x
    predicted = will(t) >= config.threshold
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
        },
        "metrics": {
            "fit_f1": round(2 * precision * recall / max(1e-9, precision + recall), 4),
            "fit_precision": round(precision, 4),
            "fit_recall": round(recall, 4),
            "sharpness": round(float(np.exp(t[-1])), 3),
            "threshold": config.threshold,
        },
        "notes": "relevance/confidence maps fitted jointly through the will formula (see fit_calibrations)",
    }
