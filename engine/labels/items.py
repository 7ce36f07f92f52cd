"""The items of stored runs that can be labelled, with what the judge predicted for each, and the labelling
queue that draws from them (random, stratified by the predicted label, or by uncertainty near the judge's cut).

Each run kind says how to read its items (`READERS`); the per-item outcomes of engine/outcomes.py are reused
where a kind has them. A kind without items gives none."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.handraise.decisions import HandRaiseConfig
from engine.labelstore import MECHANISMS, LabelError, default_user, item_key, list_labels
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


def _short(text: object) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= TEXT_CHARS else one[: TEXT_CHARS - 1] + "…"


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _conversation(store: Store, run: Run) -> list[LabelItem]:
    """Every judged hand of every turn, with the judge's raw features (what a refit reads)."""
    try:
        config = HandRaiseConfig.model_validate(run.config.get("config", {}))
    except ValueError:
        config = HandRaiseConfig()
    texts: dict[str, str] = {}
    out: list[LabelItem] = []
    for event in store.events(run.id):
        p = event.payload
        if event.type == "user_message":
            texts[str(p.get("turn"))] = str(p.get("text") or "")
        elif event.type == "hands":
            turn = str(p.get("turn"))
            for h in p.get("hands") or []:
                if not isinstance(h, Mapping) or h.get("status") == "not_judged":
                    continue
                will = _num(h.get("will"))
                flags = [str(f) for f in h.get("flags") or []]
                version = next((f.split(":", 1)[1] for f in flags if f.startswith("calibration:")), None)
                ensemble = next((f.split(":", 1)[1] for f in flags if f.startswith("ensemble:")), None)
                predicted = None if will is None else ("speak" if will >= config.threshold else "skip")
                text = texts.get(turn, "")
                method = p.get("method") or config.judge_method
                map_id = ensemble or (config.judge_model if version else None)
                out.append(
                    LabelItem(
                        key=item_key("handraise", turn=turn, participant=h.get("model")),
                        mechanism="handraise",
                        run_id=run.id,
                        text=_short(f"{h.get('model')} — {text}"),
                        predicted=predicted,
                        probability=will,
                        cut=config.threshold,
                        context={
                            "features": dict(h.get("features") or {}),
                            "relevance": h.get("relevance"),
                            "novelty": h.get("novelty"),
                            "confidence": h.get("confidence"),
                            "raw_will": h.get("raw_will"),
                            "will": will,
                            "threshold": config.threshold,
                            "predicted": predicted,
                            # the same judge/map name as a label from use (`agreement.judge_of`)
                            "judge": f"{method}:{map_id or config.judge_model}@{version or 'uncalibrated'}",
                            "judge_method": method,
                            "judge_model": config.judge_model,
                            "map_id": map_id,
                            "map_version": version,
                            "participant": h.get("model"),
                            "text": text[:TEXT_CHARS],
                        },
                    )
                )
    return out


def _from_outcomes(
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
                    text=_short(o.text),
                    predicted=predicted,
                    probability=positive_score(o.text),
                    context={"predicted": predicted, "gold": o.gold, "link": o.link or run.id, "text": o.text},
                )
            )
        return out

    return read


def _eval_will(text: str) -> float | None:
    """The will `_handraise_eval` writes into its text ("will 0.71 — …")."""
    if text.startswith("will "):
        try:
            return float(text.split()[1])
        except (IndexError, ValueError):
            return None
    return None


def _handraise_eval_key(key: str) -> str:
    item, _, participant = key.rpartition("/")
    return item_key("handraise", item=item, participant=participant)


def _jury_case(store: Store, run: Run) -> list[LabelItem]:
    case = run.config.get("case") or {}
    verdict = run.summary.get("verdict")
    if not isinstance(case, Mapping) or verdict is None:
        return []
    return [
        LabelItem(
            key=item_key("jury", case=case.get("id", run.id)),
            mechanism="jury",
            run_id=run.id,
            text=_short(case.get("content")),
            predicted=str(verdict),
            probability=None,
            context={"predicted": str(verdict), "score": run.summary.get("score")},
        )
    ]


DIRECTOR = {"PASS": "ok", "WARN": "ok", "RETRY": "retry"}


def _director_check(store: Store, run: Run) -> list[LabelItem]:
    status = run.summary.get("status")
    if status is None:
        return []
    predicted = DIRECTOR.get(str(status))
    return [
        LabelItem(
            key=item_key("director", line=1),
            mechanism="director",
            run_id=run.id,
            text=_short(run.config.get("text")),
            predicted=predicted,
            context={"predicted": predicted, "status": status},
        )
    ]


def _confidence_evaluate(store: Store, run: Run) -> list[LabelItem]:
    query = run.config.get("query")
    score = _num(run.summary.get("score"))
    if query is None or score is None:
        return []
    predicted = "right" if run.summary.get("level") == "silent" else "wrong"
    return [
        LabelItem(
            key=item_key("confidence", query=query),
            mechanism="confidence",
            run_id=run.id,
            text=_short(f"{query} → {run.config.get('answer', '')}"),
            predicted=predicted,
            probability=score,
            context={"predicted": predicted, "score": score, "level": run.summary.get("level")},
        )
    ]


def _confidence_score(text: str) -> float | None:
    """The score `_confidence_calibrate` writes into its text ("score 0.812; answer right")."""
    if text.startswith("score "):
        try:
            return float(text.split()[1].rstrip(";"))
        except (IndexError, ValueError):
            return None
    return None


READERS: dict[str, Callable[[Store, Run], list[LabelItem]]] = {
    "handraise.conversation": _conversation,
    "handraise.eval": _from_outcomes(
        "handraise", {"speaks": "speak", "stays quiet": "skip"}, _handraise_eval_key, _eval_will
    ),
    "jury.run": _jury_case,
    "jury.eval.case": _jury_case,
    "jury.eval": _from_outcomes("jury", {}),
    "director.check": _director_check,
    "director.batch": _from_outcomes("director", DIRECTOR, lambda k: item_key("director", row=k)),
    "confidence.evaluate": _confidence_evaluate,
    "confidence.calibrate": _from_outcomes("confidence", {}, lambda k: item_key("confidence", id=k), _confidence_score),
}
# The run kinds holding each mechanism's items.
KINDS: dict[str, tuple[str, ...]] = {
    mechanism: tuple(kind for kind in READERS if kind.split(".", 1)[0] == mechanism) for mechanism in MECHANISMS
}


def labelable_items(store: Store, run: Run) -> list[LabelItem]:
    """Every item of a stored run that can be labelled, with the judge's prediction ([] for a kind without)."""
    reader = READERS.get(run.kind)
    if reader is None:
        return []
    out = []
    for item in reader(store, run):
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
    yield from store.search_runs(RunFilter(kinds=KINDS.get(mechanism, ())), limit=limit)


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
    if mechanism not in MECHANISMS:
        raise LabelError(f"mechanism: {mechanism!r} is not one of {', '.join(MECHANISMS)}")
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
