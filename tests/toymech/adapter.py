"""The toy's engine side: an experiment adapter whose cells make no model call, an export table, a scorecard role
(its own steps), its labels (each value of a `toy.count` run is an item: was it over the bar?) and a demo flow, over
a case set of numbers (one `{"value": x}` a line). The flow imports no dashboard code, so it lives here, as the
built-in mechanisms' flows live in their packages (`engine/<name>/demo.py`); only a flow that needs dashboard code
(the jury's note, in the Jury page's words) lives in `dashboard/demo_flows/`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.demo import PageDemo
from engine.events import run_context
from engine.experiments.adapters import ExperimentAdapter
from engine.experiments.definition import Experiment
from engine.exports import RunRecord
from engine.labels.items import LabelItem
from engine.mechanism import RoleStep
from engine.store import Run, Store

CASES = Path(__file__).with_name("cases.jsonl")


def _share(values: Sequence[float], threshold: float) -> float:
    return round(sum(v >= threshold for v in values) / len(values), 4) if values else 0.0


class ToyAdapter(ExperimentAdapter):
    name = "toy"
    decision = frozenset({"threshold"})
    metrics = ("share",)
    default_metric = "share"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, float]:
        threshold = float({**base, **params}.get("threshold", 0.5))
        if not 0 <= threshold <= 1:
            raise ValueError("threshold: between 0 and 1")
        return {"threshold": threshold}

    def load_cases(self, definition: Experiment) -> list[float]:
        path = Path(definition.cases)
        lines = (path if path.is_absolute() else Path(__file__).parents[2] / path).read_text().splitlines()
        return [float(json.loads(line)["value"]) for line in lines if line.strip()][: definition.limit]

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> list[float]:
        return list(cases)

    def decide(self, definition: Experiment, recording: Any, decision_params: Mapping[str, Any]) -> dict[str, Any]:
        threshold = self.config(definition.base, decision_params)["threshold"]
        return {"share": _share(recording, threshold), "calls": 0}

    def recording_json(self, recording: Any) -> dict[str, Any]:
        return {"values": list(recording)}


def total_table(record: RunRecord) -> list[dict[str, Any]]:
    """One row: how many of the run's values cleared its bar (a `toy.count` run only)."""
    if record.run.kind != "toy.count":
        return []
    values = [p for _, p in record.pairs("toy_value")]
    return [{"values": len(values), "cleared": sum(bool(p.get("cleared")) for p in values)}]


def count(store: Store, values: Sequence[float], threshold: float) -> str:
    """A stored `toy.count` run: one `toy_value` event per value."""
    with run_context(store, "toy.count", {"threshold": threshold}) as run:
        for value in values:
            run.emit("toy_value", value=value, cleared=value >= threshold)
        run.summary = {"share": _share(values, threshold)}
    return run.run_id


def steps(plan: Any, model_id: str | None) -> list[tuple[str | None, str | None]]:
    return [(None, "count")]


async def run_role(step: RoleStep) -> dict[str, Any]:
    values = [float(json.loads(line)["value"]) for line in CASES.read_text().splitlines() if line.strip()]
    share = _share(values, 0.3)
    run_id = count(step.store, values, 0.3)
    return {"metrics": {"share": share, "share_ci": [share - 0.05, share + 0.05]}, "runs": [run_id]}


def item_key(**parts: object) -> str:
    """`v2`: the value's position in its run."""
    return f"v{parts['index']}"


def label_items(store: Store, run: Run) -> list[LabelItem]:
    """A `toy.count` run's values, one item each: "over" predicted where the value cleared the run's bar, the
    value itself as the probability of "over" and the bar as the cut."""
    threshold = float(run.config.get("threshold", 0.5))
    values = [e.payload for e in store.events(run.id) if e.type == "toy_value"]
    return [
        LabelItem(
            key=item_key(index=i),
            mechanism="toy",
            run_id=run.id,
            text=f"value {p.get('value')}",
            predicted="over" if p.get("cleared") else "under",
            probability=float(p.get("value", 0.0)),
            cut=threshold,
        )
        for i, p in enumerate(values)
    ]


def demo_flow(store: Store) -> PageDemo:
    """The toy page's demo: one count of three values, no model."""
    run_id = count(store, [0.1, 0.6, 0.9], 0.5)
    return PageDemo(title="Toy", inputs=["0.1 0.6 0.9"], run_ids=[run_id], note="2 of 3 cleared the bar.")
