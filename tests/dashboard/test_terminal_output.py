"""Terminal-safe output (issue 26, point 8): model, case and file text that the CLI prints never reaches the
terminal as control or escape sequences — an OSC 0 title change, an OSC 52 clipboard write, a CSI that
moves the cursor, a C1 control, a bidi override. They are printed as visible `\\u001b` escapes, in pretty
output and in `--json` (which stays valid JSON with the same values)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from dashboard.commands import terminal_safe
from engine.events import run_context
from engine.store import Store
from models.recording import CallRecord

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsfHNo\x07"
CSI_CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
HOSTILE = f"{OSC_TITLE}{OSC_CLIPBOARD}{CSI_CLEAR}{C1_CSI}\rover\x08\x7f\u202egnp.exe\x00end"
# What a terminal would act on: everything but newline and tab below 0x20, DEL, C1, the bidi controls.
BOM = b"\xef\xbb\xbf"
LIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_the_helper() -> None:
    assert terminal_safe(OSC_TITLE) == "\\u001b]0;pwned\\u0007"
    assert terminal_safe("a\tb\nc") == "a\tb\nc"  # layout stays
    assert terminal_safe("\x9b\u202e\r") == "\\u009b\\u202e\\u000d"
    assert not LIVE.search(terminal_safe(HOSTILE))
    document = json.dumps({"text": HOSTILE, "日本": "語"}, ensure_ascii=False)  # json escapes C0, not C1
    assert json.loads(terminal_safe(document)) == {"text": HOSTILE, "日本": "語"}


def _hostile_run(store: Store) -> str:
    with run_context(store, "models.check", {"model_id": HOSTILE}, name=HOSTILE) as run:
        store.record_call(
            CallRecord(
                run_id=run.run_id,
                model_id=HOSTILE,
                backend="openai",
                request_hash="h",
                request={"messages": [{"role": "user", "content": HOSTILE}]},
                raw_text=HOSTILE,
                parsed={"reason": HOSTILE},
                error=HOSTILE,
                error_type="ServerError",
                purpose=HOSTILE,
            )
        )
        run.emit(HOSTILE, text=HOSTILE)
        run.summary = {"text": HOSTILE}
    return run.run_id


def _clean(output: str, *, shown: bool = True) -> None:
    assert not LIVE.search(output), repr(LIVE.findall(output)[:5])
    assert not shown or "\\u001b]0;pwned\\u0007" in output  # shown, not dropped


def test_every_runs_command_pretty_and_json() -> None:
    store = Store()  # the test's database (JUDGELAB_DATABASE_URL)
    run_id = _hostile_run(store)
    store.rename_run(run_id, HOSTILE)
    pretty = [("runs", "list"), ("runs", "show", run_id)]
    for args in pretty:
        done = runner.invoke(app, list(args))
        assert done.exit_code == 0, done.output
        _clean(done.output, shown=args[1] != "list")  # the list shows no name or text
    for args in (("runs", "list", "--json"), ("runs", "show", run_id, "--json")):
        done = runner.invoke(app, list(args))
        assert done.exit_code == 0, done.output
        _clean(done.output)
        parsed = json.loads(done.stdout)
        assert (parsed[0] if isinstance(parsed, list) else parsed)["name"] == HOSTILE  # the same value
    done = runner.invoke(app, ["runs", "export", run_id, "--format", "json", "--output", "-"])
    assert json.loads(done.stdout)["calls"][0]["raw_text"] == HOSTILE


def test_an_export_to_stdout_is_the_file_not_terminal_text(tmp_path: Path) -> None:
    """Issue 35, point 6: `--output -` piped or redirected is data — the very bytes `--output FILE` writes (a CSV
    without its byte order mark), control characters and all; only a terminal is shown them as escapes."""
    run_id = _hostile_run(Store())
    for fmt, table in (("csv", "calls"), ("json", None), ("html", None)):
        extra = ["--table", table] if table else []
        target = tmp_path / f"x.{fmt}"
        assert runner.invoke(app, ["runs", "export", run_id, "-f", fmt, *extra, "-o", str(target)]).exit_code == 0
        done = runner.invoke(app, ["runs", "export", run_id, "-f", fmt, *extra, "-o", "-"])
        assert done.exit_code == 0, done.output
        # the moment of the export, the one thing that differs between two (to the second: on a busy machine the
        # two cross one): the JSON's field, the HTML report's "Exported by judgelab on …" line
        moment = re.compile(rb'"exported_at": "[^"]*"|Exported by judgelab on \S+')
        assert moment.sub(b"", done.stdout_bytes) == moment.sub(b"", target.read_bytes().removeprefix(BOM)), fmt
        assert LIVE.search(done.stdout), fmt  # not escaped: the hostile text is in it as it was stored


def test_model_and_case_text_of_a_command() -> None:
    done = runner.invoke(app, ["director", "check", "--rules-only", "--character", "ayu", HOSTILE])
    assert done.exit_code == 0, done.output
    _clean(done.output)
    done = runner.invoke(app, ["director", "check", "--rules-only", "--character", "ayu", "--json", HOSTILE])
    _clean(done.output)
    assert json.loads(done.stdout)["normalized"]


def test_an_error_naming_a_hostile_file(tmp_path: Path) -> None:
    missing = tmp_path / f"{OSC_TITLE}.jsonl"
    done = runner.invoke(app, ["director", "batch", "--character", "yana", "--file", str(missing)])
    assert done.exit_code != 0
    _clean(done.output)


def _calls(node: ast.AST, where: str = "<module>") -> Iterator[tuple[ast.Call, str]]:
    """Every call under `node`, with the name of the function it is in."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Call):
            yield child, where
        inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
        yield from _calls(child, inner)


def test_no_command_prints_around_the_helper() -> None:
    """Every print of the CLI goes through `say` (or `fail`, which uses it), and every data stream through
    `say_data` (exact bytes when piped, `say` on a terminal): no typer.echo, secho, click.echo, print or a
    direct stream write anywhere else in dashboard/cli.py and dashboard/commands/."""
    files = [ROOT / "dashboard" / "cli.py", *sorted((ROOT / "dashboard" / "commands").glob("*.py"))]
    direct = {"echo", "secho", "print", "write"}
    found = []
    for path in files:
        for node, where in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if name in direct and owner in ("", "typer", "click", "sys.stdout", "sys.stderr", "raw", "stream"):
                found.append(f"{path.relative_to(ROOT)}:{where}: {ast.unparse(func)}")
        assert "sys.stdout.buffer" not in path.read_text(encoding="utf-8"), path
    assert sorted(found) == [
        "dashboard/commands/__init__.py:say: typer.secho",
        "dashboard/commands/__init__.py:say_data: raw.write",
        "dashboard/commands/__init__.py:say_data: stream.write",
    ], found


@pytest.mark.server  # a judgelab process
def test_a_megabyte_of_escape_sequences_as_a_process(tmp_path: Path) -> None:
    """A call whose reply is 1 MB of escape sequences, shown by a real `judgelab runs show --json` under a
    60 s timeout and a 3 GiB address-space limit: every one made visible, the JSON still valid."""
    url = f"sqlite:///{tmp_path / 'big.db'}"
    store = Store(url)
    big = (OSC_CLIPBOARD + C1_CSI) * (1024 * 1024 // len(OSC_CLIPBOARD + C1_CSI))
    with run_context(store, "models.check", {"model_id": "m"}) as run:
        store.record_call(
            CallRecord(run_id=run.run_id, model_id="m", backend="openai", request_hash="h", request={}, raw_text=big)
        )
    store.dispose()
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3)); "
    done = subprocess.run(
        [sys.executable, "-c", limit + "from dashboard.cli import main; main()", "runs", "show", run.run_id, "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not LIVE.search(done.stdout) and not LIVE.search(done.stderr)
    assert json.loads(done.stdout)["calls"][0]["raw_text"] == big
