"""The jury's labels (`LabelSpec` in its spec): an item is one case (`pw-leak`), its label the right verdict from
the case's own set (any short text)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.labels.items import LabelItem, from_outcomes, short_text
from engine.mechanism import LabelHooks
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
            context={"predicted": str(verdict), "score": run.summary.get("score")}
            | ({"votes": votes} if (votes := final_positions(run.summary.get("result"))) else {}),
        )
    ]


def final_positions(result: object) -> list[str]:
    """Each juror's last word in a stored result: its phase-1 verdict, then its latest round position."""
    if not isinstance(result, Mapping):
        return []
    last: dict[str, str] = {}
    for e in result.get("phase1_evaluations") or []:
        if isinstance(e, Mapping) and e.get("juror_id") and e.get("verdict"):
            last[str(e["juror_id"])] = str(e["verdict"])
    for r in result.get("discussion_rounds") or []:
        for st in (r.get("statements") or []) if isinstance(r, Mapping) else []:
            if isinstance(st, Mapping) and st.get("juror_id") and st.get("position"):
                last[str(st["juror_id"])] = str(st["position"])
    return list(last.values())


# A case-set evaluation's items: engine/outcomes.py's, the verdict as the label value.
eval_items = from_outcomes("jury", {})


HOOKS = LabelHooks(item_key, {"jury.run": case_items, "jury.eval.case": case_items, "jury.eval": eval_items})
