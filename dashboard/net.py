"""Loopback helpers for the processes judgelab starts itself (the benchmark's dashboard, test servers)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def stop_process(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    """Ask a child process to end (SIGTERM), and kill it if it has not ended after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


class DashboardDidNotStart(RuntimeError):
    """`judgelab dashboard` exited, or did not listen on its port in time."""


@dataclass(frozen=True)
class RunningDashboard:
    port: int
    process: subprocess.Popen[Any]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def running_dashboard(
    env: Mapping[str, str | None],
    *,
    output: int | IO[Any] = subprocess.DEVNULL,
    cwd: Path | None = None,
    timeout: float = 60,
) -> Iterator[RunningDashboard]:
    """`judgelab dashboard` in a child process on a free loopback port, with `env` laid over ours (a None value
    unsets that variable) and its stdout and stderr to `output`. Waits until it listens (DashboardDidNotStart
    when it exits first or `timeout` seconds pass), yields it, and stops it afterwards."""
    port = free_port()
    child_env = {k: v for k, v in (dict(os.environ) | dict(env)).items() if v is not None}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", "dashboard", "--port", str(port)],
        env=child_env,
        cwd=cwd,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while not port_open(port):
            if proc.poll() is not None:
                raise DashboardDidNotStart(f"`judgelab dashboard` exited with code {proc.returncode} before listening")
            if time.monotonic() > deadline:
                raise DashboardDidNotStart(f"nothing listening on 127.0.0.1:{port} after {timeout:g} s")
            time.sleep(0.2)
        yield RunningDashboard(port, proc)
    finally:
        stop_process(proc)
