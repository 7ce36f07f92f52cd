"""Every stored run kind exports and opens (issue 26, point 5).

The kinds are not listed by hand: `run_kinds_in_code` reads them from the code (every kind a run is stored
under: the kind argument of `run_context`, `async_run_context`, `create_run` and `run_case`, a constant
resolved where it is defined), so a new kind fails `test_every_kind_in_the_code_is_made_here` until a step
here stores one. Each kind is stored through its real entry point — the CLI command or the page that makes
it — against the loopback fake model of tests/dashboard/test_entry_points.py (the model is not the point),
then exported as CSV (every table), JSON and HTML by the engine, by the report and by `judgelab runs export`,
and opened on the Runs page, which must show no error and raise nothing. A director batch run once failed
all of these ('int' object has no attribute 'items')."""

from __future__ import annotations

import ast
import asyncio
import csv
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.store import Store
from tests.dashboard.rendered import settle_runs
from tests.dashboard.test_entry_points import MODEL, fake_world
from tests.fakes.forms import wkey

__all__ = ["fake_world"]  # the fixture, used here

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
CALLS = {"run_context": 1, "async_run_context": 1, "create_run": 0, "run_case": None}


# -- the kinds the code stores ------------------------------------------------------------------------------


def _constants(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Module-level string constants by name (`A = "x"`, `A, B = "x", "y"`) across the code."""
    found: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
                values = [node.value] if isinstance(target, ast.Name) else getattr(node.value, "elts", [])
                for name, value in zip(names, values, strict=False):
                    if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.setdefault(name.id, set()).add(value.value)
    return found


def run_kinds_in_code() -> set[str]:
    """Every run kind that engine/, dashboard/ and pages/ store runs under."""
    files = [p for folder in ("engine", "dashboard", "pages") for p in sorted((ROOT / folder).rglob("*.py"))]
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in files}
    constants = _constants(trees)
    kinds: set[str] = set()
    unresolved: list[str] = []

    def resolve(node: ast.expr, where: str) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            kinds.add(node.value)
        elif isinstance(node, ast.Name) and node.id == "kind":
            pass  # passed through: its callers' values are found where they are written
        elif isinstance(node, ast.Name) and node.id in constants:
            kinds.update(constants[node.id])
        else:
            unresolved.append(f"{where}: {ast.unparse(node)}")

    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # `kind: str = "jury.run"`
                args = node.args
                for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                    if arg.arg == "kind" and isinstance(default, ast.Constant) and isinstance(default.value, str):
                        kinds.add(default.value)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in CALLS:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            keyword = next((k.value for k in node.keywords if k.arg == "kind"), None)
            index = CALLS[name]
            if keyword is not None:
                resolve(keyword, where)
            elif index is not None and len(node.args) > index:
                resolve(node.args[index], where)
    assert not unresolved, f"run kinds this test cannot read: {unresolved}"
    return kinds


# -- storing one run of each kind through its entry point -----------------------------------------------------


def cli(*args: str) -> dict[str, Any] | None:
    done = runner.invoke(app, list(args))
    assert done.exit_code == 0, f"judgelab {' '.join(args)}: {done.output[-3000:]}"
    try:
        return json.loads(done.stdout) if "--json" in args else None
    except json.JSONDecodeError:
        return None


def _page(module: str) -> AppTest:
    return AppTest.from_function(_render, args=(module,), default_timeout=120).run()


def _render(module: str) -> None:
    import importlib

    importlib.import_module(f"pages.{module}").render()


def _models_prompt() -> None:
    at = _page("models")
    at.text_area(key=wkey(at, "models.prompt")).set_value("Say something")
    at.button(key="models.send").click().run()
    settle_runs(at, "models.prompt")
    assert not at.exception, at.exception


def _experiment(tmp: Path) -> None:
    from engine.experiments import load_definition, run_experiment
    from tests.engine.test_experiments import jury_yaml, scripted_models

    store = Store()
    path = jury_yaml(tmp, "temperature: [0.0, 0.3]", "calls: replay_fallthrough\n")
    asyncio.run(run_experiment(load_definition(path), store, scripted_models(store)))


def _scorecard(monkeypatch: pytest.MonkeyPatch) -> None:
    import models.registry
    from engine.experiments.execution import HubModels
    from tests.engine.test_scorecard import scripted

    with monkeypatch.context() as patch:
        patch.setattr(HubModels, "build", lambda self, store: scripted(store))
        patch.setattr(models.registry, "scoring_support", lambda spec: "none")
        cli("scorecard", "--models", MODEL, "--limit", "1", "--repeats", "1", "--json")


def _calibration(tmp: Path) -> None:
    """A judge map's refit (`run_calibration`, what every `calibrate-judge` runs) with a scripted feature
    job: the bundled model's likelihoods are not the point here."""
    from dashboard.commands import run_calibration
    from engine.refit import RefitJob as CalibrationJob

    async def rows() -> list[dict[str, float]]:
        return [{"pmi": 0.2}, {"pmi": 1.4}]

    run_calibration(CalibrationJob(Store(), "scripted", MODEL, tmp / "split.jsonl", rows, lambda f: []), tmp)


def store_every_kind(data: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = str(data / "scenarios" / "jury" / "agent-safety.yaml")
    scenario = tmp / "scenario.yaml"
    scenario.write_text("context:\n  - {speaker: user, text: 'My Python test fails with KeyError'}\n", encoding="utf-8")
    cli("models", "check", MODEL, "--json")
    _models_prompt()
    cli("director", "check", "--rules-only", "--character", "ayu", "--json", "そうですね。朝の海は人が少ないです。")
    cli("director", "batch", "--character", "yana", "--file", str(data / "scripts" / "beach.jsonl"), "--model", MODEL)
    cli("director", "duo", "--model", MODEL, "--turns", "2", "--max-retries", "1", "--json")
    lines = tmp / "lines.jsonl"
    lines.write_text('{"id": "l1", "character": "ayu", "text": "そうですね。", "acceptable": true}\n', encoding="utf-8")
    cli("director", "eval", "--cases", str(lines), "--model", MODEL, "--rubric-judge", "generate", "--json")
    generate = ("--judge", "generate", "--model", MODEL, "--json")
    cli("confidence", "evaluate", "--query", "Capital of France?", "--answer", "Paris.", *generate)
    answers = tmp / "answers.jsonl"
    answers.write_text('{"id": "a1", "query": "Capital of France?", "answer": "Paris.", "supported": true}\n')
    cli("confidence", "eval", "--cases", str(answers), *generate)
    cli("confidence", "calibrate", "--labels", str(data / "benchmarks" / "confidence.jsonl"), "--json")
    recording = str(data / "recordings" / "skipcache-default.jsonl")
    skip = ("--generate", "--channels", "4", "--hours", "3", "--rate", "1", "--seed", "5", "--recorded", recording)
    cli("skip", "simulate", *skip, "--json")
    judge = ("--judge", "judge", "--judge-model", MODEL)
    cli("handraise", "chat", "--message", "KeyError in my config", *judge, "--decide", "approve_all", "--json")
    benchmark = str(data / "benchmarks" / "handraise.jsonl")
    models = ",".join([MODEL] * 3)
    cli("handraise", "eval", "--benchmark", benchmark, "--context", "3", "--limit", "1", *judge, "--models", models)
    cli("handraise", "judge", "--scenario", str(scenario), *judge, "--json")
    panel = ("--panel", "local", "--method", "majority_vote", "--rounds", "1")
    out = cli("jury", "run", "--case", cases, "--id", "pw-leak", *panel, "--json")
    assert out is not None
    cli("jury", "eval", "--cases", cases, "--limit", "1", *panel, "--json")
    cli("jury", "replay", out["run_id"], "--rerun")
    _experiment(tmp)
    _scorecard(monkeypatch)
    _calibration(tmp)
    labels = tmp / "labels.jsonl"
    labels.write_text('{"mechanism": "director", "item_key": "line1", "label": "ok"}\n', encoding="utf-8")
    cli("labels", "import", str(labels), "--json")


# -- exporting and opening each ---------------------------------------------------------------------------------


def _problems_of_exports(store: Store, run_id: str, tmp: Path) -> list[str]:
    from dashboard.components import export_file
    from dashboard.report import report_of
    from engine.exports import csv_zip, load_run, run_json, table_csv, tables

    problems: list[str] = []
    record = load_run(store, run_id)
    found = tables(record)
    with zipfile.ZipFile(io.BytesIO(csv_zip(record))) as archive:
        names = archive.namelist()
        for name in names:
            rows = list(csv.reader(io.StringIO(archive.read(name).decode("utf-8-sig"), newline="")))
            if not rows:
                problems.append(f"{name}: no header")
    if sorted(names) != sorted(f"{n}.csv" for n in found):
        problems.append(f"zip {names} != tables {list(found)}")
    for name in found:
        table_csv(record, name)
    document = json.loads(run_json(record))
    if document["run"]["id"] != run_id or len(document["events"]) != len(record.events):
        problems.append("the JSON document is not the run")
    for fmt in ("csv", "json", "html"):  # what the pages' download buttons hand over
        if not export_file(store, run_id, fmt):
            problems.append(f"the page's {fmt} export is empty")
    report = report_of(record)
    if not report.startswith("<!DOCTYPE html>") or run_id not in report:
        problems.append("the HTML report is not the run's")
    for fmt, suffix in (("csv", ".zip"), ("json", ".json"), ("html", ".html")):
        target = tmp / f"{run_id}{suffix}"
        done = runner.invoke(app, ["runs", "export", run_id, "--format", fmt, "--output", str(target)])
        if done.exit_code != 0 or not target.stat().st_size:
            problems.append(f"judgelab runs export --format {fmt}: {done.output[-500:]}")
    return problems


def _problems_on_the_runs_page(run_id: str) -> list[str]:
    from dashboard import state

    state.clear_reads()
    at = AppTest.from_function(_render, args=("runs",), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    problems = [f"exception: {e.value}" for e in at.exception]
    problems += [f"error: {e.value}" for e in at.error]
    buttons = {b.key for b in at.get("download_button")}
    if not {f"runs.export.{fmt}.{run_id}" for fmt in ("csv", "json", "html")} <= buttons:
        problems.append(f"the run's export buttons are missing: {sorted(k for k in buttons if k)}")
    if not [t for t in at.text_input if t.key == f"runs.name.{run_id}"]:
        problems.append("the run did not open (no rename box)")
    return problems


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_every_kind_in_the_code_is_made_here() -> None:
    """The kinds read from the code, and the ones `store_every_kind` stores, are the same: a new kind (or a
    renamed one) fails here until a step stores it."""
    assert run_kinds_in_code() == MADE


MADE = {
    "models.check",
    "models.prompt",
    "director.check",
    "director.batch",
    "director.duo",
    "director.eval",
    "confidence.evaluate",
    "confidence.calibrate",
    "confidence.eval",
    "skip.simulate",
    "handraise.conversation",
    "handraise.eval",
    "handraise.judge",
    "jury.run",
    "jury.eval",
    "jury.eval.case",
    "jury.replay",
    "experiment",
    "experiment.cell",
    "experiment.record",
    "scorecard",
    "calibration",
    "labels.import",
}


@pytest.mark.slow  # every run kind, exported and opened on the Runs page: the longest test on the CPU
def test_every_run_kind_stores_exports_and_opens(
    fake_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_every_kind(fake_world, tmp_path, monkeypatch)
    store = Store()
    latest: dict[str, str] = {}
    for run in reversed(store.list_runs(limit=10_000)):  # oldest first: the newest of each kind stays
        latest[run.kind] = run.id
    assert set(latest) == MADE, f"stored {sorted(latest)}"
    exports = tmp_path / "exports"
    exports.mkdir()
    problems: dict[str, list[str]] = {}
    for kind, run_id in sorted(latest.items()):
        found = _problems_of_exports(store, run_id, exports) + _problems_on_the_runs_page(run_id)
        if found:
            problems[kind] = found
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)[:6000]
