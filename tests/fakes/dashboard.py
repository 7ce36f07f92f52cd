"""The real `judgelab dashboard` on a free loopback port, for the tests that talk to it (HTTP or Chromium)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard import net

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def running_dashboard(tmp_path: Path, env: dict[str, str]) -> Iterator[int]:
    """Start it with `env` added to ours, wait for its port (a start that fails shows its log), yield the
    port, and stop it afterwards."""
    log_path = tmp_path / "dashboard.log"
    with log_path.open("w") as log:
        try:
            with net.running_dashboard(env, output=log, cwd=ROOT) as server:
                yield server.port
        except net.DashboardDidNotStart:
            pytest.fail(log_path.read_text())
