"""Per-item outcomes of a stored run, two runs of one kind diffed item by item, and their paired comparison.

A headline figure says *that* two runs differ; this says *which items* flipped (right→wrong, wrong→right, or a
changed label where there is no gold) and whether the difference is more than noise: the paired comparison of
engine/stats.py on the items both runs judged (exact McNemar for correctness, a paired bootstrap for F1).

Each run kind with items says how to read them (`EXTRACTORS`); a kind without items has no diff, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from engine import stats
from engine.comparison import compare_items, signed, supported_digits
from engine.history import NotComparable
from engine.store import Run, Store

TEXT_CHARS = 240  # an output shown side by side: its first characters


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """What a run said about one item: its label, the gold label where the item has one, and a short text."""

    key: str
    label: str
    gold: str | None = None
    correct: bool | None = None
    text: str = ""
    cluster: str = ""  # items that move together (a dialogue's participants): resampled as one
    link: str = ""  # the run that holds the item's detail (a jury case's own run), else the run itself
    score: float | None = None  # the judge's score for the item (a will, a confidence, a rubric mean)…
    truth: bool | None = None  # …and what it predicts (speaks, the answer was right, the line is acceptable)
    votes: tuple[str, ...] = ()  # the seats' own answers where a panel decided (a jury's final positions)


Change = Literal["right→wrong", "wrong→right", "label changed"]


@dataclass(frozen=True, slots=True)
class ItemChange:
    key: str
    change: Change
    a: ItemOutcome
    b: ItemOutcome


@dataclass(frozen=True)
class RunDiff:
    """Run A against run B of one kind: the items whose outcome differs, and the paired comparison."""

    a: Run
    b: Run
    shared: int  # items both runs judged
    only_a: list[str]
    only_b: list[str]
    changes: list[ItemChange]
    comparisons: dict[str, stats.Comparison]  # metric → B − A

    @property
    def basis(self) -> str:
        """What the comparison rests on, in words."""
        if not self.shared:
            return (
                f"no item in common ({len(self.only_a)} in A, {len(self.only_b)} in B): compared as two samples, "
                "not paired"
            )
        extra = (
            f"; {len(self.only_a)} only in A and {len(self.only_b)} only in B left out"
            if self.only_a or self.only_b
            else ""
        )
        tested = sum(c.p_value is not None for c in self.comparisons.values())
        holm = f"; p Holm-adjusted across {tested} metrics" if tested > 1 else ""
        return f"paired on the {self.shared} items both judged{extra}{holm}"

    @property
    def counts(self) -> dict[str, int]:
        out = {"right→wrong": 0, "wrong→right": 0, "label changed": 0}
        for change in self.changes:
            out[change.change] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a.id,
            "b": self.b.id,
            "kind": self.a.kind,
            "shared_items": self.shared,
            "only_in_a": self.only_a,
            "only_in_b": self.only_b,
            "counts": self.counts,
            "changes": [
                {"key": c.key, "change": c.change, "a": _outcome_json(c.a), "b": _outcome_json(c.b)}
                for c in self.changes
            ],
            "comparisons": {name: comp.to_dict() for name, comp in self.comparisons.items()},
        }


def _outcome_json(outcome: ItemOutcome) -> dict[str, Any]:
    return {k: v for k, v in asdict(outcome).items() if k not in ("key", "cluster") and v not in ("", None, ())}


class NoItems(ValueError):
    """A run kind whose runs have no per-item outcomes (a single check, a conversation, a prompt)."""


def _short(text: object) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= TEXT_CHARS else one[: TEXT_CHARS - 1] + "…"


def _payloads(store: Store, run: Run, event_type: str) -> Iterable[dict[str, Any]]:
    return (e.payload for e in store.events(run.id) if e.type == event_type)


def _handraise_eval(store: Store, run: Run) -> list[ItemOutcome]:
    """One outcome per (dialogue, participant): speaks or stays quiet, against its label. With repeats, the
    first judgment (the others are the consistency figure's business)."""
    out = []
    for item in _payloads(store, run, "handraise_eval_item"):
        runs = item.get("runs") or []
        if not runs:
            continue
        for pid, gold in (item.get("labels") or {}).items():
            said = (runs[0].get("predictions") or {}).get(pid)
            if not isinstance(said, Mapping):
                continue
            speaks = bool(said.get("speak"))
            will = _number(said.get("will"))
            text = f"will {will:.2f}" if will is not None else ""
            if said.get("reason"):
                text += f" — {said['reason']}" if text else str(said["reason"])
            out.append(
                ItemOutcome(
                    key=f"{item.get('id')}/{pid}",
                    label="speaks" if speaks else "stays quiet",
                    gold="speaks" if gold else "stays quiet",
                    correct=speaks == bool(gold),
                    text=_short(text),
                    cluster=str(item.get("id")),
                    score=will,
                    truth=bool(gold),
                )
            )
    return out


def _jury_eval(store: Store, run: Run) -> list[ItemOutcome]:
    out = []
    for item in _payloads(store, run, "jury_eval_item"):
        verdicts = item.get("final_positions") or {}
        seats = ", ".join(f"{seat}: {v or 'failed'}" for seat, v in verdicts.items())
        out.append(
            ItemOutcome(
                key=str(item.get("id")),
                label=str(item.get("final_verdict")),
                gold=None if item.get("gold") is None else str(item["gold"]),
                correct=item.get("correct"),
                text=_short(f"score {item.get('final_score')}; seats {seats}" if seats else ""),
                cluster=str(item.get("id")),
                link=str(item.get("run_id") or ""),
                votes=tuple(str(v) for v in verdicts.values() if v) if isinstance(verdicts, Mapping) else (),
            )
        )
    return out


def _director_batch(store: Store, run: Run) -> list[ItemOutcome]:
    """A script's lines: PASS / WARN / RETRY (no gold: changes are label changes)."""
    out = []
    for line in _payloads(store, run, "director_line"):
        reasons = line.get("reasons") or []
        why = " · ".join(map(str, reasons)) if isinstance(reasons, list) else str(reasons)
        out.append(
            ItemOutcome(
                key=str(line.get("id")),
                label=str(line.get("status")),
                text=_short(f"{line.get('text', '')}" + (f" — {why}" if why else "")),
                cluster=str(line.get("id")),
            )
        )
    return out


def _confidence_calibrate(store: Store, run: Run) -> list[ItemOutcome]:
    """A labelled set's items: the level each got (the gold is whether the answer was right, which the level
    does not predict one to one: changes are label changes)."""
    result = run.summary.get("result")
    items = result.get("items", []) if isinstance(result, Mapping) else []
    return [
        ItemOutcome(
            key=str(i.get("id")),
            label=str(i.get("level")),
            text=_short(f"score {_number(i.get('score')) or 0:.3f}; answer {'right' if i.get('correct') else 'wrong'}"),
            cluster=str(i.get("id")),
            score=_number(i.get("score")),
            truth=None if i.get("correct") is None else bool(i.get("correct")),
        )
        for i in items
        if isinstance(i, Mapping)
    ]


def _number(value: object) -> float | None:
    """A finite number from a stored payload (a bool, NaN or infinity is none)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return number if math.isfinite(number) else None


def _scored(event: str, label: str, score: str, truth: str, words: str) -> Callable[[Store, Run], list[ItemOutcome]]:
    """Items of a labelled file: each one's decision (`label`, no gold: changes are label changes), and a score
    that predicts its `truth` (so AUC, and ECE and Brier for a probability, compare). `words` names the score."""

    def read(store: Store, run: Run) -> list[ItemOutcome]:
        out = []
        for line in _payloads(store, run, event):
            value = _number(line.get(score))
            said = line.get(label) or line.get("level") or "no decision"
            out.append(
                ItemOutcome(
                    key=str(line.get("id")),
                    label=str(said),
                    text=_short(f"{words} {value:.3g}" if value is not None else f"no {words}"),
                    cluster=str(line.get("id")),
                    score=value,
                    truth=None if line.get(truth) is None else bool(line.get(truth)),
                )
            )
        return out

    return read


# A labelled file of lines: the status each got; the rubric's mean predicts the line's label (acceptable or not).
_director_eval = _scored("director_eval_item", "status", "rubric_score", "acceptable", "rubric")
# A labelled set of answers: the level acted on; the score predicts whether the answer is supported.
_confidence_eval = _scored("confidence_eval_item", "acted_level", "score", "supported", "score")


def cell_items(o: Mapping[str, Any]) -> list[ItemOutcome]:
    """A cell's stored outcomes as item outcomes (`engine.outcomes.ItemOutcome`), so two cells compare as two runs
    do (`engine.comparison`): a decision against its label (hand raise), right or wrong (jury), or the
    confidence lab's decision — goes ahead or asks first — with its score against whether the answer was right."""
    kind = str(o.get("kind"))
    n = (
        len(o.get("score") or o.get("labels") or [])
        if kind in ("scores", "labels")
        else len(o.get("pred") or o.get("right") or "")
    )
    keys = [str(k) for k in o.get("keys") or []] or [f"item {i + 1}" for i in range(n)]
    if len(set(keys)) < len(keys):  # repeated keys would pair the wrong items: each keeps its place
        keys = [k if keys.count(k) == 1 else f"{k} #{i + 1}" for i, k in enumerate(keys)]
    out = []
    if kind == "binary":
        clusters = [str(c) for c in o.get("cluster") or []] or keys
        for key, p, g, c in zip(keys, str(o["pred"]), str(o["gold"]), clusters, strict=True):
            said, gold = ("speaks" if p == "1" else "stays quiet"), ("speaks" if g == "1" else "stays quiet")
            out.append(ItemOutcome(key, said, gold, said == gold, cluster=c))
    elif kind == "labels":
        out = [ItemOutcome(key, str(label)) for key, label in zip(keys, o.get("labels") or [], strict=True)]
    elif kind == "correct":
        for key, c in zip(keys, str(o["right"]), strict=True):
            label = "right" if c == "1" else "wrong" if c == "0" else "no gold"
            out.append(ItemOutcome(key, label, correct=None if c == "-" else c == "1"))
    else:
        proceed = str(o.get("proceed") or "")
        for i, (key, score, c) in enumerate(zip(keys, o.get("score") or [], str(o["correct"]), strict=True)):
            decision = ("goes ahead" if proceed[i] == "1" else "asks first") if proceed else "scored"
            gold = "right answer" if c == "1" else "wrong answer"
            out.append(ItemOutcome(key, decision, gold, text=f"score {score:.2f}", score=float(score), truth=c == "1"))
    return out


def _experiment_cell(store: Store, run: Run) -> list[ItemOutcome]:
    """An experiment cell: the per-item outcomes it stored (`engine.experiments.evidence`), as `cell_items`."""
    outcomes = run.summary.get("outcomes")
    if not isinstance(outcomes, Mapping):
        raise NoItems(f"experiment cell {run.id} stored no per-item outcomes")
    try:
        return cell_items(outcomes)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # outcomes not of the shape a cell stores
        raise NoItems(f"experiment cell {run.id}: its stored outcomes are malformed ({type(exc).__name__})") from None


EXTRACTORS: dict[str, Callable[[Store, Run], list[ItemOutcome]]] = {
    "handraise.eval": _handraise_eval,
    "jury.eval": _jury_eval,
    "director.batch": _director_batch,
    "director.eval": _director_eval,
    "confidence.calibrate": _confidence_calibrate,
    "confidence.eval": _confidence_eval,
    "experiment.cell": _experiment_cell,
}


MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, UnicodeError)


def extracted(extract: Callable[[Store, Run], list[ItemOutcome]], store: Store, run: Run) -> list[ItemOutcome]:
    """A run's item outcomes by its kind's extractor; stored items not of their kind's shape (an imported or
    damaged run) are NoItems that say so, never a crash of the page or command reading them."""
    try:
        return extract(store, run)
    except MALFORMED as exc:
        raise NoItems(
            f"run {run.id}: its stored items are malformed ({type(exc).__name__}): no item comparison"
        ) from None


def item_outcomes(store: Store, run: Run) -> dict[str, ItemOutcome]:
    """The run's outcomes by item key (NoItems for a kind without items, or items it cannot read)."""
    extract = EXTRACTORS.get(run.kind)
    if extract is None:
        kinds = ", ".join(sorted(EXTRACTORS))
        raise NoItems(f"a {run.kind} run has no items to diff — item diffs cover {kinds}")
    return {o.key: o for o in extracted(extract, store, run)}


def _change(a: ItemOutcome, b: ItemOutcome) -> Change | None:
    if a.correct is not None and b.correct is not None and a.correct != b.correct:
        return "right→wrong" if a.correct else "wrong→right"
    if a.label != b.label:
        return "label changed"
    return None


def diff_runs(store: Store, a: Run, b: Run, *, seed: int = stats.SEED) -> RunDiff:
    """Run A against run B (one kind): the items that changed, in A's order, and B − A compared on the items
    both judged. Raises NotComparable (engine.history) for two kinds, NoItems for a kind without items."""
    if a.kind != b.kind:
        raise NotComparable(f"{a.id} is a {a.kind} run and {b.id} a {b.kind} run — diff two runs of one kind")
    left, right = item_outcomes(store, a), item_outcomes(store, b)
    shared = [k for k in left if k in right]
    changes = []
    for key in shared:
        change = _change(left[key], right[key])
        if change is not None:
            changes.append(ItemChange(key, change, left[key], right[key]))
    return RunDiff(
        a=a,
        b=b,
        shared=len(shared),
        only_a=[k for k in left if k not in right],
        only_b=[k for k in right if k not in left],
        changes=changes,
        comparisons=compare_items(list(left.values()), list(right.values()), seed=seed),
    )


def diff_text(diff: RunDiff) -> list[str]:
    """The diff as lines of text (the CLI's and the report's)."""
    counts = diff.counts
    lines = [
        f"{diff.a.id} → {diff.b.id} ({diff.a.kind}): {diff.shared} items in both, "
        f"{counts['right→wrong']} right→wrong, {counts['wrong→right']} wrong→right, "
        f"{counts['label changed']} label changes"
        + (f"; only in A: {len(diff.only_a)}" if diff.only_a else "")
        + (f"; only in B: {len(diff.only_b)}" if diff.only_b else ""),
    ]
    for name, comp in diff.comparisons.items():
        lines.append(comparison_text(name, comp))
    for change in diff.changes:
        lines.append(f"  {change.change:<13} {change.key}: {change.a.label} → {change.b.label}")
    return lines


def comparison_text(name: str, comp: stats.Comparison) -> str:
    """'accuracy 0.50 → 0.64: +0.14 (−0.07 to +0.36), p = 0.29, Holm 0.58 (exact McNemar, 14 items)', each figure
    to the digits its interval supports."""
    if comp.difference is None:
        return f"{name}: not comparable on these items ({comp.test}, {comp.n} items)"
    d = supported_digits(comp.interval) if comp.interval is not None else 2
    p = "" if comp.p_value is None else f", p = {comp.p_value:.3g}"
    if comp.p_holm is not None and comp.p_holm != comp.p_value:
        p += f", Holm {comp.p_holm:.3g}"
    spread = f" ({signed(comp.interval.low, d)} to {signed(comp.interval.high, d)})" if comp.interval else ""
    spread = spread or (f" ({comp.reason})" if comp.reason else "")
    return (
        f"{name} {comp.a:.{d}f} → {comp.b:.{d}f}: {signed(comp.difference, d)}{spread}{p} ({comp.test}, {comp.n} items)"
    )
