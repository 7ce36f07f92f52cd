"""Hostile experiments through the real `judgelab experiment run` process (issue 26), each with a time bound
and, where memory is the attack, an address-space limit: a 10^9-cell grid refused, SIGTERM during a large
decision experiment honoured within seconds, and the Ray executor keeping the same contract (an address
that does not answer, `ray://` without the client, SIGTERM / SIGINT → 143 / 130 and `cancelled`)."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from dashboard.bench.experiment_bounds import decision_experiment_yaml, huge_grid_yaml
from engine.store import CANCELLED, FINISHED, RUNNING, RunFilter, Store

ROOT = Path(__file__).resolve().parents[2]


def _env(db: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a local Ray unless a test names one
    return {**env, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": db, **extra}


def _limit_memory(mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (mb * 2**20, mb * 2**20))


@pytest.mark.server  # a judgelab process
def test_a_billion_cell_grid_is_refused_quickly_within_a_memory_limit(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(huge_grid_yaml(), encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dashboard.cli", "experiment", "run", str(path)],
        cwd=ROOT,
        env=_env(f"sqlite:///{tmp_path / 'h.db'}"),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=partial(_limit_memory, 1024),
    )
    assert done.returncode == 1, done.stderr
    assert f"{path}:5: space: 1000000000 cells" in done.stderr and "JUDGELAB_MAX_CELLS" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert time.monotonic() - started < 30


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=log.with_suffix(".out").open("wb"),
        stderr=log.open("wb"),
    )


def _wait_cells(store: Store, proc: subprocess.Popen[bytes], n: int, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.count_runs(RunFilter(kinds=("experiment.cell",))) >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"ended before the signal (exit {proc.returncode}): {log.read_text()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"fewer than {n} cells within {timeout} s: {log.read_text()[-2000:]}")


def _signal_mid_run(tmp_path: Path, signum: int, executor: str, wait_s: float) -> tuple[int, float, Store, Path]:
    path = tmp_path / "big.yaml"
    path.write_text(decision_experiment_yaml(), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'big.db'}"
    Store(db).dispose()
    store = Store(db, reap=False)
    log = tmp_path / "run.log"
    proc = _start(["experiment", "run", str(path), "--executor", executor], _env(db), log)
    _wait_cells(store, proc, 50, log, wait_s)
    proc.send_signal(signum)
    started = time.monotonic()
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{signal.Signals(signum).name} ignored for 60 s")
    return code, time.monotonic() - started, store, log


def _assert_cancelled(store: Store, log: Path) -> None:
    (experiment,) = store.search_runs(RunFilter(kinds=("experiment",)), limit=10)
    assert experiment.status == CANCELLED, experiment.error
    assert not store.search_runs(RunFilter(statuses=(RUNNING,)), limit=10)  # no cell, no recording left running
    cells = store.search_runs(RunFilter(kinds=("experiment.cell",)), limit=100_000)
    assert {c.status for c in cells} == {FINISHED} and len(cells) < 100_000
    stderr = log.read_text()
    assert "Traceback" not in stderr and "cancelled:" in stderr


@pytest.mark.server  # a judgelab process
def test_sigterm_during_a_large_decision_experiment_is_honoured_within_seconds(tmp_path: Path) -> None:
    code, took, store, log = _signal_mid_run(tmp_path, signal.SIGTERM, "local", 60)
    assert code == 143, log.read_text()[-2000:]
    assert took < 10, took
    _assert_cancelled(store, log)
    store.dispose()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("address", "said"),
    [
        (f"127.0.0.1:{_closed_port()}", "cannot reach the Ray cluster at RAY_ADDRESS=127.0.0.1:"),
        ("ray://127.0.0.1:1", 'pip install "ray[client]"'),
    ],
    ids=["nothing-listening", "ray-client"],
)
@pytest.mark.server  # a judgelab process
def test_a_ray_address_that_cannot_serve_is_a_clear_error_at_once(tmp_path: Path, address: str, said: str) -> None:
    pytest.importorskip("ray")
    path = tmp_path / "small.yaml"
    path.write_text(decision_experiment_yaml(cells=10_000), encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dashboard.cli", "experiment", "run", str(path), "--executor", "ray"],
        cwd=ROOT,
        env=_env(f"sqlite:///{tmp_path / 'r.db'}", RAY_ADDRESS=address),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and said in done.stderr, done.stderr[-2000:]
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 30


@pytest.mark.server  # a local Ray instance starts (~10-20 s) each time
@pytest.mark.xdist_group("ray")  # one local Ray at a time (make test: --dist loadgroup)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_sigint_under_ray_exit_143_130_and_cancel(tmp_path: Path, signum: int) -> None:
    pytest.importorskip("ray")
    code, took, store, log = _signal_mid_run(tmp_path, signum, "ray", 180)
    assert code == 128 + signum, log.read_text()[-2000:]
    assert took < 20, took  # Ray's own shutdown included
    _assert_cancelled(store, log)
    store.dispose()
