"""A database in a folder that cannot be written (a read-only mount, an immutable folder): reads work, writes
are refused naming the folder, and the file is never called damaged (issue 26, point 9).

How the folder is made read-only here: the tests run as root, and root ignores permission bits (a 0555
folder is still writable to it). An immutable folder (`chattr +i`) refuses new files to root too, as a
read-only mount does, and SQLite then cannot make its -wal, -shm or journal files — the case in point. As
another user a 0555 folder does the same. Where neither works (root without CAP_LINUX_IMMUTABLE, or a file
system without the flag) the tests are skipped, saying so.

Each command runs as a real `judgelab` process under a time limit and an address-space limit, so a
regression (a hang, a retry loop) fails instead of stalling CI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.events import run_context
from engine.store import Store, StoreError
from models.recording import CallRecord

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 3 * 1024**3  # address space of one command: far above what reading a small store needs
TIME_LIMIT_S = 60


def _immutable(folder: Path, on: bool) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    done = subprocess.run([chattr, "+i" if on else "-i", str(folder)], capture_output=True, check=False)
    return done.returncode == 0


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """The folder, read-only to this process and its children for the duration (see the module's note)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if not _immutable(folder, True):
        pytest.skip("running as root without `chattr +i` here: no way to make a folder read-only to root")
    try:
        yield
    finally:
        _immutable(folder, False)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def judgelab(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": f"sqlite:///{db}"}
    return subprocess.run(
        [sys.executable, "-m", "dashboard.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        preexec_fn=_limits,
    )


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    """A store in its own folder with one finished run and one call, its WAL checkpointed into the file (as
    a store left by a process that closed)."""
    folder = tmp_path / "store"
    folder.mkdir()
    path = folder / "runs.db"
    store = Store(f"sqlite:///{path}")
    with run_context(store, "models.check", {"model_id": "m"}, name="kept") as run:
        store.record_call(
            CallRecord(run_id=run.run_id, model_id="m", backend="openai", request_hash="h", request={}, raw_text="ok")
        )
        run.summary = {"ok": True}
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.dispose()
    for extra in folder.glob("runs.db-*"):
        extra.unlink()
    return path, run.run_id


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.server  # judgelab processes
def test_reads_work_and_writes_are_refused_naming_the_folder(recorded: tuple[Path, str], tmp_path: Path) -> None:
    path, run_id = recorded
    before = _digest(path)
    out = tmp_path / "out.json"
    with read_only(path.parent):
        listed = judgelab("runs", "list", "--json", db=path)
        shown = judgelab("runs", "show", run_id, db=path)
        exported = judgelab("runs", "export", run_id, "--format", "json", "--output", str(out), db=path)
        wrote = judgelab("director", "check", "--rules-only", "--character", "ayu", "そうですね。", db=path)
        assert sorted(p.name for p in path.parent.iterdir()) == ["runs.db"]  # no journal file was made
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
    assert shown.returncode == 0 and "calls: 1" in shown.stdout, shown.stderr
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["run"]["name"] == "kept"
    assert wrote.returncode == 1, wrote.stdout + wrote.stderr
    assert f"the folder {path.parent} is not writable" in wrote.stderr, wrote.stderr
    assert "set JUDGELAB_DATABASE_URL" in wrote.stderr
    for wrong in ("damaged", ".recover", "Traceback", "unexpected"):
        assert wrong not in wrote.stderr + listed.stderr, wrote.stderr
    assert _digest(path) == before


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_new_database_in_a_read_only_folder_names_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    with read_only(folder):
        done = judgelab("runs", "list", db=folder / "new.db")
    assert done.returncode == 1
    assert f"cannot create the database at {folder / 'new.db'}: the folder {folder} is not writable" in done.stderr
    assert "damaged" not in done.stderr and "Traceback" not in done.stderr


def test_the_store_opens_read_only_in_process(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    with read_only(path.parent):
        store = Store(f"sqlite:///{path}")
        try:
            assert store.read_only is not None and str(path.parent) in store.read_only
            assert [r.id for r in store.list_runs()] == [run_id] and len(store.calls(run_id)) == 1
            for write in (
                lambda: store.create_run("models.check", {}),
                lambda: store.rename_run(run_id, "new name"),
                lambda: store.set_tags(run_id, ["x"]),
                lambda: store.delete_run(run_id),
            ):
                with pytest.raises(StoreError, match="is not writable: SQLite needs to make its journal files"):
                    write()
        finally:
            store.dispose()
    assert Store(f"sqlite:///{path}").read_only is None  # writable again: an ordinary store


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_damaged_file_in_a_read_only_folder_is_still_called_damaged(recorded: tuple[Path, str]) -> None:
    path, _ = recorded
    size = path.stat().st_size
    with path.open("r+b") as fh:  # garbage over every page but the first (the header stays valid)
        fh.seek(4096)
        fh.write(bytes(range(256)) * ((size - 4096) // 256 + 1))
    with read_only(path.parent):
        done = judgelab("runs", "list", db=path)
    assert done.returncode == 1 and "the file is damaged" in done.stderr, done.stderr
