"""The mechanism registries (`engine.registry`, `dashboard.ui_registry`): every loader of every registered
mechanism loads what its type says, listing them loads no mechanism, every surface lists them in registration order,
and a toy mechanism (tests/toymech, registered for the test
and removed after) appears in the CLI, the experiment definition, the exports, the scorecard (its roles, its
methods) and the demo recording with nothing else edited."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dashboard.commands.experiment import _methods_help, _scorecard_methods
from dashboard.demo_record import record
from dashboard.ui_registry import demo_pages, ui, uis
from engine.demo import load_manifest, read_runs
from engine.experiments import Experiment, mechanism, run_experiment
from engine.experiments.adapters.base import ExperimentAdapter
from engine.experiments.scorecard import ScorecardPlan, default_methods, roles, run_scorecard, targets
from engine.exports import load_run, table_builders, tables
from engine.labels import LabelError, add_label, agreement, item_key, label_mechanisms, label_queue, list_labels
from engine.mechanism import ScorecardHooks
from engine.registry import mechanism_names, mechanism_spec, mechanisms, register_mechanism
from engine.store import Store
from tests.dashboard.rendered import shown
from tests.toymech import SPEC, register, unregister
from tests.toymech.adapter import count

ROOT = Path(__file__).resolve().parents[1]


def check_mechanism(name: str, root: Path = ROOT) -> None:
    """Every part a registered mechanism has loads what its type says, and its dashboard entry is whole: its page's
    file (under `root`), its sub-app, its figures and demo flow; a part it lacks is left out of its surface."""
    spec = mechanism_spec(name)
    if spec.experiment is not None:
        assert issubclass(spec.experiment(), ExperimentAdapter)
        assert mechanism(name).name == name  # the experiment adapter, as the experiments look it up
        assert (ROOT / spec.experiment_cases).is_file()
    for table in spec.tables():
        assert (table.build is None) != (not table.events)  # built, or one row per event: one of the two
    if spec.scorecard is not None:
        assert spec.scorecard.hooks().steps or spec.scorecard.methods  # its own steps, or each of its methods
    if spec.labels is not None:
        assert callable(spec.labels.hooks().key)
        refit = spec.labels.refit() if spec.labels.refit else None
        # a refittable judge says what the Labels page counts and which map it replaces by default
        assert refit is None or (refit.usable and refit.default_map and spec.labels.min_labels)
    entry = ui(name)
    assert (root / entry.page).is_file() and entry.cli is not None and entry.cli.registered_commands
    assert all(callable(build) for build in entry.figures())
    assert entry.demo is None or callable(entry.demo())


def test_every_loader_of_every_registered_mechanism_loads_its_part() -> None:
    """A loader that imports a moved or renamed name fails here, not in the one command that reads it (mypy checks
    what each part is; this checks each loader runs)."""
    names = mechanism_names()
    assert names and [u.name for u in uis()] == names  # each engine spec has its dashboard entry, in one order
    for name in names:
        check_mechanism(name)
    # the built-in mechanisms have every part
    assert all(s.experiment and s.scorecard and s.labels for s in mechanisms())


def test_listing_the_mechanisms_loads_no_mechanism() -> None:
    """`mechanism_names()` in a fresh interpreter: the registry and each mechanism's spec module, nothing else of
    the engine, no SQLAlchemy (each part's code loads when its loader is called)."""
    script = (
        "import sys; from engine.registry import mechanism_names; names = mechanism_names(); "
        "print(sorted(m for m in sys.modules if m.startswith('engine'))); print('sqlalchemy' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    loaded, sqlalchemy = found.stdout.splitlines()
    names = mechanism_names()
    specs = [f"engine.{n}" for n in names] + [f"engine.{n}.spec" for n in names]
    assert eval(loaded) == sorted(["engine", "engine.mechanism", "engine.registry", *specs])
    assert sqlalchemy == "False"


def test_the_labels_page_reads_a_refits_facts_from_the_registry() -> None:
    """The refit button's count, floor and default map are each mechanism's (`LabelSpec`), with the generic
    fallbacks for a mechanism that names none."""
    from engine.labels import default_map_id, labels_needed, usable_count

    assert labels_needed("handraise") == 10 and usable_count("handraise", []) == 0
    assert default_map_id("handraise", []) is None
    from engine.handraise.label_refit import default_map

    assert default_map_id("handraise", ["smollm2-135m"]) == default_map(["smollm2-135m"])
    assert (labels_needed("jury"), default_map_id("jury", ["a", "b"]), default_map_id("jury", [])) == (0, "a", None)


def test_each_builtin_adapter_and_demo_flow_lives_in_its_package() -> None:
    """A mechanism is its package plus three registrations (issue 27): its experiment adapter and its demo flow are
    in `engine/<name>/`, and `engine/experiments/adapters/` keeps only their base and the lookup. The one flow kept
    in the dashboard (the jury's: its note speaks the Jury page's words) is named here, so no other drifts out."""
    for spec in mechanisms():
        assert spec.experiment is not None and spec.experiment().__module__ == f"engine.{spec.name}.experiment"
        assert type(mechanism(spec.name)).__module__ == f"engine.{spec.name}.experiment"
    flows = {u.name: u.demo().__module__ for u in uis() if u.demo}
    builtin = set(mechanism_names())
    assert flows == {name: f"engine.{name}.demo" for name in builtin - {"jury"}} | {
        "jury": "dashboard.mechanisms.jury.demo"
    }
    assert sorted(p.name for p in (ROOT / "engine/experiments/adapters").glob("*.py")) == ["__init__.py", "base.py"]


def test_each_dashboard_half_mirrors_its_engine_package() -> None:
    """A built-in mechanism's dashboard half is `dashboard/mechanisms/<name>/` (#40): its CLI and registration, its
    report figures, its benchmarks; its page's file is `pages/<name>.py`, named after it, a thin entry that draws the
    screen from that folder (no function of its own but what Streamlit runs)."""
    for u in uis():
        if u.name not in mechanism_names() or u.name == "toy":
            continue
        half = f"dashboard.mechanisms.{u.name}"
        assert (ROOT / "engine" / u.name).is_dir() and (ROOT / half.replace(".", "/")).is_dir()
        assert u.cli is not None and u.cli.registered_commands[0].callback.__module__ == f"{half}.cli"
        assert {build.__module__ for build in u.figures()} == {f"{half}.report"}
        assert u.bench is not None and all(m.__name__.startswith(f"{half}.bench") for m in u.bench())  # type: ignore[attr-defined]
        assert u.page == f"pages/{u.name}.py" and u.url_path == u.name
        entry = ast.parse((ROOT / u.page).read_text(encoding="utf-8"))
        defined = [n.name for n in ast.walk(entry) if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        assert defined == [], f"{u.page} defines {defined}: its code belongs in {half.replace('.', '/')}/"


def test_every_surface_lists_the_mechanisms_in_registration_order() -> None:
    """One order (#40): the CLI, the app's navigation, the Experiments form, the scorecard, the Labels page, the
    calibration, the demo and the exports all list the mechanisms as the registry does."""
    names = mechanism_names()
    assert [u.name for u in uis()] == names
    assert roles() == tuple(names)
    assert label_mechanisms() == tuple(names)
    specs = {s.name: s for s in mechanisms()}
    assert demo_pages() == ("models", *(specs[u.name].demo_page for u in uis() if u.demo))
    assert list(default_methods()) == [n for n in names if getattr(specs[n].scorecard, "methods", ())]
    common = ["headline", "calls", "events", "corrected_rates"]
    assert [name for name, _, _ in table_builders()] == common + [t.name for s in mechanisms() for t in s.tables()]
    with pytest.raises(ValueError) as refused:
        Experiment.model_validate({"name": "x", "mechanism": "nosuch", "cases": "x.jsonl"})
    swept = [repr(n) for n in names if specs[n].experiment]
    assert f"Input should be {', '.join(swept[:-1])} or {swept[-1]}" in str(refused.value)


@pytest.fixture
def toy() -> Iterator[None]:
    register()
    try:
        yield
    finally:
        unregister()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`judgelab ARGS` in a fresh interpreter that has registered the toy before the command was built."""
    script = "import sys; from tests.toymech import register; register(); from dashboard.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.server  # two judgelab processes
def test_the_toy_is_a_cli_sub_app(toy: None) -> None:
    shown = _cli("--help")
    assert shown.returncode == 0, shown.stderr
    assert "toy" in shown.stdout and "Toy: counts values over a bar." in shown.stdout
    counted = _cli("toy", "count", "0.1", "0.6", "0.9", "--threshold", "0.5")
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.strip() == "2 of 3"
    pages = _cli("demo", "record", "--help")  # `--only` names its demo page
    assert pages.returncode == 0, pages.stderr
    assert "Record only these pages: models, handraise, skip, jury, director, confidence, toy." in pages.stdout


def test_the_toy_is_swept_by_an_experiment(toy: None, store: Store) -> None:
    definition = Experiment.model_validate(
        {
            "name": "toy sweep",
            "mechanism": "toy",
            "cases": "tests/toymech/cases.jsonl",
            "space": {"threshold": [0.2, 0.5]},
        }
    )
    result = asyncio.run(run_experiment(definition, store))
    assert sorted((row["threshold"], row["share"]) for row in result.rows) == [(0.2, 0.75), (0.5, 0.5)]


def test_an_unregistered_mechanism_is_refused_by_the_definition() -> None:
    with pytest.raises(ValueError, match="Input should be 'handraise', 'skip', 'jury', 'director' or 'confidence'"):
        Experiment.model_validate({"name": "toy sweep", "mechanism": "toy", "cases": "x.jsonl"})


def test_the_toy_has_its_export_tables(toy: None, store: Store) -> None:
    run_id = count(store, [0.1, 0.6, 0.9], 0.5)
    found = tables(load_run(store, run_id))
    assert list(found) == ["headline", "calls", "events", "toy_values", "toy_total"]
    assert [r["value"] for r in found["toy_values"].rows] == [0.1, 0.6, 0.9]
    assert found["toy_total"].rows == [{"values": 3, "cleared": 2}]


def test_the_toy_is_a_scorecard_role(toy: None, store: Store) -> None:
    assert roles()[-1] == "toy" and targets()["toy"].text == "share ≥ 0.5"
    result = asyncio.run(run_scorecard(store, ScorecardPlan(models=[], roles=("toy",))))
    (row,) = result["rows"]
    assert (row["role"], row["model"], row["method"], row["error"]) == ("toy", None, "count", None)
    assert row["metrics"]["share"] == 0.75 and row["target"]["mark"] == "good"
    assert [r.name for r in mechanisms()][-1] == "toy" and uis()[-1].title == "Toy"


def test_the_toy_takes_labels(toy: None, store: Store) -> None:
    """The store accepts the toy's values (and refuses others with the usual message), its `toy.count` runs feed
    the queue in the queue's order, its keys are its own, and the agreement counts its labels."""
    run_id = count(store, [0.2, 0.6, 0.95], 0.5)
    assert label_mechanisms()[-1] == "toy"
    assert item_key("toy", index=2) == "v2"
    with pytest.raises(LabelError, match="item_key: toy needs 'index'"):
        item_key("toy")
    # Where the judge was least sure: the value nearest the bar first.
    queue = label_queue(store, mechanism="toy", rule="uncertainty", n=5, user="me")
    assert [(i.key, i.predicted, i.run_id) for i in queue] == [
        ("v1", "over", run_id),
        ("v0", "under", run_id),
        ("v2", "over", run_id),
    ]
    context = queue[0].context
    add_label(store, mechanism="toy", item_key="v1", label=" UNDER ", run_id=run_id, user="me", context=context)
    with pytest.raises(LabelError, match=r"label: 'sideways' is not a toy label \(over / under\)"):
        add_label(store, mechanism="toy", item_key="v0", label="sideways", run_id=run_id, user="me")
    assert [(lab.item_key, lab.label) for lab in list_labels(store, mechanism="toy")] == [("v1", "under")]
    assert [i.key for i in label_queue(store, mechanism="toy", rule="random", n=5, user="me")] != []
    assert "v1" not in [i.key for i in label_queue(store, mechanism="toy", rule="random", n=5, user="me")]
    (found,) = agreement(store, mechanism="toy", user="me")
    assert (found.judge, found.n, found.labels, found.accuracy) == ("toy.count", 1, ["over", "under"], 0.0)
    unregister()
    with pytest.raises(LabelError, match="mechanism: 'toy' is not one of handraise, skip, jury, director, confidence"):
        add_label(store, mechanism="toy", item_key="v0", label="over", run_id=run_id, user="me")


def _labels_page() -> None:
    from pages import labels

    labels.render()


def test_the_toy_is_on_the_labels_page(toy: None) -> None:
    """The Labels page offers the toy by its title, draws its items and labels one with its own words."""
    from streamlit.testing.v1 import AppTest

    from dashboard import state
    from dashboard.labelling import current_user

    run_id = count(state.get_store(), [0.2, 0.6], 0.5)
    at = AppTest.from_function(_labels_page, default_timeout=60).run()
    assert not at.exception
    chooser = at.selectbox(key="labels.q.mechanism")
    assert chooser.options[-1] == "Toy (over / under the bar)"
    chooser.set_value("toy")
    at.selectbox(key="labels.q.rule").set_value("uncertainty")
    at.button(key="labels.q.draw").click().run()
    assert not at.exception
    assert [shown(b.label) for b in at.button if b.key and b.key.startswith("labels.q.value.")] == [
        "Over the bar",
        "Under the bar",
    ]
    assert any("Toy (over / under the bar)" in shown(m.value) for m in at.markdown)
    at.button(key="labels.q.value.1").click().run()
    assert not at.exception
    (label,) = list_labels(state.get_store(), mechanism="toy", user=current_user())
    assert (label.run_id, label.item_key, label.label) == (run_id, "v1", "under")


def test_a_per_model_role_runs_each_method_the_plan_picks(toy: None, store: Store) -> None:
    """A role with methods and no steps of its own: each model with each method of `ScorecardPlan.methods` (all of
    the role's by default), likelihood only where the model can score; `--methods` and its help know its choice."""
    assert SPEC.scorecard is not None
    from tests.toymech.adapter import run_role

    role = replace(
        SPEC.scorecard, per_model=True, hooks=lambda: ScorecardHooks(run_role), methods=("count", "likelihood")
    )
    register_mechanism(replace(SPEC, scorecard=role))
    assert default_methods()["toy"] == ("count", "likelihood")

    def rows(plan: ScorecardPlan) -> list[tuple[str, str | None, str | None]]:
        return [(r["role"], r["model"], r["method"]) for r in asyncio.run(run_scorecard(store, plan))["rows"]]

    plan = ScorecardPlan(models=["m1", "m2"], roles=("toy",), can_score=lambda m: m == "m1")
    assert rows(plan) == [("toy", "m1", "count"), ("toy", "m1", "likelihood"), ("toy", "m2", "count")]
    picked = _scorecard_methods(["toy=likelihood"])
    assert picked["toy"] == ("likelihood",) and picked["jury"] == ("generate", "likelihood")
    assert rows(replace(plan, methods=picked)) == [("toy", "m1", "likelihood")]
    assert _methods_help().endswith("; toy: count, likelihood")


def test_the_toy_page_is_recorded_by_its_demo_flow(toy: None, tmp_path: Path) -> None:
    """`judgelab demo record --only toy`: the toy's flow (its `MechanismUI.demo`) records its page, no model."""
    assert demo_pages()[-1] == "toy"
    manifest = record(tmp_path, only={"toy"})
    assert list(manifest.pages) == ["toy"] and load_manifest(tmp_path).pages == manifest.pages
    (run_id,) = manifest.pages["toy"].run_ids
    (document,) = read_runs(tmp_path / "runs.jsonl")
    assert document["run"]["id"] == run_id and document["run"]["kind"] == "toy.count"
    assert [e["type"] for e in document["events"]].count("toy_value") == 3
