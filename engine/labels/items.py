"""The items of stored runs that can be labelled, with what the judge predicted for each, and the labelling
queue that draws from them (random, stratified by the predicted label, or by uncertainty near the judge's cut).

Each mechanism says which run kinds hold its items and how to read them (`LabelSpec.readers` in its spec, the
readers in its own package); the per-item outcomes of engine/outcomes.py are reused where a kind has them
(`from_outcomes`). A kind without items gives none."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.labelstore import LabelError, default_user, label_mechanisms, label_spec, label_specs, list_labels
from engine.mechanism import resolve_callable
from engine.outcomes import EXTRACTORS
from engine.store import Run, RunFilter, Store

TEXT_CHARS = 240
QueueRule = Literal["random", "stratified", "uncertainty"]
RULES: tuple[QueueRule, ...] = ("random", "stratified", "uncertainty")


@dataclass(frozen=True)
class LabelItem:
    """One item of a stored run that a user can label: its key, a short text (untrusted), the judge's predicted
    label value (None when the judge predicts none), its probability of the mechanism's positive value and its
    cut (None where there is none), and the context to store with a label on it."""

    key: str
    mechanism: str
    run_id: str
    text: str
    predicted: str | None = None
    probability: float | None = None
    cut: float | None = None
    context: dict[str, Any] = field(default_factory=dict)


def short_text(text: object) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= TEXT_CHARS else one[: TEXT_CHARS - 1] + "…"


def number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def from_outcomes(
    mechanism: str,
    values: Mapping[str, str],
    key: Callable[[str], str] = lambda k: k,
    positive_score: Callable[[str], float | None] = lambda _t: None,
) -> Callable[[Store, Run], list[LabelItem]]:
    """Items from engine/outcomes.py's extractor of the run's kind: its label mapped to a label value."""

    def read(store: Store, run: Run) -> list[LabelItem]:
        out = []
        for o in EXTRACTORS[run.kind](store, run):
            predicted = values.get(o.label, o.label if not values else None)
            out.append(
                LabelItem(
                    key=key(o.key),
                    mechanism=mechanism,
                    run_id=run.id,
                    text=short_text(o.text),
                    predicted=predicted,
                    probability=positive_score(o.text),
                    context={"predicted": predicted, "gold": o.gold, "link": o.link or run.id, "text": o.text},
                )
            )
        return out

    return read


def readers() -> dict[str, str]:
    """Every run kind that holds items to label, with its reader ("module:function"), from each mechanism's
    `LabelSpec.readers` (in the labels' order of mechanisms)."""
    return {kind: ref for spec in label_specs().values() for kind, ref in spec.readers.items()}


def labelable_items(store: Store, run: Run) -> list[LabelItem]:
    """Every item of a stored run that can be labelled, with the judge's prediction ([] for a kind without)."""
    reader = readers().get(run.kind)
    if reader is None:
        return []
    out = []
    for item in resolve_callable(reader)(store, run):
        context = {"judge": run.kind} | item.context
        context |= {"predicted": item.predicted, "probability": item.probability, "cut": item.cut}
        out.append(dataclasses.replace(item, context=context))
    return out


def _runs(store: Store, mechanism: str, run_ids: Sequence[str] | None, limit: int = 200) -> Iterable[Run]:
    if run_ids is not None:
        for rid in run_ids:
            run = store.get_run(rid)
            if run is not None:
                yield run
        return
    yield from store.search_runs(RunFilter(kinds=tuple(label_spec(mechanism).readers)), limit=limit)


def label_queue(
    store: Store,
    *,
    mechanism: str,
    rule: QueueRule,
    n: int = 20,
    seed: int = 0,
    user: str | None = None,
    run_ids: Sequence[str] | None = None,
) -> list[LabelItem]:
    """Up to `n` items of `mechanism` not yet labelled by `user` (default: settings' user), drawn from stored
    runs by `rule`: `random`; `stratified` (the same number of each predicted label, in turn); `uncertainty`
    (the judge's probability nearest its cut first; items without one last). The same seed draws the same items."""
    if mechanism not in label_mechanisms():
        raise LabelError(f"mechanism: {mechanism!r} is not one of {', '.join(label_mechanisms())}")
    if rule not in RULES:
        raise LabelError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    who = user or default_user()
    done = {(lab.run_id, lab.item_key) for lab in list_labels(store, mechanism=mechanism, user=who)}
    pool = [
        item
        for run in _runs(store, mechanism, run_ids)
        for item in labelable_items(store, run)
        if item.mechanism == mechanism and (item.run_id, item.key) not in done
    ]
    rng = random.Random(seed)
    rng.shuffle(pool)
    if rule == "random":
        return pool[:n]
    if rule == "uncertainty":
        cut_default = 0.5

        def distance(item: LabelItem) -> float:
            if item.probability is None:
                return float("inf")
            return abs(item.probability - (item.cut if item.cut is not None else cut_default))

        return sorted(pool, key=distance)[:n]
    strata: dict[str, list[LabelItem]] = {}
    for item in pool:
        strata.setdefault(str(item.predicted), []).append(item)
    out: list[LabelItem] = []
    order = sorted(strata)
    while len(out) < n and any(strata.values()):
        for name in order:
            if strata[name] and len(out) < n:
                out.append(strata[name].pop())
    return out
