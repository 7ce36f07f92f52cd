"""The self map (engine/handraise/selfjudge.py): the self-judgment's features on a labelled calibration split, and
the map fitted on them that corrects its RESPOND bias, with the RESPOND rates before and after."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.handraise.benchmark import BenchItem
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.features import embedding_features
from engine.handraise.likelihood import HANDRAISE
from engine.handraise.maps import CONTEXT_MODES, _fit_will_maps, cross_validate, split_row
from engine.handraise.selfjudge import SELF_FEATURES, self_features, self_map_id
from engine.judgemaps import Calibration, new_version

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from models.base import ChatModel


async def self_calibration_rows(
    items: Sequence[BenchItem], model: ChatModel, context_turns: int = 3, embedder: TextEmbedder | None = None
) -> list[dict[str, Any]]:
    """The self-judgment's features for every labelled participant of a calibration split, each seat judged by
    `model` (whose self map this fits), with the embedding features the novelty map reads (MiniLM's)."""
    rows = []
    for item in items:
        cast = [p.model_copy(update={"model_id": model.model_id}) for p in item.cast()]
        turns = item.turns(CONTEXT_MODES.get(context_turns, "3"))
        features, _ = await self_features(lambda _id: model, cast, turns, context_turns)
        for p, e in zip(cast, embedding_features(cast, turns, context_turns, embedder), strict=True):
            if p.id in item.labels:
                rows.append(split_row(item, cast, p, features[p.id], e))
    return rows


def fit_self_calibration(
    rows: Sequence[dict[str, Any]], model_id: str, source: str, data_sha256: str, config: HandRaiseConfig | None = None
) -> Calibration:
    """`model_id`'s self map: relevance and confidence maps of the self features and the novelty map, fitted
    jointly through the seed's will formula at its threshold (`_fit_will_maps`), with its held-out figures
    (5-fold cross-validation by cast, by language) and the RESPOND rates before and after it."""
    config = config or HandRaiseConfig()
    rel, conf = SELF_FEATURES["relevance"], SELF_FEATURES["confidence"]
    fit = _fit_will_maps(rows, rel, conf, config)
    held_out = cross_validate(rows, rel, conf, config)
    fit["metrics"] |= held_out | respond_rates(rows) | corrected_rate(held_out, rows)
    version = new_version()
    return Calibration(
        name=HANDRAISE,
        model_id=self_map_id(model_id),
        version=version,
        fitted_on=source,
        data_sha256=data_sha256,
        n_items=len(rows),
        fitted_at=version,
        maps=fit["maps"],
        metrics=fit["metrics"],
        notes="the self-judgment read by likelihood (P(RESPOND) against P(SKIP)), its bias corrected through the "
        "will formula (engine/handraise/selfjudge.py)",
    )


def respond_rates(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How often the uncorrected self-judgment says RESPOND (P(RESPOND) > P(SKIP)) against how often the labels say
    speak, each with its 95 % Wilson interval, and the uncorrected decision's F1 (bootstrap over items)."""
    said = [float(r["self_raw"]) > 0 for r in rows]
    gold = [bool(r["label"]) for r in rows]
    respond, speak = stats.wilson(sum(said), len(said)), stats.wilson(sum(gold), len(gold))
    tp = sum(s and g for s, g in zip(said, gold, strict=True))
    f1 = 2 * tp / max(1, sum(said) + sum(gold))
    f1_ci = stats.bootstrap(stats.w_f1(said, gold), clusters=[str(r["item"]) for r in rows])[1] if rows else None
    return {
        "uncorrected_respond_rate": round(sum(said) / max(1, len(said)), 4),
        "uncorrected_respond_rate_ci": respond.as_list() if respond else None,
        "label_speak_rate": round(sum(gold) / max(1, len(gold)), 4),
        "label_speak_rate_ci": speak.as_list() if speak else None,
        "uncorrected_f1": round(f1, 4),
        "uncorrected_f1_ci": f1_ci.as_list() if f1_ci else None,
    }


def corrected_rate(held_out: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How often the corrected self-judgment raises a hand, held out (from the cross-validation's precision and
    recall: raised = recall × speakers / precision), with its 95 % Wilson interval."""
    speakers = sum(bool(r["label"]) for r in rows)
    precision, recall = float(held_out.get("cv_precision") or 0), float(held_out.get("cv_recall") or 0)
    raised = round(recall * speakers / precision) if precision > 0 else 0
    interval = stats.wilson(raised, len(rows))
    return {
        "corrected_respond_rate": round(raised / max(1, len(rows)), 4),
        "corrected_respond_rate_ci": interval.as_list() if interval else None,
    }
