"""Hostile demo recordings and catalogs, on the real `judgelab` process and on the page, each under a time bound and
an address-space bound (`resource.setrlimit` in the child): a clear `file:line: field` message, the first 20
problems and a count, nothing loaded, no SQL, never the last-resort "unexpected" line or a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine.store import Store
from tests.fakes.forms import wkey

pytestmark = pytest.mark.server  # real judgelab processes

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
LIMIT_MB = 1024  # address space of each child: generous for a CLI, far below what a list of every problem took
TIMEOUT_S = 60
BAD_LINES = 100_000  # 4.6 MB of run documents with a wrong id type and a null seq

BOUNDED = textwrap.dedent(
    """
    import resource, runpy, sys
    limit = int(sys.argv[1]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.argv = ["judgelab", *sys.argv[2:]]
    runpy.run_module("dashboard.cli", run_name="__main__", alter_sys=True)
    """
)


def bounded_cli(
    *args: str, env: dict[str, str], limit_mb: int = LIMIT_MB
) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, str(limit_mb), *args],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    return done, time.perf_counter() - start


def clean_failure(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "MemoryError" not in done.stderr
    return done.stderr


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}"}


def test_a_recording_of_many_bad_lines_is_refused_quickly_and_in_bounded_memory(
    tmp_path: Path, env: dict[str, str]
) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "runs.jsonl").write_text('{"run": {"id": 1}, "events": [{"seq": null}]}\n' * BAD_LINES)
    done, elapsed = bounded_cli("demo", "load", "--folder", str(folder), env=env)
    stderr = clean_failure(done)
    assert f"{folder / 'runs.jsonl'}:1: field 'run.id': Input should be a valid string" in stderr
    assert f"{folder / 'runs.jsonl'}:1: field 'events[0].seq': Input should be a valid integer" in stderr
    assert stderr.count("runs.jsonl:") == 20  # 20 problems (the header names the file without a line)
    assert "… and " in stderr and len(stderr) < 10_000
    assert elapsed < 30, elapsed
    assert Store(env["JUDGELAB_DATABASE_URL"]).count_runs() == 0


def test_a_null_seq_after_good_runs_loads_nothing_and_shows_no_sql(tmp_path: Path, env: dict[str, str]) -> None:
    lines = (DEMO / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last["events"][0]["seq"] = None
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "runs.jsonl").write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n", encoding="utf-8")
    done, elapsed = bounded_cli("demo", "load", "--folder", str(folder), env=env)
    stderr = clean_failure(done)
    assert f"runs.jsonl:{len(lines)}: field 'events[0].seq'" in stderr
    assert "SQL" not in stderr and "INSERT" not in stderr and elapsed < 30
    assert Store(env["JUDGELAB_DATABASE_URL"]).count_runs() == 0
    done, _ = bounded_cli("demo", "load", "--json", env=env)  # the shipped one still loads whole
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["loaded"]) == len(lines)


CATALOG = """\
models:
  - {id: gemma3-270m, backend: llamacpp, model: bundled, needs_key: false, profile: {name: G}}
panels:
  api:
    - {model: gemma3-270m, role_name: Judge}
"""


@pytest.mark.parametrize(
    "args",
    [
        ("jury", "run", "--case", str(ROOT / "data" / "scenarios" / "jury" / "agent-safety.yaml")),
        ("experiment", "run", "EXPERIMENT"),
    ],
)
def test_a_catalog_without_the_local_panel_names_it_and_the_file(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...]
) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG, encoding="utf-8")
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        f"name: x\nmechanism: jury\ncases: {ROOT / 'data/scenarios/jury/agent-safety.yaml'}\nlimit: 1\n"
        "base: {max_tokens: 16, judge: generate}\nspace:\n  temperature: [0.0]\ncalls: replay\n",
        encoding="utf-8",
    )
    args = tuple(str(experiment) if a == "EXPERIMENT" else a for a in args)
    done, elapsed = bounded_cli(*args, env=env | {"JUDGELAB_CATALOG": str(catalog)})
    stderr = clean_failure(done)
    assert f"{catalog}: field 'panels': unknown panel 'local' — known panels: api" in stderr, stderr
    assert elapsed < 30


def test_a_broken_catalog_names_line_and_field_on_the_cli(tmp_path: Path, env: dict[str, str]) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG + "    - {model: nope, role_name: Other}\n", encoding="utf-8")
    done, _ = bounded_cli("models", "list", env=env | {"JUDGELAB_CATALOG": str(catalog)})
    assert f"{catalog}:6: field 'panels.api[1].model': unknown model 'nope'" in clean_failure(done)


APP = """
import importlib
from dashboard import demo
on = demo.render_switch()
demo.run_page(importlib.import_module("pages.runs").render, "runs", on)
"""
PAGE = textwrap.dedent(
    """
    import json, resource, sys
    limit = int(sys.argv[1]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(sys.argv[2], default_timeout=60).run()
    print(json.dumps({"exception": [str(e.value) for e in at.exception],
                      "sidebar_errors": [e.value for e in at.sidebar.error]}))
    """
)


def test_the_page_shows_a_bounded_message_for_a_hostile_recording(tmp_path: Path, env: dict[str, str]) -> None:
    """Demo mode on with a data folder whose recording has 100 000 bad lines: the sidebar says what is wrong in
    20 problems and a count, the page still renders, nothing is loaded, within the time and address-space bounds."""
    data = tmp_path / "data"
    (data / "demo").mkdir(parents=True)
    shutil.copy(DEMO / "manifest.json", data / "demo" / "manifest.json")
    (data / "demo" / "runs.jsonl").write_text('{"run": {"id": 1}, "events": [{"seq": null}]}\n' * BAD_LINES)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PAGE, "2048", APP],
        cwd=ROOT,
        env=os.environ | env | {"PYTHONPATH": str(ROOT), "JUDGELAB_DEMO": "1", "JUDGELAB_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    page = json.loads(done.stdout.strip().splitlines()[-1])
    assert not page["exception"], page["exception"]
    (message,) = page["sidebar_errors"]
    assert f"{data / 'demo' / 'runs.jsonl'}:1: field 'run.id'" in message
    assert message.count("runs.jsonl:") == 20 and "… and " in message and len(message) < 10_000
    assert elapsed < 90, elapsed
    assert Store(env["JUDGELAB_DATABASE_URL"]).count_runs() == 0


def _jury_page() -> None:
    from pages import jury

    jury.render()


@pytest.mark.parametrize("panels", ["", "panels: {}\n", "panels:\n  api:\n    - {model: gemma3-270m, role_name: J}\n"])
def test_the_jury_page_opens_with_a_catalog_without_the_local_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, panels: str
) -> None:
    from streamlit.testing.v1 import AppTest

    from dashboard import state

    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG.split("panels:")[0] + panels, encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog))
    state.get_catalog.clear()
    try:
        start = time.perf_counter()
        at = AppTest.from_function(_jury_page, default_timeout=60).run()
        assert not at.exception, at.exception
        assert time.perf_counter() - start < 30
        assert at.selectbox(key=wkey(at, "jury.preset")).options == (["api"] if "api" in panels else [])
    finally:
        state.get_catalog.clear()
