"""A throw-away PostgreSQL cluster for the tests: Debian's binaries, `initdb` in a temp folder, the server
on 127.0.0.1 on a free port (no Unix socket), run as the `postgres` user when the tests run as root
(the server refuses root). A watchdog process stops it if the test process dies without tearing down.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from dashboard.net import free_port

WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, cmd, folder = int(sys.argv[1]), sys.argv[2:-1], sys.argv[-1]
while True:
    try:
        os.kill(parent, 0)
    except OSError:
        break
    time.sleep(1)
subprocess.run(cmd, capture_output=True)
shutil.rmtree(folder, ignore_errors=True)
"""


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL server binaries, or None."""
    explicit = os.environ.get("JUDGELAB_PG_BINDIR")
    candidates = (
        [explicit]
        if explicit
        else sorted(
            glob.glob("/usr/lib/postgresql/*/bin"),
            key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
            reverse=True,
        )
    )
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


class PostgresServer:
    """initdb + pg_ctl start on 127.0.0.1; `new_database()` gives a fresh database URL; `stop()` ends it."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.as_root = os.geteuid() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="judgelab-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.watchdog: subprocess.Popen[bytes] | None = None
        if self.as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)

    def _cmd(self, *args: str) -> list[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        return ["runuser", "-u", "postgres", "--", *cmd] if self.as_root else cmd

    def _run(self, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr or done.stdout}\n{log}")

    def start(self) -> PostgresServer:
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "60", "start")
        stop = self._cmd("pg_ctl", "-D", str(self.data), "stop", "-m", "immediate")
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", WATCHDOG, str(os.getpid()), *stop, str(self.folder)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.admin_dsn, connect_timeout=3).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        """A fresh, empty database; its plain postgresql:// URL (the store maps it to psycopg)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            subprocess.run(
                self._cmd("pg_ctl", "-D", str(self.data), "stop", "-m", "immediate"), capture_output=True, timeout=60
            )
        finally:
            if self.watchdog is not None:
                self.watchdog.kill()
                self.watchdog.wait()
            shutil.rmtree(self.folder, ignore_errors=True)
