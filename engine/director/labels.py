"""The director's labels (`LabelSpec` in its spec): an item is one checked line (`line4`) or one row of a batch
(`row4`), its label OK or RETRY (a WARN or a MODIFY is OK)."""

from __future__ import annotations

from engine.labels.items import LabelItem, from_outcomes, short_text
from engine.mechanism import LabelHooks
from engine.store import Run, Store

# The rubric's status as a label value: a line shown (as written, or mended: MODIFY) is OK.
STATUS_VALUES = {"PASS": "ok", "WARN": "ok", "MODIFY": "ok", "RETRY": "retry"}


def item_key(**parts: object) -> str:
    """`line4` (a line) or `row4` (a batch's row)."""
    return f"line{parts['line']}" if "line" in parts else f"row{parts['row']}"


def check_items(store: Store, run: Run) -> list[LabelItem]:
    """A `director check` run's one line, with its status as the prediction."""
    status = run.summary.get("status")
    if status is None:
        return []
    predicted = STATUS_VALUES.get(str(status))
    return [
        LabelItem(
            key=item_key(line=1),
            mechanism="director",
            run_id=run.id,
            text=short_text(run.config.get("text")),
            predicted=predicted,
            context={"predicted": predicted, "status": status},
        )
    ]


# A batch's rows: engine/outcomes.py's items, the status as the label value.
batch_items = from_outcomes("director", STATUS_VALUES, lambda k: item_key(row=k))


HOOKS = LabelHooks(item_key, {"director.check": check_items, "director.batch": batch_items})
