"""The jury's labels (`LabelSpec` in its spec): an item is one case (`pw-leak`), its label the right verdict from
the case's own set (any short text)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.labels.items import LabelItem, from_outcomes, short_text
from engine.store import Run, Store


def item_key(**parts: object) -> str:
    """`pw-leak`: the case's id."""
    return str(parts["case"])


def case_items(store: Store, run: Run) -> list[LabelItem]:
    """A jury run's one case, with its final verdict as the prediction."""
    case = run.config.get("case") or {}
    verdict = run.summary.get("verdict")
    if not isinstance(case, Mapping) or verdict is None:
        return []
    return [
        LabelItem(
            key=item_key(case=case.get("id", run.id)),
            mechanism="jury",
            run_id=run.id,
            text=short_text(case.get("content")),
            predicted=str(verdict),
            probability=None,
            context={"predicted": str(verdict), "score": run.summary.get("score")},
        )
    ]


# A case-set evaluation's items: engine/outcomes.py's, the verdict as the label value.
eval_items = from_outcomes("jury", {})
