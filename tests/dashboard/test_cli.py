"""The `judgelab` CLI: models list/check, runs list/show, bench, errors and exit codes, fast start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    """Exit code and output; JSON commands are read from stdout alone (llama.cpp logs to stderr)."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_models_list_json_lists_every_entry_with_reason() -> None:
    code, out = invoke("models", "list", "--json")
    assert code == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["gemma3-270m"]["available"] is True
    assert rows["gpt-4o"]["available"] is False and "OPENAI_API_KEY" in rows["gpt-4o"]["reason"]
    assert "ollama serve" in rows["ollama-llama3.2"]["reason"]


def test_models_list_text() -> None:
    code, out = invoke("models", "list")
    assert code == 0 and "gemma3-270m" in out and "no API key" in out


@pytest.mark.model
def test_models_check_bundled_prints_a_valid_judgment_and_records_it() -> None:
    code, out = invoke("models", "check", "gemma3-270m", "--json")
    assert code == 0, out
    result = json.loads(out)
    assert set(result["parsed"]) == {"should_respond", "reason", "confidence"}
    assert 0 <= result["parsed"]["confidence"] <= 1
    assert result["completion_tokens"] > 0 and result["latency_s"] > 0
    code, out = invoke("runs", "show", result["run_id"], "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["kind"] == "models.check" and shown["status"] == "finished"
    assert [c["id"] for c in shown["calls"]] == [result["call_id"]]
    assert shown["calls"][0]["parsed"] == result["parsed"]
    assert [e["type"] for e in shown["events"]] == ["run_started", "run_finished"]
    code, out = invoke("runs", "list", "--json")
    assert code == 0 and json.loads(out)[0]["id"] == result["run_id"]
    code, out = invoke("runs", "list")
    assert code == 0 and result["run_id"] in out


def test_models_check_unavailable_model_exits_nonzero_with_reason() -> None:
    code, out = invoke("models", "check", "gpt-4o")
    assert code == 2
    assert "gpt-4o is unavailable: no API key — set OPENAI_API_KEY" in out


def test_models_check_unknown_model() -> None:
    code, out = invoke("models", "check", "no-such-model")
    assert code == 1 and "unknown model 'no-such-model'" in out and "gemma3-270m" in out


def test_broken_catalog_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "catalog.yaml"
    bad.write_text("models: [{id: x, backend: nope, model: m, profile: {name: X}}]")
    monkeypatch.setenv("JUDGELAB_CATALOG", str(bad))
    code, out = invoke("models", "list")
    assert code == 1 and str(bad) in out and "models[x].backend" in out


def test_runs_show_unknown_and_empty_list() -> None:
    code, out = invoke("runs", "list")
    assert code == 0 and "no runs recorded yet" in out
    code, out = invoke("runs", "show", "nope")
    assert code == 1 and "no run nope" in out


def test_broken_database_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "broken.db"
    db.write_bytes(b"garbage" * 1000)
    # A damaged file of yesterday: refused at once (one written in the last seconds is looked at again for a
    # moment, in case another process is still making it: tests/engine/test_store.py covers that)
    os.utime(db, (time.time() - 86_400, time.time() - 86_400))
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{db}")
    code, out = invoke("runs", "list")
    assert code == 1 and "cannot open the database" in out


def test_bench_unknown_name() -> None:
    code, out = invoke("bench", "--only", "nope")
    assert code == 1 and "unknown benchmark nope" in out and "llm.judgment" in out


def test_bench_only_takes_a_glob(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.bench import harness as bench

    ran: list[str] = []

    def fake(name: str) -> bench.BenchFn:
        def fn(repeat: int, progress: bench.Progress) -> bench.BenchResult:
            ran.append(name)
            return bench.BenchResult.from_samples(name, "fake", [1.0] * repeat, unit="s")

        return fn

    names = ["experiment.a", "experiment.b", "jury.c"]
    monkeypatch.setattr(bench, "BENCHMARKS", {n: fake(n) for n in names})
    code, out = invoke("bench", "--only", "experiment.*", "--repeat", "1", "--json")
    assert code == 0, out
    assert [r["name"] for r in json.loads(out)] == ["experiment.a", "experiment.b"] == ran
    assert bench.select_benchmarks(["jury.c", "experiment.?"]) == names  # registration order, no duplicates
    assert bench.select_benchmarks(None) == names
    code, out = invoke("bench", "--only", "experiment.x*")
    assert code == 1 and "unknown benchmark experiment.x*" in out and not ran[2:]


@pytest.mark.model
def test_bench_reports_median_min_max(tmp_path: Path) -> None:
    out_file = tmp_path / "bench.json"
    code, out = invoke("bench", "--only", "llm.judgment", "--repeat", "2", "--json", "--output", str(out_file))
    assert code == 0, out
    report = json.loads(out)
    assert json.loads(out_file.read_text()) == report
    result = report[0]
    assert result["name"] == "llm.judgment" and result["skipped"] is None
    assert len(result["samples"]) == 2
    assert result["min"] <= result["median"] <= result["max"]
    assert result["metrics"]["tokens_per_s_median"] > 0


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_bench_lists_the_mechanisms_in_a_fresh_interpreter_and_says_what_it_loaded() -> None:
    code, out = invoke("bench", "--only", "registry.listing", "--repeat", "2", "--json")
    assert code == 0, out
    (result,) = json.loads(out)
    assert result["name"] == "registry.listing" and len(result["samples"]) == 2 and result["median"] > 0
    metrics = result["metrics"]
    assert metrics["mechanisms"] >= 5 and metrics["beyond_registry_and_specs"] == []
    assert metrics["sqlalchemy_loaded"] is False
    # engine, engine.mechanism and engine.registry, then each mechanism's package and its spec
    assert metrics["engine_modules_loaded"] == 3 + 2 * metrics["mechanisms"]


@pytest.mark.server  # a real judgelab process
def test_cli_start_does_not_import_heavy_modules() -> None:
    script = (
        "import sys\n"
        "from dashboard.cli import app\n"
        "sys.argv = ['judgelab', 'runs', 'list']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('torch', 'llama_cpp', 'streamlit', 'sentence_transformers', 'openai') "
        "if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_runs_list_shows_an_experiment_as_one_line_and_lists_its_cells_on_request(tmp_path: Path) -> None:
    from engine.config import get_settings
    from engine.store import Store
    from tests.fakes.runs import stored_experiment, stored_jury

    store = Store(get_settings().resolved_database_url)
    jury_id, _ = stored_jury(store)
    experiment = stored_experiment(store, tmp_path, "threshold: [0.4, 0.5, 0.6]\nmode: [focus, brainstorm]\n")
    store.dispose()
    code, out = invoke("runs", "list", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["id"] for r in rows] == [experiment.run_id, jury_id]  # the cells are under it
    assert rows[0]["experiment_id"] == experiment.experiment_id
    assert rows[0]["experiment"].startswith("6 cells · best f1") and rows[0]["title"] == "hand raise test"
    assert rows[1]["title"] == "leak (c1)" and rows[1]["experiment_id"] is None
    code, out = invoke("runs", "list", "--json", "--cells")
    rows = json.loads(out)
    assert len(rows) == 2 + 6 + 1 and sum(r["experiment_id"] == experiment.experiment_id for r in rows) == 8
    code, out = invoke("runs", "list", "--json", "--kind", "experiment.cell")
    assert [r["kind"] for r in json.loads(out)] == ["experiment.cell"] * 6
    code, out = invoke("runs", "list")
    assert code == 0 and len(out.strip().splitlines()) == 2 and "hand raise test  (6 cells · best f1" in out
