"""The real `judgelab dashboard` on a free loopback port, for the tests that talk to it (HTTP or Chromium)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.net import free_port, port_open

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def running_dashboard(tmp_path: Path, env: dict[str, str]) -> Iterator[int]:
    """Start it with `env` added to ours, wait for its port (a start that fails shows its log), yield the
    port, and stop it afterwards."""
    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", "dashboard", "--port", str(port)],
        env=os.environ | env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail((tmp_path / "dashboard.log").read_text())
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
