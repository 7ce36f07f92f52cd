"""CSV injection (OWASP): every cell a spreadsheet could run as a formula gets a leading apostrophe, through
both exports — a run's tables (`engine.exports`) and an experiment's (`engine.experiments.report.to_csv`),
which share one writer. Hostile cells hide the formula behind whitespace and invisible characters or write
it in full width; the file is read back with the csv module, as a spreadsheet would split it."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.events import run_context
from engine.experiments.report import to_csv
from engine.exports import csv_cell, is_formula, load_run, table_csv
from engine.store import Store

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = [
    '=HYPERLINK("http://127.0.0.1:9/x","click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1,2)",
    "\t=1+1",
    "\r=1+1",
    "\t",  # a tab or CR first is neutralised whatever follows
    "\rplain",
    "\n=1+1",
    " =1+1",
    "   @SUM(1)",
    "\u00a0=1+1",  # no-break space
    "\u3000=1+1",  # ideographic space
    "\u200b=1+1",  # zero-width space
    "\u200c\u200d=1+1",  # zero-width non-joiner, joiner
    "\u2060=1+1",  # word joiner
    "\ufeff=1+1",  # byte order mark
    "\u202e=1+1",  # right-to-left override
    " \u00a0\u200b\ufeff\t=1+1",
    "＝1+1",  # full-width = + - @
    "＋1",
    "－1",
    "＠SUM(1)",
    "\u3000＝1+1",
    "﹦1+1",  # small equals sign
    "-1",  # text that looks like a number is text: it too gets its apostrophe
]
HARMLESS = ["plain text", "a=b", "1+1", "café = good", "\u00a0plain", "日本語の台詞", ""]


def test_the_rule_itself() -> None:
    for text in HOSTILE:
        assert is_formula(text), repr(text)
        assert csv_cell(text) == "'" + text
    for text in HARMLESS:
        assert not is_formula(text), repr(text)
        assert csv_cell(text) == text
    assert csv_cell(-3) == -3 and csv_cell(-0.5) == -0.5  # numbers stay numbers


def _read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _assert_neutralised(rows: list[dict[str, str]], column: str) -> None:
    got = [r[column] for r in rows]
    assert got == ["'" + t for t in HOSTILE] + HARMLESS


def test_a_runs_table(store: Store) -> None:
    with run_context(store, "skip.simulate", {"judge": "scripted"}) as run:
        for text in [*HOSTILE, *HARMLESS]:
            run.emit("judgment", reason=text, confidence=-0.5)
    record = load_run(store, run.run_id)
    rows = _read(table_csv(record, "simulation_events").decode("utf-8-sig"))
    _assert_neutralised(rows, "reason")
    assert {r["confidence"] for r in rows} == {"-0.5"}  # a number: no apostrophe


def test_an_experiments_table() -> None:
    rows = [{"cell": i, "label": text, "f1": -0.25} for i, text in enumerate([*HOSTILE, *HARMLESS])]
    read = _read(to_csv(rows))
    _assert_neutralised(read, "label")
    assert {r["f1"] for r in read} == {"-0.25"} and read[3]["cell"] == "3"


def test_a_header_made_of_hostile_text_is_neutralised_too() -> None:
    header = next(csv.reader(io.StringIO(to_csv([{"=cmd": 1, "\u200b@x": 2}]), newline="")))
    assert header == ["'=cmd", "'\u200b@x"]


@pytest.mark.server  # a process with a memory limit
def test_a_large_hostile_table_is_bounded(tmp_path: Path) -> None:
    """50 000 hostile cells through the experiment writer, in a process limited to 1 GiB of address space
    and 60 s: the rule is linear (it stops at the first visible character)."""
    size = 50_000
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))
        def _hwm():  # peak RSS in KiB (ru_maxrss would keep the forking parent's peak across exec)
            return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
        from engine.experiments.report import to_csv
        cell = "\\u200b" * 50 + "＝1+1" + "x" * 20
        text = to_csv([{{"cell": i, "label": cell}} for i in range({size})])
        assert text.count("'\\u200b") == {size}, text[:200]
        print(_hwm())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 't.db'}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) < 1024 * 1024  # peak RSS in KiB: under 1 GiB
