"""`jury run|eval --replay` with nothing recorded: an error naming the case and the juror (exit 4), the run
stored as failed — never accuracy 0.0 from fallback jurors with exit 0."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from engine.store import Store
from tests import forkcli

pytestmark = pytest.mark.server  # real judgelab processes

ROOT = Path(__file__).resolve().parents[2]


def judgelab(*args: str) -> subprocess.CompletedProcess[str]:
    return forkcli.run(args, {**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_eval_replay_on_an_empty_store_is_an_error_naming_case_and_juror() -> None:
    done = judgelab("jury", "eval", "--cases", "data/benchmarks/jury.jsonl", "--replay", "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout == ""  # no report, no accuracy
    assert "Traceback" not in done.stderr
    # the first seat to miss names itself: a model's call or the neighbours seat's embedding (they run together)
    assert re.search(
        r"error: case pw-leak: \[(gemma3-270m|smollm2-135m|use-m3) via replay\] replay miss for jury\.phase1:juror-\d-",
        done.stderr,
    ), done.stderr
    statuses = {r.kind: r.status for r in Store().list_runs()}
    assert statuses == {"jury.eval": "failed", "jury.eval.case": "failed"}


def test_run_replay_miss_is_an_error_too() -> None:
    done = judgelab("jury", "run", "--case", "data/scenarios/jury/agent-safety.yaml", "--replay")
    assert done.returncode == 4 and "error: case pw-leak:" in done.stderr and "replay miss" in done.stderr
    [run] = Store().list_runs()
    assert run.status == "failed" and "ReplayMiss" in (run.error or "")
