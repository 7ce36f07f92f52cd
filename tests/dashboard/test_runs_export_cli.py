"""`judgelab runs export` in every format (a zip of every table, one table, JSON, the HTML report, stdout) with
its errors, and `judgelab runs list` with the Runs page's filters on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlmodel import col
from typer.testing import CliRunner

from dashboard.cli import app
from engine.events import run_context
from engine.store import Run, Store
from models.recording import CallRecord
from tests import forkcli
from tests.fakes.runs import FORMULAS, stored_jury

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def judgelab(url: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url}
    return forkcli.run(args, env, cwd=cwd, timeout=300)


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def jury_run() -> str:
    store = Store()
    run_id, _ = stored_jury(store, name="exported jury")
    store.dispose()
    return run_id


def test_export_csv_zip_and_one_table(jury_run: str, tmp_path: Path) -> None:
    target = tmp_path / "out.zip"
    code, out = invoke("runs", "export", jury_run, "--format", "csv", "--output", str(target))
    assert code == 0, out
    assert f"wrote {target}" in out
    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == ["calls.csv", "events.csv", "headline.csv", "jury_positions.csv"]
        positions = list(csv.DictReader(io.StringIO(archive.read("jury_positions.csv").decode("utf-8-sig"))))
    assert len(positions) == 6 and positions[0]["text"] == "'" + FORMULAS[0]
    one = tmp_path / "positions.csv"
    code, out = invoke("runs", "export", jury_run, "--format", "csv", "--table", "jury_positions", "-o", str(one))
    assert code == 0, out
    assert list(csv.DictReader(io.StringIO(one.read_text(encoding="utf-8-sig")))) == positions
    code, out = invoke("runs", "export", jury_run, "-f", "csv", "--table", "calls", "-o", "-")
    assert code == 0 and out.startswith("call_id,created_at,purpose,model_id")
    assert len(list(csv.DictReader(io.StringIO(out, newline="")))) == 6


def test_export_json_and_html(jury_run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = invoke("runs", "export", jury_run, "--format", "json", "-o", "-")
    assert code == 0, out
    document = json.loads(out)
    assert document["run"]["id"] == jury_run and document["run"]["name"] == "exported jury"
    assert len(document["calls"]) == 6 and document["events"][0]["type"] == "run_started"
    monkeypatch.chdir(tmp_path)  # the default file name lands in the current folder
    code, out = invoke("runs", "export", jury_run, "--format", "html")
    assert code == 0, out
    report = (tmp_path / f"{jury_run}.html").read_text(encoding="utf-8")
    assert report.startswith("<!DOCTYPE html>") and "Score trajectory per juror" in report
    assert "Content-Security-Policy" in report and "jury_positions" in report


def test_export_errors(jury_run: str, tmp_path: Path) -> None:
    code, out = invoke("runs", "export", "nope", "--format", "json", "-o", str(tmp_path / "x.json"))
    assert code == 1 and "no run nope" in out and not (tmp_path / "x.json").exists()
    code, out = invoke("runs", "export", jury_run, "--format", "xml")
    assert code == 1 and "--format must be csv, json or html" in out
    code, out = invoke("runs", "export", jury_run, "--format", "json", "--table", "calls")
    assert code == 1 and "--table goes with --format csv" in out
    code, out = invoke("runs", "export", jury_run, "--format", "csv", "--table", "nope", "-o", "-")
    assert code == 1 and "has no table 'nope' — it has: headline, calls, events, jury_positions" in out
    code, out = invoke("runs", "export", jury_run, "--format", "csv", "-o", "-")
    assert code == 1 and "give --table NAME" in out
    code, out = invoke("runs", "export", jury_run, "-o", str(tmp_path / "missing" / "x.json"))
    assert code == 1 and out.strip() == f"error: --output {tmp_path / 'missing' / 'x.json'}: no such folder"
    code, out = invoke("runs", "export", jury_run, "-o", str(tmp_path))
    assert code == 1 and out.strip() == f"error: --output {tmp_path}: is a folder, not a file"
    code, out = invoke("runs", "export", jury_run, "-o", "/dev/full")
    assert code == 1 and out.strip() == "error: --output /dev/full: a device, not a regular file"


@pytest.mark.server  # a real judgelab process
def test_export_as_a_process_redacts_a_key_known_only_now(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    key = "sk-cli-export-Aa1Bb2Cc3Dd4"
    store = Store(url)
    with run_context(store, "models.check", {"model_id": "echo"}) as run:
        store.record_call(
            CallRecord(
                run_id=run.run_id,
                model_id="echo",
                backend="openai",
                request_hash="h",
                request={"messages": [{"role": "user", "content": key}]},
                raw_text=key,
                error=f"401: bad key {key}",
                error_type="AuthError",
            )
        )
    store.dispose()
    env_key = {"MY_LATE_API_KEY": key}
    for fmt in ("json", "html", "csv"):
        target = tmp_path / f"out.{fmt}"
        done = subprocess.run(
            [sys.executable, "-m", "dashboard.cli", "runs", "export", run.run_id, "--format", fmt, "-o", str(target)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **env_key, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url},
        )
        assert done.returncode == 0, done.stderr
        data = target.read_bytes()
        if fmt == "csv":  # the zip is compressed: look inside
            with zipfile.ZipFile(target) as archive:
                data = b"".join(archive.read(name) for name in archive.namelist())
        assert key.encode() not in data
        # The call's error (and its prompt and reply, where shown) say which key it was.
        assert {
            "json": b'"<MY_LATE_API_KEY>"',
            "html": b"bad key &lt;MY_LATE_API_KEY&gt;",
            "csv": b"bad key <MY_LATE_API_KEY>",
        }[fmt] in data


@pytest.mark.server  # real judgelab processes
def test_runs_list_filters(db_url: str) -> None:
    store = Store(db_url)
    with run_context(store, "jury.run", {"case": {"title": "Password leak"}}, name="night") as a:
        store.record_call(
            CallRecord(
                run_id=a.run_id, model_id="gemma3-270m", backend="llamacpp", request_hash="h", request={"messages": []}
            )
        )
    with run_context(store, "director.check", {"text": "えー、ほんと？"}) as b:
        pass
    store.set_tags(b.run_id, ["keep"])
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == a.run_id).values(started_at=datetime(2024, 5, 1, 12, tzinfo=UTC)))
    store.dispose()

    def listed(*args: str) -> list[str]:
        done = judgelab(db_url, "runs", "list", "--json", *args)
        assert done.returncode == 0, done.stderr
        return [r["id"] for r in json.loads(done.stdout)]

    assert listed() == [b.run_id, a.run_id]
    assert listed("--search", "password NIGHT") == [a.run_id]
    assert listed("--search", "ほんと", "--tag", "keep") == [b.run_id]
    assert listed("--model", "gemma3-270m") == [a.run_id]
    assert listed("--since", "2024-05-01", "--until", "2024-05-01") == [a.run_id]
    assert listed("--since", "2024-05-02") == [b.run_id]
    assert listed("--status", "finished", "--kind", "director") == [b.run_id]
    assert listed("--limit", "1", "--offset", "1") == [a.run_id]
    done = judgelab(db_url, "runs", "list", "--status", "done")
    assert done.returncode == 1 and "unknown status done" in done.stderr
    done = judgelab(db_url, "runs", "list", "--since", "yesterday")
    assert done.returncode == 1 and "--since 'yesterday' is not a date" in done.stderr
    done = judgelab(db_url, "runs", "list", "--search", "nothing-like-this")
    assert done.returncode == 0 and "no runs match" in done.stdout
    text = judgelab(db_url, "runs", "list", "--tag", "keep")
    assert b.run_id in text.stdout and "[keep]" in text.stdout
