"""Who owns a run: this process (host, pid, start time, so a reused pid is not mistaken for it), and whether
a run's owner is gone (its pid dead or reused on this host; elsewhere, no heartbeat for a while)."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

import psutil

from engine.store.tables import Run, aware


def this_owner() -> tuple[str, int, float]:
    """(host, pid, process start time) of this process."""

    pid = os.getpid()
    return socket.gethostname(), pid, psutil.Process(pid).create_time()


def owner_gone(run: Run, host: str, stale: timedelta, now: datetime) -> str | None:
    """Why the run's owner is gone, or None while it may still be alive."""

    if run.owner_host == host and run.owner_pid is not None:
        try:
            process = psutil.Process(run.owner_pid)
            started = process.create_time()
            zombie = process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return f"its process {host}:{run.owner_pid} is gone"
        except psutil.AccessDenied:
            return None
        if zombie:
            return f"its process {host}:{run.owner_pid} is gone"
        if run.owner_started is not None and abs(started - run.owner_started) > 1.0:
            return f"its process {host}:{run.owner_pid} is gone (that pid now belongs to another process)"
        return None
    last = aware(run.heartbeat_at or run.started_at)
    if now - last > stale:
        who = f"{run.owner_host}:{run.owner_pid}" if run.owner_host else "an unknown process (a run from before owners)"
        return f"no heartbeat from {who} since {last:%Y-%m-%d %H:%M:%S} UTC"
    return None
