"""`judgelab scorecard`: the models asked (or every available one), every role's run stored, JSON out; bad
options are clear errors. Models scripted here (in process); the bundled model in the slow test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.experiments.execution import HubModels
from engine.experiments.scorecard import shipped_scorecard
from engine.store import Store
from pages.models import JUDGE_COLUMNS, SCORECARD_COLUMNS, scorecard_rows
from tests.dashboard.rendered import run_ended
from tests.engine.test_scorecard import scripted

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


@pytest.fixture
def scripted_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    import models.registry

    monkeypatch.setattr(HubModels, "build", lambda self, store: scripted(store))
    monkeypatch.setattr(models.registry, "scoring_support", lambda spec: "none")


@pytest.mark.slow  # one of the longest tests on the CPU alone (make test-fast leaves it to make test)
def test_scorecard_json_stores_a_run_per_role(scripted_hub: None) -> None:
    code, out = invoke("scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1", "--json")
    assert code == 0, out
    result = json.loads(out)
    roles = {(r["role"], r["method"]) for r in result["rows"]}
    assert roles == {
        ("handraise", "judge"),
        ("jury", "generate"),
        ("director", "generate"),
        ("skip", "likelihood"),
        ("confidence", "factors"),
        ("confidence", "generate"),
    }
    store = Store()
    run = store.get_run(result["run_id"])
    assert run is not None and run.kind == "scorecard" and run.status == "finished"
    assert all(store.get_run(r) is not None for row in result["rows"] for r in row["runs"])
    code, text = invoke("scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1")
    assert code == 0 and "handraise" in text and "f1=" in text and "auc=" in text


@pytest.mark.parametrize(
    ("args", "message", "exit_code"),
    [
        (("--models", "nope"), "nope", 1),
        (("--models", "gpt-4o"), "gpt-4o is unavailable", 2),
        (("--executor", "spark"), "unknown executor 'spark'", 1),
        (("--calls", "sometimes"), "unknown --calls", 1),
        (("--roles", "handraise,voting"), "--roles: unknown role voting", 1),
        (("--methods", "jury=vote"), "--methods 'jury=vote': jury takes generate, likelihood", 1),
        (("--methods", "skip=likelihood"), "ROLE=M1,M2 with ROLE one of handraise, jury, director", 1),
    ],
)
def test_scorecard_bad_options(args: tuple[str, ...], message: str, exit_code: int) -> None:
    code, out = invoke("scorecard", *args)
    assert code == exit_code and message in out


def _models_page() -> None:
    from pages import models

    models.render()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_models_page_shows_the_latest_scorecard_with_links_to_its_runs(
    scripted_hub: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from streamlit.testing.v1 import AppTest

    import engine.experiments.scorecard

    monkeypatch.setattr(engine.experiments.scorecard, "SHIPPED", tmp_path / "none.json")
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    assert any("No scorecard of whole benchmarks yet" in i.value for i in at.info)
    # the shipped judges are shown at once, each with whether it carries measurable signal
    judges = next(d.value for d in at.dataframe if "signal" in d.value.columns)
    marks = dict(zip(judges["judge"], judges["signal"], strict=True))
    assert marks["confidence.likelihood on gemma3-270m"] == "⚠️ no measurable signal"
    assert marks["skip.likelihood on gemma3-270m"] == "✅ measurable signal"
    code, out = invoke("scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1", "--json")
    assert code == 0, out
    result = json.loads(out)
    at.run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "metrics" in d.value.columns)
    assert list(table["role"]) == ["Hand raise", "Jury", "Director rubric", "Skip judge", "Confidence", "Confidence"]
    assert list(table["run"]) == [f"/runs?run={row['runs'][-1]}" for row in result["rows"]]
    assert "f1" in table["metrics"][0] and "auc" in table["metrics"][3]
    assert any(result["run_id"] in c.value for c in at.caption)
    # one case: the limited roles cannot clear a target; the skip judge is measured on its whole recorded
    # workload (thousands of judged states), where its AUC interval clears 0.75
    marks = dict(zip(table["role"], table["good enough?"], strict=True))
    assert marks.pop("Skip judge") == "✅ good enough"
    assert set(marks.values()) <= {"❔ undecided", "– not measured", "❌ not good enough"}
    assert table["target"][0] == "f1 ≥ 0.7"


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_scorecard_is_written_for_shipping_and_the_page_shows_it_before_any_run(
    scripted_hub: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from streamlit.testing.v1 import AppTest

    import engine.experiments.scorecard

    target = tmp_path / "bundled.json"
    code, out = invoke(
        "scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1", "--output", str(target)
    )
    assert code == 0, out
    shipped = json.loads(target.read_text(encoding="utf-8"))
    assert shipped["measured_at"] and "cores" in shipped["machine"] and len(shipped["rows"]) == 6
    assert all("target" in row for row in shipped["rows"])
    monkeypatch.setattr(engine.experiments.scorecard, "SHIPPED", target)
    monkeypatch.setattr(engine.experiments.scorecard, "latest_scorecard", lambda store: None)
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    assert not at.exception
    assert any("The scorecard shipped with judgelab" in c.value for c in at.caption)
    table = next(d.value for d in at.dataframe if "metrics" in d.value.columns)
    assert table["run"].isna().all()  # its runs are in the measuring machine's store, not linked here
    target.write_text("{not json", encoding="utf-8")
    assert engine.experiments.scorecard.shipped_scorecard() is None  # a broken file: as if none shipped


def test_roles_measured_one_command_at_a_time_merge_into_one_shipped_scorecard(
    scripted_hub: None, tmp_path: Path
) -> None:
    """--roles and --methods pick what runs; --output onto an existing scorecard keeps its other rows and
    replaces those measured again (same role, model and method), so a long scorecard is made in short chunks."""
    target = tmp_path / "bundled.json"
    common = ("scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1", "--output", str(target))
    code, out = invoke(*common, "--roles", "confidence")
    assert code == 0, out
    first = json.loads(target.read_text(encoding="utf-8"))
    assert [(r["role"], r["method"]) for r in first["rows"]] == [("confidence", "factors"), ("confidence", "generate")]
    code, out = invoke(*common, "--roles", "jury", "--roles", "confidence", "--methods", "jury=generate")
    assert code == 0, out
    merged = json.loads(target.read_text(encoding="utf-8"))
    assert [(r["role"], r["method"]) for r in merged["rows"]] == [
        ("jury", "generate"),
        ("confidence", "factors"),
        ("confidence", "generate"),
    ]
    assert merged["rows"][1]["runs"] != first["rows"][0]["runs"]  # measured again: the newer row
    assert merged["roles"] == ["jury", "confidence"] and len(merged["run_ids"]) == 2
    ranked = [r.get("versus_best") for r in merged["rows"][1:]]
    assert {"best": True} in ranked and any(v and "difference" in v for v in ranked)  # compared again
    code, text = invoke(*common[:-2], "--roles", "confidence")  # the terminal says each row against the best
    assert code == 0 and "vs the role's best (" in text and "(paired bootstrap)" in text
    target.write_text('{"rows": "not a list"}', encoding="utf-8")
    code, out = invoke(*common, "--roles", "confidence")
    assert code == 1 and "not a scorecard this command wrote" in out  # nothing run, nothing overwritten


@pytest.mark.slow  # one of the longest tests on the CPU alone (make test-fast leaves it to make test)
def test_the_models_page_starts_a_quick_scorecard_and_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from streamlit.testing.v1 import AppTest

    import pages.models
    from dashboard import state

    class Hub:
        def __init__(self) -> None:
            self.get_model = scripted(state.get_store())

        def get(self, model_id: str, **_: Any) -> Any:
            return self.get_model(model_id)

    hub = Hub()
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    monkeypatch.setattr(pages.models, "scoring_support", lambda spec: "none")
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    deadline = time.monotonic() + 60
    while at.button(key="models.scorecard.run").disabled:  # on a busy machine the models' availability check can
        assert time.monotonic() < deadline  # miss a rerun's time budget ("not checked"): a person reruns, as here
        time.sleep(0.5)
        at.run()
    at.button(key="models.scorecard.run").click().run()
    run_id = at.session_state["models.scorecard.run_id"]
    assert any(run_id in c.value for c in at.caption)
    store = state.get_store()
    deadline = time.monotonic() + 60
    while not run_ended(run_id):  # stored, and its entry point returned (the page shows it then)
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert store.get_run(run_id).status == "finished"  # type: ignore[union-attr]
    at.run()
    table = next(d.value for d in at.dataframe if "metrics" in d.value.columns)
    # per local model that runs here (the bundled Gemma and the packaged SmolLM2; the built-in mock is a dry-run
    # backend, not a model to score): hand raise, jury, director, the skip judge on its recording and its own
    # self-evaluation; then confidence on the recorded factors once
    assert sorted(table["model"]) == sorted(["gemma3-270m"] * 5 + ["smollm2-135m"] * 5 + ["—"])
    assert len(table) == 11 and all(link.startswith("/runs?run=") for link in table["run"])
    assert store.get_run(run_id).config["limit"] == 2  # type: ignore[union-attr]


def test_the_shipped_scorecard_shows_at_once_without_a_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """data/scorecard/bundled.json as shipped: the Models page shows every one of its rows, marks and
    comparisons on a fresh store, before any run and without a model (the hub is not even built)."""
    from streamlit.testing.v1 import AppTest

    from dashboard import state
    from engine.config import DATA_DIR
    from engine.experiments.scorecard import shipped_scorecard, targets
    from pages.models import scorecard_rows

    shipped = shipped_scorecard()
    assert shipped is not None, "data/scorecard/bundled.json is missing or unreadable"
    assert shipped == json.loads((DATA_DIR / "scorecard" / "bundled.json").read_text(encoding="utf-8"))
    assert shipped["commands"] and all(c.startswith("judgelab scorecard") for c in shipped["commands"])
    rows = shipped["rows"]
    assert {r["role"] for r in rows} == set(targets()) and {"gemma3-270m", "smollm2-135m"} <= {r["model"] for r in rows}
    for row in rows:
        if not row["error"]:  # every measured row: its target metric with an interval, marked by it
            metric = targets()[row["role"]].metric
            assert isinstance(row["metrics"][metric], float) and len(row["metrics"][f"{metric}_ci"]) == 2
            assert row["target"]["mark"] in {"good", "not_good", "undecided"}
    monkeypatch.setattr(state, "get_hub", lambda: pytest.fail("the shipped scorecard needs no model"))
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    assert not at.exception
    assert any("The scorecard shipped with judgelab" in c.value for c in at.caption)
    table = next(d.value for d in at.dataframe if "metrics" in d.value.columns)
    expected = scorecard_rows(shipped, linked=False)
    assert len(table) == len(rows) and list(table["good enough?"]) == [r["good enough?"] for r in expected]
    assert list(table["metrics"]) == [r["metrics"] for r in expected]
    assert list(table["vs the role's best"]) == [r["vs the role's best"] for r in expected]
    assert state.get_store().calls(limit=10) == []  # nothing was called to show it


def test_a_quick_run_shows_above_the_shipped_scorecard_and_the_key_columns_fit(scripted_hub: None) -> None:
    """A stored scorecard (here one case of the confidence role) never replaces the shipped figures: it shows first,
    as "your latest run", and data/scorecard/bundled.json under it, labelled shipped. Both tables and the judges'
    show their key columns only (a 900 px window), the rest behind "All columns"."""
    shipped = shipped_scorecard()
    assert shipped is not None
    code, out = invoke(
        "scorecard", "--models", "gemma3-270m", "--limit", "1", "--repeats", "1", "--roles", "confidence", "--json"
    )
    assert code == 0, out
    latest = json.loads(out)
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    assert not at.exception and not at.error
    heads = [m.value for m in at.markdown]
    mine = heads.index("**Your latest run**")
    theirs = next(i for i, h in enumerate(heads) if "Shipped: measured on" in h)
    assert mine < theirs and str(shipped["measured_at"])[:10] in heads[theirs].replace("\\", "")
    tables = [d for d in at.dataframe if "metrics" in d.value.columns]
    assert [len(t.value) for t in tables] == [len(latest["rows"]), len(shipped["rows"])]
    assert list(tables[1].value["metrics"]) == [r["metrics"] for r in scorecard_rows(shipped, linked=False)]
    judges = next(d for d in at.dataframe if "signal" in d.value.columns)
    shown = [list(t.proto.column_order) for t in (*tables, judges)]
    assert shown == [list(SCORECARD_COLUMNS), [c for c in SCORECARD_COLUMNS if c != "run"], list(JUDGE_COLUMNS)]
    assert all(judges.value["figure"])  # every judge has its figure in view
    at.toggle(key="details.models.scorecard.toggle").set_value(True).run()
    tables = [d for d in at.dataframe if "metrics" in d.value.columns]
    assert list(tables[0].proto.column_order) == list(tables[0].value.columns)  # every column, on Details
