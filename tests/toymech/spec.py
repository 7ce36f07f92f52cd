"""The toy's registrations: its `MechanismSpec` (engine) and `MechanismUI` (dashboard)."""

from dashboard.mechanism_ui import LabelWords, MechanismUI
from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole

SPEC = MechanismSpec(
    name="toy",
    label="Toy counter",
    demo_page="toy",
    experiment="tests.toymech.adapter:ToyAdapter",
    experiment_cases="tests/toymech/cases.jsonl",
    experiment_space="threshold: [0.2, 0.5, 0.8]\n",
    tables=(
        ExportTable("toy_values", "each value the toy counted", events=("toy_value",)),
        ExportTable("toy_total", "how many values cleared the bar", "tests.toymech.adapter:total_table"),
    ),
    scorecard=ScorecardRole(
        "share",
        True,
        0.5,
        "the toy's own bar",
        steps="tests.toymech.adapter:steps",
        run="tests.toymech.adapter:run_role",
        per_model=False,
    ),
    labels=LabelSpec(
        ("over", "under"),
        "tests.toymech.adapter:item_key",
        positive="over",
        readers={"toy.count": "tests.toymech.adapter:label_items"},
    ),
)
UI = MechanismUI(
    "toy",
    page="tests.toymech.page:render",
    title="Toy",
    icon="🧸",
    url_path="toy",
    cli="tests.toymech.cli:app",
    labels=LabelWords(
        "Toy (over / under the bar)",
        buttons={"over": "Over the bar", "under": "Under the bar"},
        answers={"over": "over", "under": "under"},
    ),
    demo="tests.toymech.adapter:demo_flow",
)
