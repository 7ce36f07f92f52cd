"""`judgelab experiment run | list | show | export` against a real store: recorded jury calls replayed, a
killed experiment resumed, the HTML report self-contained with untrusted text escaped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.experiments import load_definition, run_experiment
from engine.store import Store
from tests import forkcli
from tests.engine.test_experiments import JURY_CASES, scripted_models

pytestmark = pytest.mark.server  # real judgelab processes

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return forkcli.run(args, os.environ | env, timeout=300)


def definition_file(tmp_path: Path, *, calls: str = "replay", extra: str = "") -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        "\n".join(
            [
                f'name: "{HOSTILE}"',
                "mechanism: jury",
                f"cases: {JURY_CASES}",
                "limit: 4",
                "base: {panel: local-gemma, max_tokens: 64, max_discussion_rounds: 2, judge: generate}",
                "space:",
                "  temperature: [0.0, 0.2, 0.4, 0.6]",
                "  consensus_threshold: [0.67, 2.0]",
                f"calls: {calls}",
                "concurrency: 1",
                extra,
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def record(tmp_path: Path, db: str) -> Path:
    """Record every request of the definition once with scripted jurors (under the bundled model's id)."""
    path = definition_file(tmp_path)
    store = Store(db)
    definition = load_definition(path).model_copy(update={"calls": "replay_fallthrough"})
    asyncio.run(run_experiment(definition, store, scripted_models(store)))
    store.dispose()
    return path


def test_run_list_show_export(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"JUDGELAB_DATABASE_URL": db, "PYTHONPATH": str(ROOT)}
    path = record(tmp_path, db)
    done = cli("experiment", "run", str(path), "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["new_calls"] == 0 and result["cells"] == 8 and result["executor"] == "local"
    eid = result["experiment_id"]
    listed = json.loads(cli("experiment", "list", "--json", env=env).stdout)
    assert eid in {e["experiment_id"] for e in listed}
    shown = json.loads(cli("experiment", "show", eid, "--json", env=env).stdout)
    assert shown["finished"] == 8 and [r["cell"] for r in shown["rows"]] == list(range(8))
    csv_text = cli("experiment", "export", eid, "--format", "csv", env=env).stdout
    assert csv_text.splitlines()[0].startswith("cell,repeat,temperature,consensus_threshold,accuracy")
    assert len(csv_text.splitlines()) == 9
    report = tmp_path / "report.html"
    assert cli("experiment", "export", eid, "--format", "html", "-o", str(report), env=env).returncode == 0
    page = report.read_text(encoding="utf-8")
    assert "<script>alert(" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(" in page
    assert "Plotly.newPlot" in page and "<script src" not in page  # charts, with plotly inlined
    bad = cli("experiment", "export", eid, "--format", "pdf", env=env)
    assert bad.returncode == 1 and "unknown format" in bad.stderr
    missing = cli("experiment", "show", "exp-nope", env=env)
    assert missing.returncode == 1 and "no experiment exp-nope" in missing.stderr


def test_bad_definition_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: x\nmechanism: jury\ncases: {JURY_CASES}\nspace:\n  stagnation_rounds: [1, 99]\n")
    done = cli("experiment", "run", str(path), env={"JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    assert done.returncode == 1
    assert f"{path}:5: space.stagnation_rounds[1]: 99" in done.stderr


def test_a_killed_experiment_resumes_skipping_finished_cells(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"JUDGELAB_DATABASE_URL": db, "PYTHONPATH": str(ROOT)}
    record(tmp_path, db)
    path = definition_file(tmp_path, extra="delay_s: 0.05")  # replayed calls take time: the kill lands mid-way
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", "experiment", "run", str(path)],
        cwd=ROOT,
        env=os.environ | env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    store = Store(db, reap=False)

    def finished_cells() -> list[Any]:
        return [
            r
            for r in store.list_runs("experiment.cell", limit=1000)
            if r.status == "finished" and r.started_at > started
        ]

    started = max(r.started_at for r in store.list_runs("experiment", limit=1000))
    deadline = time.monotonic() + 120
    while len(finished_cells()) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_cells = {r.id for r in finished_cells()}
    assert 2 <= len(killed_cells) < 8
    eid = next(
        r.config["experiment_id"]
        for r in store.list_runs("experiment", limit=1000)
        if r.kind == "experiment" and r.started_at >= started
    )
    store.dispose()
    done = cli("experiment", "run", str(path), "--resume", eid, "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["experiment_id"] == eid and result["skipped"] == len(killed_cells) and result["cells"] == 8
    assert killed_cells <= {r["run_id"] for r in result["rows"]}
    shown = json.loads(cli("experiment", "show", eid, "--json", env=env).stdout)
    assert shown["status"] == "finished" and [r["status"] for r in shown["runs"]] == ["finished", "interrupted"]
