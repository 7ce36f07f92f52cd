"""Does the message ask anyone anything? A greeting, a thank-you, small talk or a remark to someone outside the cast
asks nothing of the participants, however close its words come to someone's expertise ("the sky is such a nice
blue today" and a colour designer). The offline judges read relevance from how close the message comes to each
participant; this gate reads whether it calls for an answer at all.

p(the message asks for an answer) is a logistic map over the multilingual USE vector of the user's last message
(`use-m3`, Japanese included), fitted on the hand-raise split (an item asks when any participant should speak):
`data/calibration/handraise.gate.use-m3.json`. Where it says the message likely asks nothing (p < 0.5), the
likelihood and embedding judges multiply each participant's relevance by it: a message that asks nothing is
relevant to nobody (`HandRaiseConfig.gate`, on by default). Its
embedding is a recorded call of the run, replayed where the judge replays."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import judgemaps, stats
from engine.embeddings import USE_DIMENSION, USE_ID, EmbedderUnavailable
from engine.judgemaps import Calibration, fit_logistic

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from engine.handraise.cast import Turn
    from engine.handraise.decisions import Components

GATE = "handraise.gate"  # data/calibration/handraise.gate.use-m3.json
GATE_C = 10.0  # L2 strength: the best of 1, 10, 100 by cross-validation on the split (docs/hand-raise.md)
ASKS = "asks"


def names(dimension: int = USE_DIMENSION) -> list[str]:
    return [f"last_{i}" for i in range(dimension)]


def features_of(vector: Any) -> dict[str, float]:
    return {name: float(v) for name, v in zip(names(len(vector)), vector, strict=True)}


def gate_problem(cal: Calibration) -> str:
    """'' when the file holds one logistic map over the USE vector's dimensions, else why."""
    fitted = cal.maps.get(ASKS)
    if fitted is None or fitted.kind != "logistic" or list(fitted.features) != names():
        return f"{ASKS} must be a logistic map over the {USE_DIMENSION} dimensions of the message's vector"
    return ""


def load_gate() -> Calibration | None:
    """The gate's map, or None when none is shipped (the judges then read relevance ungated, flagged)."""
    return judgemaps.load_calibration(GATE, USE_ID, check=gate_problem)


def asks(cal: Calibration, embedder: TextEmbedder, message: str) -> float:
    """p(the message asks for an answer); ValueError for a non-finite one."""
    vector = embedder.embed([message])[0]
    if len(vector) != USE_DIMENSION:  # a damaged or foreign recording
        raise ValueError(f"the message's vector has {len(vector)} dimensions, not {USE_DIMENSION}")
    p = cal.apply(ASKS, features_of(vector))
    if not math.isfinite(p):
        raise ValueError("the gate gave no finite probability")
    return p


def gate_value(value: object) -> float:
    """A stored gate (`needs_answer` of a hand's features) as the will reads it: a finite number in [0, 1], else
    1.0 — no gate (a hostile or damaged value never reverses a ranking or drops a will below 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 1.0
    return float(value) if 0.0 <= value <= 1.0 else 1.0


def closed(value: object) -> float:
    """The factor a stored gate puts on relevance: p where the message likely asks nothing (p < 0.5), else 1."""
    p = gate_value(value)
    return p if p < 0.5 else 1.0


def gated(components: Sequence[Components], p: float) -> list[Components]:
    """Where the message likely asks nothing (p < 0.5), each participant's relevance × p, said in its reason; p is
    among its features either way (a label refits the map from them). Above 0.5 relevance is left as the maps give
    it: they were fitted on every dialogue of the split, those that ask nothing included, so their relevance already
    holds the doubt that a message asks anything — multiplying again would count it twice."""
    out = []
    for c in components:
        closes = p < 0.5
        note = f" — the message likely asks nothing (p {p:.2f})" if closes else ""
        out.append(
            c.model_copy(
                update={
                    "relevance": round(c.relevance * p, 4) if closes else c.relevance,
                    "features": {**c.features, "needs_answer": round(p, 4)},
                    "reason": (c.reason + note).strip(" —") if closes else c.reason,
                    "flags": [*c.flags, f"gate:{p:.2f}"],
                }
            )
        )
    return out


def gate_components(
    components: list[Components], turns: Sequence[Turn], embedder: Callable[[], TextEmbedder]
) -> list[Components]:
    """The gate on the user's last message (`gated`); without a usable map or embedder, ungated and flagged."""
    message = next((t.text for t in reversed(turns) if t.speaker == "user"), "")
    try:
        cal = load_gate()
        p = asks(cal, embedder(), message) if cal is not None and message.strip() else None
    except (ValueError, KeyError, EmbedderUnavailable) as exc:  # MapError is a ValueError
        return [c.model_copy(update={"flags": [*c.flags, f"gate_failed: {exc}"[:200]]}) for c in components]
    return components if p is None else gated(components, p)


def fit_gate(
    messages: Sequence[str], labels: Sequence[bool], languages: Sequence[str], embedder: TextEmbedder, source: Path
) -> tuple[Calibration, list[float]]:
    """The gate fitted on the split's last messages, with its cross-validated AUC (5 folds × 3 shuffles, bootstrap
    interval), by language, and how often it keeps a message that asks nothing under 0.5; and each message's
    held-out p (what the will maps' cross-validation reads, so their held-out figures are the gated judge's)."""
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn, ~1 s (fitting only)

    rows = [features_of(v) for v in embedder.embed(list(messages))]
    y = [bool(v) for v in labels]
    held = [0.0] * len(rows)
    for seed in range(3):
        for train, test in StratifiedKFold(5, shuffle=True, random_state=seed).split(rows, y):
            fitted = fit_logistic([rows[i] for i in train], [y[i] for i in train], names(), c=GATE_C, balanced=True)
            for i in test:
                held[i] += fitted(rows[i]) / 3

    def figure(keep: Sequence[bool]) -> dict[str, Any] | None:
        ys = [v for v, k in zip(y, keep, strict=True) if k]
        if not 0 < sum(ys) < len(ys):
            return None
        auc, ci = stats.bootstrap(stats.w_auc([p for p, k in zip(held, keep, strict=True) if k], ys))
        return {"auc": round(auc, 4) if auc is not None else None, "auc_ci": ci.as_list() if ci else None, "n": len(ys)}

    quiet = [p < 0.5 for p, v in zip(held, y, strict=True) if not v]
    pooled = figure([True] * len(y)) or {}
    metrics = {
        "cv_auc": pooled.get("auc"),
        "cv_auc_ci": pooled.get("auc_ci"),
        "cv_folds": "5 stratified × 3 shuffles",
        "by_language": {lang: figure([x == lang for x in languages]) for lang in sorted(set(languages))},
        "asks_nothing_below_half": round(sum(quiet) / len(quiet), 4) if quiet else None,
    }
    fitted_gate = Calibration.fitted(
        GATE,
        USE_ID,
        {ASKS: fit_logistic(rows, y, names(), c=GATE_C, balanced=True)},
        source=source,
        n_items=len(rows),
        metrics=metrics,
        notes=f"p(the message asks for an answer) = logistic(use-m3 vector of the last message), C={GATE_C:g}, "
        "class-balanced",
    )
    return fitted_gate, held
