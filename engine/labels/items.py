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
from engine.mechanism import ItemReader
from engine.outcomes import EXTRACTORS, NoItems, extracted
from engine.quoting import short_text as shortened
from engine.store import Run, RunFilter, Store

TEXT_CHARS = 240
QueueRule = Literal["teach", "random", "stratified", "uncertainty"]
RULES: tuple[QueueRule, ...] = ("teach", "random", "stratified", "uncertainty")


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
    return shortened(text, TEXT_CHARS)


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
        for o in extracted(EXTRACTORS[run.kind], store, run):
            predicted = values.get(o.label, o.label if not values else None)
            out.append(
                LabelItem(
                    key=key(o.key),
                    mechanism=mechanism,
                    run_id=run.id,
                    text=short_text(o.text),
                    predicted=predicted,
                    probability=positive_score(o.text),
                    context={"predicted": predicted, "gold": o.gold, "link": o.link or run.id, "text": o.text}
                    | ({"votes": list(o.votes)} if o.votes else {}),
                )
            )
        return out

    return read


def readers() -> dict[str, ItemReader]:
    """Every run kind that holds items to label, with its reader, from each mechanism's `LabelHooks.readers` (in
    registration order)."""
    return {kind: read for spec in label_specs().values() for kind, read in spec.hooks().readers.items()}


def labelable_items(store: Store, run: Run) -> list[LabelItem]:
    """Every item of a stored run that can be labelled, with the judge's prediction ([] for a kind without)."""
    reader = readers().get(run.kind)
    if reader is None:
        return []
    try:
        found = reader(store, run)
    except NoItems:  # its stored items are malformed (`engine.outcomes.extracted`): nothing of it to label
        return []
    out = []
    for item in found:
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
    yield from store.search_runs(RunFilter(kinds=tuple(label_spec(mechanism).hooks().readers)), limit=limit)


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
    if rule == "teach":
        wrong_share = _judge_wrong_share(store, mechanism)
        return sorted(pool, key=lambda item: -teaching(item, wrong_share.get(str(item.run_id), 0.0)))[:n]
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


def teaching(item: LabelItem, run_wrong: float = 0.0) -> float:
    """How much a label on `item` would teach, from 0 to 3 (the `teach` rule orders the queue by it): the judge's
    uncertainty (1 at its cut, 0 a half-scale away; ½ when it gave no probability), how far its seats disagree (0
    unanimous, 1 evenly split; a jury's final positions), and how often the judge of that run was wrong on the items
    you labelled there (`run_wrong`)."""
    if item.probability is None:
        uncertain = 0.5
    else:
        cut = item.cut if item.cut is not None else 0.5
        uncertain = max(0.0, 1.0 - 2.0 * abs(item.probability - cut))
    votes = [str(v) for v in (item.context or {}).get("votes") or []]
    split = 0.0
    if len(votes) > 1:
        majority = max(votes.count(v) for v in set(votes)) / len(votes)
        split = (1.0 - majority) / (1.0 - 1.0 / len(votes))  # 1 when no two seats agree… 0 when all do
    return uncertain + min(1.0, split) + run_wrong


def _judge_wrong_share(store: Store, mechanism: str) -> dict[str, float]:
    """Per run: the share of your labels there that disagree with what its judge predicted (by any user)."""
    counts: dict[str, list[int]] = {}
    for lab in list_labels(store, mechanism=mechanism):
        predicted = lab.context.get("predicted")
        if lab.run_id and isinstance(predicted, str) and predicted:
            tally = counts.setdefault(lab.run_id, [0, 0])
            tally[0] += lab.label != predicted
            tally[1] += 1
    return {run: wrong / total for run, (wrong, total) in counts.items() if total}
