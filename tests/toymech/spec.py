"""The toy's registrations: its `MechanismSpec` (engine) and `MechanismUI` (dashboard), each part of its code named
by a loader that imports it when called, as docs/adding-a-mechanism.md says."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.mechanism_ui import DemoFlow, LabelWords, MechanismUI
from engine.experiments.adapters.base import ExperimentAdapter
from engine.mechanism import ExportTable, LabelHooks, LabelSpec, MechanismSpec, ScorecardHooks, ScorecardRole
from tests.toymech.cli import app as toy_app


def experiment() -> type[ExperimentAdapter]:
    from tests.toymech.adapter import ToyAdapter

    return ToyAdapter


def tables() -> Sequence[ExportTable]:
    from tests.toymech.adapter import total_table

    return (
        ExportTable("toy_values", "each value the toy counted", events=("toy_value",)),
        ExportTable("toy_total", "how many values cleared the bar", total_table),
    )


def scorecard() -> ScorecardHooks:
    from tests.toymech.adapter import run_role, steps

    return ScorecardHooks(run_role, steps=steps)


def labels() -> LabelHooks:
    from tests.toymech.adapter import item_key, label_items

    return LabelHooks(item_key, {"toy.count": label_items})


def demo() -> DemoFlow:
    from tests.toymech.adapter import demo_flow

    return demo_flow


SPEC = MechanismSpec(
    name="toy",
    label="Toy counter",
    demo_page="toy",
    experiment=experiment,
    experiment_cases="tests/toymech/cases.jsonl",
    experiment_space="threshold: [0.2, 0.5, 0.8]\n",
    tables=tables,
    scorecard=ScorecardRole("share", True, 0.5, "the toy's own bar", scorecard, per_model=False),
    labels=LabelSpec(("over", "under"), labels, positive="over"),
)
UI = MechanismUI(
    "toy",
    page="tests/toymech/page.py",
    title="Toy",
    icon="🧸",
    url_path="toy",
    cli=toy_app,
    labels=LabelWords(
        "Toy (over / under the bar)",
        buttons={"over": "Over the bar", "under": "Under the bar"},
        answers={"over": "over", "under": "under"},
    ),
    demo=demo,
)
