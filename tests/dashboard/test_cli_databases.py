"""The CLI on both databases — a SQLite file and a real PostgreSQL server (plain postgresql:// URL):
runs list/show, and a jury run recorded live then replayed from the database (on the mock backend: the model is not
the point here)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.events import run_context
from engine.store import Store
from models.recording import CallRecord
from tests import forkcli
from tests.engine.test_store import stored_run
from tests.fakes.mock_catalog import mock_catalog

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _mocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_CATALOG", str(mock_catalog(tmp_path)))  # read by the judgelab processes


def judgelab(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return forkcli.run(args, {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url}, timeout=300)


@pytest.mark.server  # real judgelab processes
def test_runs_list_and_show(db_url: str) -> None:
    store = Store(db_url)
    with run_context(store, "jury.run", {"case": {"id": "c1"}}, name="demo") as run:
        run.emit("juror_evaluation", juror="j1", verdict="safe_pass", note="日本語もそのまま")
        store.record_call(
            CallRecord(
                run_id=run.run_id,
                model_id="gemma3-270m",
                backend="llamacpp",
                request_hash="h",
                request={"messages": []},
                raw_text='{"ok": true}',
                parsed={"ok": True},
                prompt_tokens=7,
                completion_tokens=3,
                cost=0.0,
                created_at=datetime.now(UTC),
            )
        )
        run.summary = {"verdict": "safe_pass"}
    store.dispose()

    listed = judgelab(db_url, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["id"], row["status"], row["calls"], row["prompt_tokens"]) == (run.run_id, "finished", 1, 7)
    shown = judgelab(db_url, "runs", "show", run.run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [e["type"] for e in data["events"]] == ["run_started", "juror_evaluation", "run_finished"]
    assert data["events"][1]["payload"]["note"] == "日本語もそのまま"
    assert data["calls"][0]["parsed"] == {"ok": True} and data["summary"] == {"verdict": "safe_pass"}
    text = judgelab(db_url, "runs", "list")
    assert run.run_id in text.stdout and "finished" in text.stdout


@pytest.mark.server  # real judgelab processes
def test_a_jury_run_recorded_live_replays_identically(db_url: str) -> None:
    args = [
        "jury",
        "run",
        "--case",
        "data/scenarios/jury/agent-safety.yaml",
        "--rounds",
        "0",
        "--method",
        "majority_vote",
        "--json",
    ]
    live = judgelab(db_url, *args)
    assert live.returncode == 0, live.stderr[-3000:]
    recorded = json.loads(live.stdout)
    replayed_run = judgelab(db_url, *args, "--replay")
    assert replayed_run.returncode == 0, replayed_run.stderr[-3000:]
    replayed = json.loads(replayed_run.stdout)
    for key in ("final_verdict", "final_score", "termination_reason"):
        assert replayed["result"][key] == recorded["result"][key]
    rerun = judgelab(db_url, "jury", "replay", recorded["run_id"], "--rerun")
    assert rerun.returncode == 0 and "rerun from recorded calls: identical" in rerun.stdout, rerun.stdout
    store = Store(db_url)
    backends = {c.backend for c in store.calls(replayed["run_id"])}
    assert backends == {"replay"}  # no model ran for the replay
    assert stored_run(store, replayed["run_id"]).status == "finished"
    store.dispose()
