"""Hostile inputs (issue 26), each refused with a clear error in bounded time and memory: YAML bombs (aliases,
deep nesting, duplicate keys, numbers Python cannot hold), ranges that would overflow, files that are not
files (/dev/zero, a FIFO with no writer, a 50 MB file), and line-based files of a million bad rows.

Each runs in a real subprocess under `RLIMIT_AS` and a timeout, so a regression (a bomb expanded, a FIFO
waited on) fails here instead of taking a machine down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import forkcli

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3

ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)
EXPERIMENT = "name: x\nmechanism: handraise\ncases: data/benchmarks/handraise.jsonl\n"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def bounded(code: str, *, limit_gb: float = 3.0, timeout: float = 60) -> dict[str, object]:
    """Run `code` (which sets `out`) in a fresh interpreter under an address-space limit; returns `out` with
    `extra_mb` (peak RSS growth during the code) and `seconds`."""
    script = (
        textwrap.dedent(
            f"""
        import json, resource, time
        resource.setrlimit(resource.RLIMIT_AS, ({int(limit_gb * GIB)}, {int(limit_gb * GIB)}))
        import yaml, engine.experiments, engine.director, engine.inputs, models.safe_yaml  # imports out of the figure
        def _hwm():  # peak RSS in KiB (ru_maxrss would keep the forking parent's peak across exec)
            return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
        before = _hwm()
        t0 = time.perf_counter()
        out = {{}}
        """
        )
        + textwrap.dedent(code)
        + textwrap.dedent(
            """
        out["seconds"] = time.perf_counter() - t0
        out["extra_mb"] = (_hwm() - before) / 1024
        print(json.dumps(out))
        """
        )
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def refusal(text: str) -> dict[str, object]:
    return bounded(
        f"""
        from engine.experiments import DefinitionError, parse_definition
        try:
            parse_definition({text!r}, "hostile.yaml")
            out["error"] = None
        except DefinitionError as exc:
            out["error"] = str(exc)
        """
    )


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("alias bomb", EXPERIMENT + ALIAS_BOMB, "hostile.yaml:5: not valid YAML (alias *a is not accepted"),
        ("deep nesting", EXPERIMENT + "base: " + "[" * 5000 + "]" * 5000 + "\n", "hostile.yaml:4: not valid YAML"),
        ("deep mapping", EXPERIMENT + "base:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 80)), "64 levels"),
        ("many values", EXPERIMENT + "base: {x: [" + ",".join(["1"] * 250_000) + "]}\n", "200,000 values"),
        ("duplicate key", EXPERIMENT + "name: y\n", "hostile.yaml:4: not valid YAML (duplicate key 'name' (first"),
        ("huge integer", EXPERIMENT + "seed: " + "9" * 5000 + "\n", "hostile.yaml:4: not valid YAML (cannot read"),
        (
            "overflowing range",
            EXPERIMENT + "space:\n  threshold: {from: 0, to: 1e300, step: 1e-300}\n",
            "hostile.yaml:5: space.threshold: the range expands to too many values (at most 100 000)",
        ),
        (
            "long range",
            EXPERIMENT + "space:\n  threshold: {from: 0, to: 1, step: 1e-9}\n",
            "space.threshold: the range expands to 1000000000 values (at most 100 000)",
        ),
    ],
)
@pytest.mark.server  # a process with a memory limit
def test_a_hostile_definition_is_refused_in_bounded_time_and_memory(name: str, text: str, expected: str) -> None:
    out = refusal(text)
    assert out["error"] is not None and expected in str(out["error"]), (name, out["error"])
    assert float(str(out["seconds"])) < 5, (name, out)  # the target (judgelab bench) is 1 s on 2 cores
    assert float(str(out["extra_mb"])) < 150, (name, out)  # the target is 100 MB


def test_safe_yaml_keeps_the_lines_and_the_plain_documents() -> None:
    from models import safe_yaml

    data, lines = safe_yaml.load_with_lines("a:\n  b: 1\n  c: [x, {d: 2}]\n")
    assert data == {"a": {"b": 1, "c": ["x", {"d": 2}]}}
    assert lines[("a", "c", 1, "d")] == 3 and lines[("a", "b")] == 2
    assert safe_yaml.load("") is None
    with pytest.raises(Exception, match="could not determine a constructor"):
        safe_yaml.load("!!python/object:os.system {}\n")


def judgelab(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forkcli.run(args, {**_env(), **(env or {})}, timeout=timeout)


@pytest.fixture()
def db(tmp_path: Path) -> dict[str, str]:
    return {"JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'h.db'}"}


@pytest.mark.server  # a judgelab process
def test_the_cli_refuses_an_alias_bomb_at_once(tmp_path: Path, db: dict[str, str]) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(EXPERIMENT + ALIAS_BOMB)
    started = time.monotonic()
    done = judgelab("experiment", "run", str(bomb), env=db)
    assert done.returncode != 0 and "bomb.yaml:5:" in done.stderr and "alias *a" in done.stderr, done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "50 MB", "directory"])
@pytest.mark.server  # a judgelab process
def test_an_experiment_file_that_is_not_a_small_regular_file_is_refused_without_reading_it(
    kind: str, tmp_path: Path, db: dict[str, str]
) -> None:
    if kind == "/dev/zero":
        path, expected = Path("/dev/zero"), "/dev/zero: a device, not a regular file"
    elif kind == "fifo":
        path, expected = tmp_path / "pipe.yaml", "pipe.yaml: a FIFO (named pipe), not a regular file"
        os.mkfifo(path)  # no writer: a blocking open would wait forever
    elif kind == "50 MB":
        path, expected = tmp_path / "big.yaml", "big.yaml: 50.0 MB is above the input limit of 10 MB"
        with path.open("wb") as fh:
            fh.truncate(50 * 1024 * 1024)
    else:
        path, expected = tmp_path, "is a directory, not a file"
    done = judgelab("experiment", "run", str(path), env=db, timeout=30)
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    assert "unexpected" not in done.stderr


def test_the_checked_reader_and_its_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.config import ConfigError
    from models.catalog import CatalogError, load_catalog
    from models.files import InputError, read_text
    from models.secrets import find_secret

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a FIFO"):
        read_text(fifo)
    with pytest.raises(InputError, match="small: 0.0 MB is above the input limit"):
        (tmp_path / "small").write_text("x" * 2000)
        read_text(tmp_path / "small", limit=1048)
    # the secrets file replaced by a FIFO: no hang, the key is simply missing
    monkeypatch.setenv("JUDGELAB_SECRETS", str(fifo))
    monkeypatch.delenv("SOME_API_KEY", raising=False)
    assert find_secret("SOME_API_KEY") is None
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('SOME_API_KEY = "abcdefgh12345678"\n')
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets))
    assert find_secret("SOME_API_KEY") == "abcdefgh12345678"
    # a catalog with an alias, or a duplicate id key, is refused with its line
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("models: &m []\nother: *m\n")
    with pytest.raises(CatalogError, match="alias"):
        load_catalog(catalog)
    catalog.write_text("models: []\nmodels: []\n")
    with pytest.raises(CatalogError, match="duplicate key 'models'"):
        load_catalog(catalog)
    # a character (engine.config.load_yaml) too
    from engine.config import load_yaml
    from engine.director.config import CharacterProfile

    character = tmp_path / "c.yaml"
    character.write_text("name: A\nname: B\n")
    with pytest.raises(ConfigError, match="line 2"):
        load_yaml(character, CharacterProfile)


@pytest.mark.server  # a process with a memory limit
def test_a_million_bad_rows_keep_a_bounded_list_of_problems() -> None:
    out = bounded(
        """
        from engine.director.scripts import ScriptError, parse_script
        from engine.inputs import MAX_PROBLEMS_SHOWN, shown_problems
        text = "not json\\n" * 1_000_000
        try:
            parse_script(text, "jsonl", "bad.jsonl")
        except ScriptError as exc:
            out["kept"], out["total"] = len(exc.problems), exc.problems.total
            out["shown"] = shown_problems(exc.problems)
            out["message_lines"] = len(str(exc).splitlines())
        """,
        timeout=120,
    )
    assert out["total"] == 1_000_000 and int(str(out["kept"])) <= 200
    shown = list(out["shown"])  # type: ignore[call-overload]
    assert len(shown) == 21 and shown[0] == "bad.jsonl:1: not JSON (Expecting value)"
    assert shown[-1] == "… and 999,980 more"
    assert out["message_lines"] == 22  # the header, 20 problems and the count
    assert float(str(out["extra_mb"])) < 300


def test_a_long_parse_stops_when_its_run_is_cancelled() -> None:
    from engine.director.scripts import parse_script
    from engine.runctx import RunCancelled, RunControl, controlled

    ctrl = RunControl()
    ctrl.cancel()
    with controlled(ctrl), pytest.raises(RunCancelled):
        parse_script('{"text": "hi"}\n' * 100_000, "jsonl", "s.jsonl")


@pytest.mark.server  # a process with a memory limit
def test_script_memory_per_line_is_compact() -> None:
    out = bounded(
        """
        from engine.director.scripts import parse_script
        lines = parse_script('{"text": "hey"}\\n' * 200_000, "jsonl", "s.jsonl")
        out["n"] = len(lines)
        """
    )
    assert out["n"] == 200_000
    assert float(str(out["extra_mb"])) < 120, out  # ~70 MB measured: the text, the lines and compact rows


@pytest.mark.server  # a judgelab process
def test_sigterm_during_a_long_batch_ends_it_within_seconds(tmp_path: Path, db: dict[str, str]) -> None:
    script = tmp_path / "long.jsonl"
    script.write_text('{"text": "hey"}\n' * 200_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.cli", "director", "batch", "--character", "yana", "--file", str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**_env(), **db},
    )
    try:
        db_path = Path(db["JUDGELAB_DATABASE_URL"].removeprefix("sqlite:///"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not db_path.exists():
            time.sleep(0.2)
        time.sleep(3)  # well into the batch (about 1 ms a line)
        assert proc.poll() is None, "the batch ended before the signal"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 143, stderr
    assert took < 10, took  # the target is 2 s (judgelab bench): generous for a loaded machine, far below 480 s
