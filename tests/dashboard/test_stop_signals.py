"""No run is stuck or phantom: real `judgelab jury run` / `jury eval` processes (on the mock backend, each call
0.5 s: the model is not the point here), stopped
mid-run with SIGKILL, SIGTERM or SIGINT, on SQLite and on a real PostgreSQL server.

- SIGTERM / SIGINT: the process closes its run(s) as `cancelled`, with every event so far and the reason,
  and exits 143 / 130 with one line on stderr.
- SIGKILL: nothing can run in the process, so the run stays `running` until the next start of the CLI (or
  the dashboard), which finds its owner gone and marks it `interrupted`.
- Replay then says "incomplete: … after event N"; `--rerun` says there is nothing to compare with.
Nothing recorded before the signal is lost: every event and call seen mid-run is still there after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.store import Store
from tests.engine.test_store import stored_run
from tests.fakes.mock_catalog import mock_catalog

ROOT = Path(__file__).resolve().parents[2]
CASE = "data/scenarios/jury/agent-safety.yaml"
JURY_RUN = ["jury", "run", "--case", CASE, "--rounds", "1", "--method", "majority_vote"]


@pytest.fixture(autouse=True)
def _mocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_CATALOG", str(mock_catalog(tmp_path, delay_s=0.5)))  # read by the processes


def _env(url: str) -> dict[str, str]:
    # The jury's discussion rounds are run even though the local panel's map gives the others weight 0 (by default
    # they are skipped, and the run ends right after phase 1): the signals must land in a run that is still going.
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUDGELAB_DATABASE_URL": url,
        "JURY_SKIP_IDLE_ROUNDS": "false",
        "JURY_ROLE_MAPS": "false",
    }


def judgelab(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dashboard.cli", *args],
        cwd=ROOT,
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=300,
    )


def start(url: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """The CLI in the background; its stderr (llama.cpp's load log too) goes to a file, never a full pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", *args],
        cwd=ROOT,
        env=_env(url),
        stdout=log.with_suffix(".out").open("wb"),
        stderr=log.open("wb"),
    )


def snapshot(store: Store, kind: str) -> dict[str, Any]:
    """The newest run of `kind`: its status, events (seq, type) and call ids, read from the database."""
    runs = store.list_runs(kind=kind)
    if not runs:
        return {"run": None, "events": [], "calls": []}
    run = next(r for r in runs if r.kind == kind)
    fresh = store.get_run(run.id)
    return {
        "run": fresh,
        "events": [(e.seq, e.type) for e in store.events(run.id)],
        "calls": [c.id for c in store.calls(run.id)],
    }


def wait_mid_run(
    store: Store, proc: subprocess.Popen[bytes], kind: str, event: str, log: Path, timeout: float = 300
) -> dict[str, Any]:
    """Wait until the run has recorded `event` (a juror has answered: the run is mid-way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = snapshot(store, kind)
        if any(t == event for _, t in seen["events"]):
            return seen
        if proc.poll() is not None:
            pytest.fail(f"the run ended before the signal (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"no {event} within {timeout} s")


def assert_nothing_lost(before: dict[str, Any], after: dict[str, Any], label: str = "") -> None:
    print(
        f"[stop] {label}: status {after['run'].status if after['run'] else None}; events at the signal "
        f"{len(before['events'])}, after {len(after['events'])}; calls at the signal {len(before['calls'])}, "
        f"after {len(after['calls'])}"
    )  # the figures of the report (pytest -s)
    assert set(before["events"]) <= set(after["events"]), "an event recorded before the signal is gone"
    assert set(before["calls"]) <= set(after["calls"]), "a call recorded before the signal is gone"
    seqs = [s for s, _ in after["events"]]
    assert seqs == list(range(len(seqs))), f"event numbers with a gap: {seqs}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])  # a real server
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        value = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        value = request.getfixturevalue("postgres_server").new_database()
    Store(value).dispose()  # the database exists before the CLI starts
    return value


@pytest.mark.server
def test_sigkill_leaves_a_running_run_that_the_next_start_marks_interrupted(url: str, tmp_path: Path) -> None:
    store = Store(url, reap=False)
    proc = start(url, JURY_RUN, tmp_path / "kill.log")
    seen = wait_mid_run(store, proc, "jury.run", "juror_evaluation", tmp_path / "kill.log")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    run_id = seen["run"].id
    assert stored_run(store, run_id).status == "running"  # nobody could close it

    listed = judgelab(url, "runs", "list", "--json")  # the next start
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout) if r["id"] == run_id)
    assert row["status"] == "interrupted"
    after = snapshot(store, "jury.run")
    assert_nothing_lost(seen, after, f"SIGKILL {url.split(':')[0]} (exit {proc.returncode})")
    last_seq, last_type = after["events"][-1]
    assert f"interrupted after event {last_seq}: its process" in row["error"]

    replay = judgelab(url, "jury", "replay", run_id)
    assert replay.returncode == 0, replay.stderr
    assert f"incomplete: interrupted after event {last_seq} ({last_type})" in replay.stdout
    rerun = judgelab(url, "jury", "replay", run_id, "--rerun")
    assert rerun.returncode == 1 and "DIFFERENT" not in rerun.stdout
    assert "not compared — the run is interrupted" in rerun.stdout
    for done in (listed, replay, rerun):
        assert "Traceback" not in done.stdout + done.stderr
    store.dispose()


@pytest.mark.server
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_sigint_close_the_run_as_cancelled_with_its_events(signum: int, url: str, tmp_path: Path) -> None:
    name = signal.Signals(signum).name
    store = Store(url, reap=False)
    log = tmp_path / f"{name}.log"
    proc = start(url, JURY_RUN, log)
    seen = wait_mid_run(store, proc, "jury.run", "juror_evaluation", log)
    proc.send_signal(signum)
    code = proc.wait(timeout=120)
    stderr = log.read_text(errors="replace")
    assert code == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr
    assert f"cancelled: {name} received" in stderr

    after = snapshot(store, "jury.run")
    run = after["run"]
    assert run.id == seen["run"].id and run.status == "cancelled"
    reason = f"{name} received" + (" (Ctrl-C)" if signum == signal.SIGINT else "")
    assert run.error == f"cancelled: {reason}"
    assert_nothing_lost(seen, after, f"{name} {url.split(':')[0]} (exit {code})")
    last_seq, last_type = after["events"][-1]
    assert last_type == "run_cancelled"
    assert store.events(run.id)[-1].payload == {"reason": reason}

    replay = judgelab(url, "jury", "replay", run.id)
    assert f"incomplete: cancelled after event {last_seq} (run_cancelled) — {reason}" in replay.stdout
    store.dispose()


@pytest.mark.server
def test_sigterm_during_an_eval_cancels_the_eval_and_its_case(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'eval.db'}"
    Store(url).dispose()
    store = Store(url, reap=False)
    log = tmp_path / "eval.log"
    proc = start(
        url,
        [
            "jury",
            "eval",
            "--cases",
            "data/benchmarks/jury.jsonl",
            "--limit",
            "2",
            "--rounds",
            "1",
            "--method",
            "majority_vote",
        ],
        log,
    )
    seen = wait_mid_run(store, proc, "jury.eval.case", "juror_evaluation", log)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143
    statuses = {r.kind: (r.status, r.error) for r in store.list_runs()}
    assert statuses == {
        "jury.eval": ("cancelled", "cancelled: SIGTERM received"),
        "jury.eval.case": ("cancelled", "cancelled: SIGTERM received"),
    }
    assert_nothing_lost(seen, snapshot(store, "jury.eval.case"), "SIGTERM jury eval, its case (exit 143)")
    store.dispose()


def test_replay_page_marks_a_dead_run_and_says_it_is_incomplete(tmp_path: Path) -> None:
    """The dashboard's start finds the run whose process died and the Replay page says where it stopped."""
    from datetime import UTC, datetime

    from sqlalchemy import update
    from sqlmodel import col
    from streamlit.testing.v1 import AppTest

    from engine.store import Run

    store = Store()  # the dashboard's database (JUDGELAB_DATABASE_URL of this test)
    run = store.create_run("jury.run", {"case": {"id": "x"}})
    for seq, type_ in enumerate(["run_started", "jury_started", "phase_started", "juror_evaluation"]):
        store.append_event(
            run.id,
            seq,
            type_,
            {"juror": "juror-1", "verdict": "safe_pass", "score": 90, "confidence": 0.9, "reasoning": "ok"}
            if seq == 3
            else {},
            datetime.now(UTC),
        )
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == run.id).values(owner_pid=dead.pid))
    store.dispose()

    def page() -> None:
        from pages import replay

        replay.render()

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    assert any("incomplete: interrupted after event 3 (juror_evaluation)" in t.value for t in at.text)
    assert stored_run(Store(reap=False), run.id).status == "interrupted"


def test_the_dashboard_start_marks_runs_whose_process_died(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import update
    from sqlmodel import col
    from streamlit.testing.v1 import AppTest

    from engine.store import Run

    store = Store()
    run = store.create_run("skip.simulate")
    store.append_event(run.id, 0, "run_started", {}, datetime.now(UTC))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == run.id).values(owner_pid=dead.pid))
    store.dispose()
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120).run()
    assert not at.exception
    saved = Store(reap=False).get_run(run.id)
    assert saved is not None and saved.status == "interrupted" and "after event 0" in (saved.error or "")


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_dashboard_says_when_its_database_is_damaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    path = tmp_path / "broken.db"
    path.write_bytes(b"not a database at all" * 500)
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{path}")
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120).run()
    assert any("cannot open the database" in e.value for e in at.error)
    assert path.read_bytes() == b"not a database at all" * 500
