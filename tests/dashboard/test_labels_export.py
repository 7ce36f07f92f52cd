"""Exports are data, not terminal text (issue 35, point 6): `labels export` in JSONL and CSV, to a file and to
stdout, holds the exact bytes `labels import` reads back — with hostile text in every field (CR, LF and CR LF
inside a note, U+2028, bidi overrides, formula-like cells, leading apostrophes, emoji, Japanese, 2000-character
notes, quotes and commas, escape sequences). A property test round-trips random labels through the engine's
writer and reader; the real `judgelab` process is checked byte for byte, piped and redirected, under a time and
memory bound. `-o` to a place that cannot hold a file is a one-line error (issue 35, point 7)."""

from __future__ import annotations

import json
import os
import pty
import re
import resource
import shutil
import subprocess
import sys
import termios
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.labels import add_label, export_labels, list_labels, parse_labels
from engine.labelstore import MAX_NOTE, Label, label_specs
from engine.store import Store
from tests.dashboard.rendered import rerun_until, run_ended

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
TIME_LIMIT_S = 60
MEMORY_LIMIT = 3 * 1024**3  # address space of one command: far above what a few labels need

HOSTILE_NOTES = [
    "line one\r\nline two",
    "bare\rcarriage",
    "bare\nnewline",
    "\r\n",
    "ends with CR LF\r\n",
    "para\u2028sep\u2029end",
    "\u202egnp.exe\u202c \u2066isolate\u2069",
    "=cmd|' /C calc'!A0",
    "+SUM(A1)",
    "-1+1",
    "@SUM(1)",
    "'leading apostrophe",
    "''two apostrophes",
    "emoji 😀👍🏽 ok",
    "日本語のメモ、テスト。",
    'quotes "inside", and, commas',
    '"',
    ",",
    "tab\there",
    "\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f",
    "\x85next line\x0bvertical\x0cform\x1cfs",
    "\ufeffbyte order mark first",
    "x" * MAX_NOTE,
    "",
    " spaced  ",
]


def _hostile_labels(store: Store) -> None:
    for i, note in enumerate(HOSTILE_NOTES):
        add_label(
            store,
            mechanism="handraise" if i % 2 else "jury",
            run_id=None if i % 3 else f"run-{i}",
            item_key=f'=t{i}/\u202ecoder, "x"\r\nnext' if i % 4 == 0 else f"t{i}/coder",
            label=("speak", "skip")[i % 2] if i % 2 else f"'=free {i}\r\n,\"",
            user="日本'ann\u2028" if i % 5 == 0 else "bob",
            note=note,
            context={"note": note, "n": i, "=x": [1.5, None, True], "\r\n": {"😀": "\u202e"}},
        )


def _run(args: list[str], env: dict[str, str], *, stdout: int | object = subprocess.PIPE) -> tuple[int, bytes, str]:
    """A real `judgelab` process under the time and memory bound: (exit code, stdout bytes, stderr)."""

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from dashboard.cli import main; main()", *args],
        cwd=ROOT,
        env=env,
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        timeout=TIME_LIMIT_S,
        preexec_fn=bound,
        check=False,
    )
    assert time.monotonic() - started < TIME_LIMIT_S
    return done.returncode, done.stdout or b"", done.stderr.decode("utf-8", "replace")


@pytest.mark.server  # judgelab processes
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_the_real_stdout_is_the_file_and_imports_back(tmp_path: Path, fmt: str) -> None:
    first = f"sqlite:///{tmp_path / 'first.db'}"
    _hostile_labels(Store(first))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": first}
    code, piped, err = _run(["labels", "export", "--format", fmt], env)
    assert code == 0, err
    redirected = tmp_path / f"redirected.{fmt}"
    with redirected.open("wb") as fh:
        code, _, err = _run(["labels", "export", "--format", fmt], env, stdout=fh)
    assert code == 0, err
    written = tmp_path / f"written.{fmt}"
    code, out, err = _run(["labels", "export", "--format", fmt, "-o", str(written)], env)
    assert code == 0 and out == b"" and err.strip() == f"{len(HOSTILE_NOTES)} label(s) written to {written}", err
    assert piped == redirected.read_bytes() == written.read_bytes()
    # No terminal escaping in the data: a bidi override and DEL go out as they are (JSON escapes only C0 itself).
    assert "\u202e".encode() in piped and b"\x7f" in piped
    assert b"\\u000d" not in piped and b"\\u202e" not in piped and b"\\u007f" not in piped
    if fmt == "csv":
        assert piped.count(b"\r\n") >= len(HOSTILE_NOTES) + 1 and b"'=cmd|" in piped and b"\x1b]0;" in piped
    # What stdout held imports into another database and exports again to the same bytes.
    second = {**env, "JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'second.db'}"}
    code, out, err = _run(["labels", "import", str(redirected), "--format", fmt, "--json"], second)
    assert code == 0, err
    assert json.loads(out) == {"imported": len(HOSTILE_NOTES), "already_present": 0, "rows": len(HOSTILE_NOTES)}
    code, again, err = _run(["labels", "export", "--format", fmt], second)
    assert code == 0 and again == piped, err


@pytest.mark.server  # a judgelab process
def test_on_a_terminal_the_export_is_shown_not_acted_on(tmp_path: Path) -> None:
    """The same command with stdout on a terminal (a pty): nothing a terminal could act on reaches it."""
    url = f"sqlite:///{tmp_path / 'first.db'}"
    _hostile_labels(Store(url))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url, "TERM": "dumb"}
    leader, follower = pty.openpty()
    try:
        termios_attrs = termios.tcgetattr(follower)
        termios_attrs[1] &= ~termios.OPOST  # the pty itself adds no CR before LF
        termios.tcsetattr(follower, termios.TCSANOW, termios_attrs)
        code, _, err = _run(["labels", "export", "--format", "csv"], env, stdout=follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the writer is gone and everything was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert code == 0, err
    text = shown.decode("utf-8").removesuffix("\x1b[0m")  # the reset click adds to styled output
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), text[:200]
    assert "\\u001b]0;pwned\\u0007" in text and "bare\\u000dcarriage" in text


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_hostile_label_round_trips_in_process(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    _hostile_labels(store)
    before = [lab.to_json() for lab in list_labels(store, latest=False)]
    done = runner.invoke(app, ["labels", "export", "--format", fmt])
    assert done.exit_code == 0, done.output
    assert done.stdout_bytes == export_labels(list_labels(store, latest=False), fmt).encode()  # type: ignore[arg-type]
    path = tmp_path / f"from-stdout.{fmt}"
    path.write_bytes(done.stdout_bytes)
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'other.db'}")
    done = runner.invoke(app, ["labels", "import", str(path)])
    assert done.exit_code == 0, done.output
    assert [lab.to_json() for lab in list_labels(Store(), latest=False)] == before
    notes = sorted(row["note"] for row in before)
    assert notes == sorted(HOSTILE_NOTES)  # stored as given, so the round trip above is not vacuous


def _upload(name: str, data: bytes) -> None:
    import streamlit

    from pages.labels import handle_import, render_import

    if not streamlit.session_state.get("uploaded"):  # once: the page then watches its import run
        streamlit.session_state["uploaded"] = True
        handle_import(name, data)
    render_import()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_the_cli_stdout_imports_on_the_labels_page(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `labels export` printed, uploaded on the Labels page: every hostile label comes back as it was,
    no traceback; and the page's own download holds the same bytes as the CLI's file."""
    store = Store()
    _hostile_labels(store)
    before = [lab.to_json() for lab in list_labels(store, latest=False)]
    done = runner.invoke(app, ["labels", "export", "--format", fmt])
    assert done.exit_code == 0, done.output
    page_download = export_labels(list_labels(store, latest=False), fmt)  # type: ignore[arg-type]
    assert page_download.encode() == done.stdout_bytes
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'page.db'}")
    started = time.monotonic()
    at = AppTest.from_function(_upload, args=(f"labels.{fmt}", done.stdout_bytes), default_timeout=60).run()
    run_id = at.query_params["import"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    rerun_until(at, lambda: run_ended(run_id), what="the import never ended")  # the page watches its import run
    at.run()
    assert time.monotonic() - started < TIME_LIMIT_S
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [s.value for s in at.success] == [f"labels\\.{fmt}: {len(before):,} imported, 0 already present."]
    assert [lab.to_json() for lab in list_labels(Store(), latest=False)] == before


# -- the property: any valid label goes out and comes back the same ------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=60)
_NAME = _TEXT.map(str.strip).filter(bool)
_MECHANISM = st.sampled_from(sorted(label_specs()))


@st.composite
def _labels(draw: st.DrawFn) -> Label:
    mechanism = draw(_MECHANISM)
    values = label_specs()[mechanism].values
    label = draw(st.sampled_from(values) if values else _NAME.filter(lambda t: len(t) <= 64))
    scalar = st.none() | st.booleans() | st.integers(-(10**9), 10**9) | _TEXT
    return Label(
        id=0,
        mechanism=mechanism,
        run_id=draw(st.none() | _NAME.filter(lambda t: len(t) <= 64)),
        item_key=draw(_NAME),
        label=label,
        note=draw(_TEXT | st.sampled_from(HOSTILE_NOTES)),
        user=draw(_NAME),
        source=draw(st.sampled_from(("approval", "override", "manual", "import"))),
        created_at=draw(st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC))),
        context=draw(st.dictionaries(_TEXT, scalar | st.lists(scalar, max_size=3), max_size=4)),
    )


@settings(max_examples=150, deadline=None)
@given(labels=st.lists(_labels(), min_size=1, max_size=6), fmt=st.sampled_from(("jsonl", "csv")))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_export_then_parse_is_the_identity(labels: list[Label], fmt: str) -> None:
    text = export_labels(labels, fmt)  # type: ignore[arg-type]
    rows = parse_labels(text, fmt)  # type: ignore[arg-type]
    assert len(rows) == len(labels)
    for lab, row in zip(labels, rows, strict=True):
        assert (row.mechanism, row.run_id, row.item_key, row.label, row.note, row.user_name, row.source) == (
            lab.mechanism,
            lab.run_id,
            lab.item_key,
            lab.label,
            lab.note,
            lab.user,
            lab.source,
        )
        assert row.created_at == lab.created_at and json.loads(row.context_json) == lab.context


# -- `-o` to a place that cannot hold the file: one line, exit 1, nothing half-written --------------------------------


def _one_line_error(args: list[str], expected: str) -> None:
    started = time.monotonic()
    done = runner.invoke(app, args)
    assert time.monotonic() - started < TIME_LIMIT_S
    assert done.exit_code == 1, done.output
    assert done.output == f"error: {expected}\n"


def test_bad_output_paths_are_one_line_errors(tmp_path: Path) -> None:
    _hostile_labels(Store())
    _one_line_error(["labels", "export", "-o", str(tmp_path)], f"--output {tmp_path}: is a folder, not a file")
    missing = tmp_path / "no" / "such.jsonl"
    _one_line_error(["labels", "export", "-o", str(missing)], f"--output {missing}: no such folder")
    _one_line_error(["labels", "export", "-o", "/dev/full"], "--output /dev/full: a device, not a regular file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line_error(["labels", "export", "-o", str(fifo)], f"--output {fifo}: a FIFO (named pipe), not a regular file")
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    _hostile_labels(Store())
    folder = tmp_path / "ro"
    folder.mkdir()
    chattr = shutil.which("chattr")
    locked = (
        chattr is not None
        and subprocess.run([chattr, "+i", str(folder)], capture_output=True, check=False).returncode == 0
    )
    if not locked:
        folder.chmod(0o555)
        if os.access(folder, os.W_OK):  # root without CAP_LINUX_IMMUTABLE, or no such flag here
            pytest.skip("no way to make a folder read-only for this user here")
    try:
        target = folder / "labels.csv"
        done = runner.invoke(app, ["labels", "export", "--format", "csv", "-o", str(target)])
        assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
        assert done.output.startswith(f"error: --output {target}: cannot write (")
        assert not target.exists()
    finally:
        if locked:
            subprocess.run([chattr or "chattr", "-i", str(folder)], check=False)
        folder.chmod(0o755)


def test_a_full_disk_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half-way (ENOSPC) leaves the file that was there, whole, and no temporary file."""
    _hostile_labels(Store())
    target = tmp_path / "labels.jsonl"
    target.write_bytes(b"the old export\n")
    real_write = os.write

    def full(fd: int, data: object) -> int:
        if fd > 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "write", full)
    done = runner.invoke(app, ["labels", "export", "-o", str(target)])
    monkeypatch.setattr(os, "write", real_write)
    assert done.exit_code == 1 and done.output == f"error: --output {target}: cannot write (No space left on device)\n"
    assert target.read_bytes() == b"the old export\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_link_is_followed_and_an_existing_mode_kept(tmp_path: Path) -> None:
    _hostile_labels(Store())
    real = tmp_path / "real.jsonl"
    real.write_text("old\n", encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    done = runner.invoke(app, ["labels", "export", "-o", str(link)])
    assert done.exit_code == 0, done.output
    assert link.is_symlink() and real.stat().st_mode & 0o777 == 0o640
    assert real.read_bytes().count(b"\n") == len(HOSTILE_NOTES)


def test_a_name_with_a_newline_is_named_on_one_line_and_a_long_name_is_written(tmp_path: Path) -> None:
    """The place is named on one line whatever its name holds (errors and the success line); a name near the
    file system's limit (255 bytes) that the shell's `>` would write is written too (its temporary file's name
    is kept within the limit)."""
    _hostile_labels(Store())
    missing = tmp_path / "no\nsuch" / "x.jsonl"
    shown = str(missing).replace("\n", "\\u000a")
    _one_line_error(["labels", "export", "-o", str(missing)], f"--output {shown}: no such folder")
    odd = tmp_path / "new\nline\x1b[2J.jsonl"
    done = runner.invoke(app, ["labels", "export", "-o", str(odd)])
    assert done.exit_code == 0 and done.output.count("\n") == 1, done.output
    assert "new\\u000aline\\u001b[2J.jsonl" in done.output and odd.read_bytes().count(b"\n") == len(HOSTILE_NOTES)
    for name in ("a" * 250 + ".csv", "é" * 125 + ".csv"):  # 254 and 254 bytes
        long = tmp_path / name
        done = runner.invoke(app, ["labels", "export", "--format", "csv", "-o", str(long)])
        assert done.exit_code == 0, done.output
        assert long.read_bytes().startswith(b"mechanism,")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    started = time.monotonic()
    done = runner.invoke(app, ["labels", "export", "-o", str(tmp_path / ("b" * 256))])  # beyond the limit: refused
    assert done.exit_code == 1 and done.output.endswith(": cannot write (File name too long)\n")
    assert done.output.count("\n") == 1 and time.monotonic() - started < TIME_LIMIT_S


@pytest.mark.server  # judgelab processes
def test_a_closed_or_full_stdout_is_one_line(tmp_path: Path) -> None:
    """`labels export >&-` (Python then has no sys.stdout) and `> /dev/full`: one line each, exit 1."""
    url = f"sqlite:///{tmp_path / 'first.db'}"
    _hostile_labels(Store(url))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELAB_DATABASE_URL": url}
    started = time.monotonic()
    closed = subprocess.run(
        [sys.executable, "-c", "from dashboard.cli import main; main()", "labels", "export"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        timeout=TIME_LIMIT_S,
        preexec_fn=lambda: os.close(1),
        check=False,
    )
    assert closed.returncode == 1 and closed.stderr.decode() == "error: stdout: closed — give --output FILE\n"
    with open("/dev/full", "wb") as full:
        code, _, err = _run(["labels", "export"], env, stdout=full)
    assert code == 1 and err == "error: stdout: cannot write (No space left on device)\n"
    assert time.monotonic() - started < TIME_LIMIT_S
