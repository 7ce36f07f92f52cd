"""The confidence score's labels (`LabelSpec` in its spec): an item is one query (`q:<sha1[:12]>`) or one item of a
calibration set (`id:<id>`), its label whether the answer was right."""

from __future__ import annotations

import hashlib

from engine.labels.items import LabelItem, from_outcomes, number, short_text
from engine.mechanism import LabelHooks
from engine.store import Run, Store


def item_key(**parts: object) -> str:
    """`id:<id>` (a calibration item) or `q:<sha1[:12]>` (the query)."""
    if "id" in parts:
        return f"id:{parts['id']}"
    return "q:" + hashlib.sha1(str(parts["query"]).encode("utf-8")).hexdigest()[:12]


def evaluate_items(store: Store, run: Run) -> list[LabelItem]:
    """An evaluation's one query: "right" when the score stayed silent, with the score as the probability."""
    query = run.config.get("query")
    score = number(run.summary.get("score"))
    if query is None or score is None:
        return []
    predicted = "right" if run.summary.get("level") == "silent" else "wrong"
    return [
        LabelItem(
            key=item_key(query=query),
            mechanism="confidence",
            run_id=run.id,
            text=short_text(f"{query} → {run.config.get('answer', '')}"),
            predicted=predicted,
            probability=score,
            context={"predicted": predicted, "score": score, "level": run.summary.get("level")},
        )
    ]


def _score(text: str) -> float | None:
    """The score `_confidence_calibrate` writes into its text ("score 0.812; answer right")."""
    if text.startswith("score "):
        try:
            return float(text.split()[1].rstrip(";"))
        except (IndexError, ValueError):
            return None
    return None


# A calibration run's items: engine/outcomes.py's, with the score each text names.
calibrate_items = from_outcomes("confidence", {}, lambda k: item_key(id=k), _score)


HOOKS = LabelHooks(item_key, {"confidence.evaluate": evaluate_items, "confidence.calibrate": calibrate_items})
