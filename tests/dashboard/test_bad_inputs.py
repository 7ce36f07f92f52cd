"""Every bad input the CLI can be given, tried on the real `judgelab` process: binary, empty, huge, wrong
JSON shapes and types, out-of-range numbers, bad environment values, missing files, directories instead
of files, a damaged database. Each must exit non-zero with a message on stderr that names the file, field
or variable — never a traceback (nor the last-resort "unexpected" line) — and leave the database as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import forkcli

ROOT = Path(__file__).resolve().parents[2]
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8
LIMIT_MB = 10  # the documented default of JUDGELAB_MAX_INPUT_MB


@dataclass(frozen=True)
class Try:
    name: str
    args: tuple[str, ...]
    expected: str  # must appear in stderr: the file, field or variable, and what is wrong
    env: dict[str, str] = field(default_factory=dict)
    code: int | None = None  # a specific exit code, else any non-zero


def _huge(line: str) -> bytes:
    """A file of valid lines just above the default input limit."""
    data = (line + "\n").encode("utf-8")
    return data * (LIMIT_MB * 1024 * 1024 // len(data) + 2)


WORKLOAD_LINE = '{"t": 5, "channel": "C1", "thread": null, "id": "m1", "author": "a", "text": "hi"}'
RECORDING_LINE = '{"state": "s", "should_respond": true, "reason": "r", "confidence": 0.5}'
LABELS_LINE = '{"factors": {"llm_self_confidence": 0.9}, "correct": true}'
SCRIPT_LINE = '{"id": "l1", "character": "yana", "text": "えー、ほんと？"}'
CASE_LINE = '{"id": "c1", "content": "Agent: hello", "gold": "safe_pass"}'
BENCH_LINE = open(ROOT / "data/benchmarks/handraise.jsonl", encoding="utf-8").readline().strip()

FILES: dict[str, bytes] = {
    "binary.jsonl": BINARY,
    "binary.yaml": BINARY,
    "latin1.jsonl": "café;naïve\n".encode("latin-1"),
    "empty.jsonl": b"",
    "empty.csv": b"",
    "array.jsonl": b"[1, 2, 3]\n",
    "recording-array.jsonl": f"[{RECORDING_LINE}]\n".encode(),
    "workload-t-huge.jsonl": b'{"t": 1e15, "channel": "C1", "id": "m1", "text": "hi"}\n',
    "workload-t-negative.jsonl": b'{"t": -5, "channel": "C1", "id": "m1", "text": "hi"}\n',
    "workload-t-text.jsonl": b'{"t": "soon", "channel": "C1", "id": "m1", "text": "hi"}\n',
    "workload-t-nan.jsonl": b'{"t": NaN, "channel": "C1", "id": "m1", "text": "hi"}\n',
    "workload-no-channel.jsonl": b'{"t": 1, "id": "m1", "text": "hi"}\n',
    "recording-confidence.jsonl": RECORDING_LINE.replace("0.5", "5").encode() + b"\n",
    "recording-no-state.jsonl": b'{"should_respond": true, "reason": "r", "confidence": 0.5}\n',
    "labels-types.jsonl": b'{"factors": {"llm_self_confidence": "high"}, "correct": true}\n',
    "labels-correct.jsonl": b'{"factors": {}, "correct": "yes"}\n',
    "script-no-text.jsonl": b'{"id": "x", "character": "yana"}\n',
    "script-no-text.csv": b"id,line\n1,hello\n",
    "script.txt": b"hello\n",
    "cases-types.jsonl": b'{"id": "c1", "content": ["not", "text"]}\n',
    "cases-scalar.yaml": b"just a sentence\n",
    "cases-bad-yaml.yaml": b"id: [unclosed\n",
    "bench-types.jsonl": b'{"id": "x", "context": "not a list"}\n',
    "scenario-list.yaml": b"- a\n- b\n",
    "scenario-bad.yaml": b"context: [unclosed\n",
    "factors-array.json": b"[1, 2]\n",
    "huge-workload.jsonl": _huge(WORKLOAD_LINE),
    "huge-recording.jsonl": _huge(RECORDING_LINE),
    "huge-labels.jsonl": _huge(LABELS_LINE),
    "huge-script.jsonl": _huge(SCRIPT_LINE),
    "huge-cases.jsonl": _huge(CASE_LINE),
    "huge-bench.jsonl": _huge(BENCH_LINE),
    "a-file": b"not a folder\n",
}

GOOD_RECORDING = "data/recordings/skipcache-default.jsonl"
CASES = "data/benchmarks/jury.jsonl"

TRIES = [
    # skip simulate --workload
    Try(
        "workload binary",
        ("skip", "simulate", "--workload", "{binary.jsonl}", "--recorded", GOOD_RECORDING),
        "binary.jsonl: a binary file",
    ),
    Try(
        "workload latin-1",
        ("skip", "simulate", "--workload", "{latin1.jsonl}", "--recorded", GOOD_RECORDING),
        "latin1.jsonl: not UTF-8 text",
    ),
    Try(
        "workload empty",
        ("skip", "simulate", "--workload", "{empty.jsonl}", "--recorded", GOOD_RECORDING),
        "empty.jsonl: no messages",
    ),
    Try(
        "workload huge",
        ("skip", "simulate", "--workload", "{huge-workload.jsonl}", "--recorded", GOOD_RECORDING),
        "huge-workload.jsonl: 10.0 MB is above the input limit of 10 MB",
    ),
    Try(
        "workload array line",
        ("skip", "simulate", "--workload", "{array.jsonl}", "--recorded", GOOD_RECORDING),
        "array.jsonl:1: expected an object",
    ),
    Try(
        "workload t=1e15",
        ("skip", "simulate", "--workload", "{workload-t-huge.jsonl}", "--recorded", GOOD_RECORDING),
        "workload-t-huge.jsonl:1: 't' must be seconds from 0 to",
    ),
    Try(
        "workload t<0",
        ("skip", "simulate", "--workload", "{workload-t-negative.jsonl}", "--recorded", GOOD_RECORDING),
        "workload-t-negative.jsonl:1: 't' must be seconds",
    ),
    Try(
        "workload t text",
        ("skip", "simulate", "--workload", "{workload-t-text.jsonl}", "--recorded", GOOD_RECORDING),
        "workload-t-text.jsonl:1: 't' must be a number of seconds, not 'soon'",
    ),
    Try(
        "workload t NaN",
        ("skip", "simulate", "--workload", "{workload-t-nan.jsonl}", "--recorded", GOOD_RECORDING),
        "workload-t-nan.jsonl:1: 't' must be seconds",
    ),
    Try(
        "workload no channel",
        ("skip", "simulate", "--workload", "{workload-no-channel.jsonl}", "--recorded", GOOD_RECORDING),
        "workload-no-channel.jsonl:1: missing 'channel'",
    ),
    Try(
        "workload missing",
        ("skip", "simulate", "--workload", "{missing.jsonl}", "--recorded", GOOD_RECORDING),
        "missing.jsonl: file not found",
    ),
    Try(
        "workload directory",
        ("skip", "simulate", "--workload", "{dir}", "--recorded", GOOD_RECORDING),
        "is a directory, not a file",
    ),
    Try(
        "workload and generate",
        ("skip", "simulate", "--workload", "{empty.jsonl}", "--generate"),
        "either --workload or --generate",
    ),
    # skip simulate --recorded / --record / generated workloads
    Try(
        "recording JSON array",
        ("skip", "simulate", "--generate", "--recorded", "{recording-array.jsonl}"),
        "recording-array.jsonl:1: Input should be an object",
    ),
    Try(
        "recording confidence 5",
        ("skip", "simulate", "--generate", "--recorded", "{recording-confidence.jsonl}"),
        "recording-confidence.jsonl:1: confidence: Input should be less than or equal to 1",
    ),
    Try(
        "recording no state",
        ("skip", "simulate", "--generate", "--recorded", "{recording-no-state.jsonl}"),
        "recording-no-state.jsonl:1: state: Field required",
    ),
    Try(
        "recording binary",
        ("skip", "simulate", "--generate", "--recorded", "{binary.jsonl}"),
        "binary.jsonl: a binary file",
    ),
    Try(
        "recording empty",
        ("skip", "simulate", "--generate", "--recorded", "{empty.jsonl}"),
        "empty.jsonl: no recorded judgments",
    ),
    Try(
        "recording huge",
        ("skip", "simulate", "--generate", "--recorded", "{huge-recording.jsonl}"),
        "huge-recording.jsonl: 10.0 MB is above the input limit",
    ),
    Try(
        "recording missing",
        ("skip", "simulate", "--generate", "--recorded", "{missing.jsonl}"),
        "missing.jsonl: file not found",
    ),
    Try("recording directory", ("skip", "simulate", "--generate", "--recorded", "{dir}"), "is a directory"),
    Try("record into a directory", ("skip", "simulate", "--generate", "--record", "{dir}"), "--record"),
    Try(
        "generate too many channels",
        ("skip", "simulate", "--generate", "--channels", "100000"),
        "--channels: Input should be less than or equal to 5000",
    ),
    Try(
        "generate too many messages",
        ("skip", "simulate", "--generate", "--rate", "1000"),
        "would generate about 3,600,000 messages; the limit is 50,000",
    ),
    Try("generate hours 1e9", ("skip", "simulate", "--generate", "--hours", "1e9"), "'--hours'", code=2),
    Try("check interval 0", ("skip", "simulate", "--generate", "--check-interval", "0"), "'--check-interval'", code=2),
    Try(
        "mode unknown",
        ("skip", "simulate", "--generate", "--mode", "guess", "--recorded", GOOD_RECORDING),
        "--mode must be",
    ),
    # confidence
    Try("labels binary", ("confidence", "calibrate", "--labels", "{binary.jsonl}"), "binary.jsonl: a binary file"),
    Try("labels latin-1", ("confidence", "calibrate", "--labels", "{latin1.jsonl}"), "latin1.jsonl: not UTF-8"),
    Try("labels empty", ("confidence", "calibrate", "--labels", "{empty.jsonl}"), "empty.jsonl: no labelled items"),
    Try(
        "labels huge",
        ("confidence", "calibrate", "--labels", "{huge-labels.jsonl}"),
        "huge-labels.jsonl: 10.0 MB is above the input limit",
    ),
    Try(
        "labels array line",
        ("confidence", "calibrate", "--labels", "{array.jsonl}"),
        "array.jsonl:1: needs a boolean 'correct'",
    ),
    Try("labels factor type", ("confidence", "calibrate", "--labels", "{labels-types.jsonl}"), "llm_self_confidence"),
    Try(
        "labels correct type",
        ("confidence", "calibrate", "--labels", "{labels-correct.jsonl}"),
        "labels-correct.jsonl:1: needs a boolean 'correct'",
    ),
    Try("labels missing", ("confidence", "calibrate", "--labels", "{missing.jsonl}"), "missing.jsonl: file not found"),
    Try("labels directory", ("confidence", "calibrate", "--labels", "{dir}"), "is a directory"),
    Try("labels bins 1", ("confidence", "calibrate", "--labels", "{empty.jsonl}", "--bins", "1"), "'--bins'", code=2),
    Try(
        "factors type",
        ("confidence", "score", "--factors", '{"llm_self_confidence": "high"}'),
        "--factors: field 'llm_self_confidence'",
    ),
    Try("factors unknown field", ("confidence", "score", "--factors", '{"vibes": 1}'), "field 'vibes'"),
    Try("factors array", ("confidence", "score", "--factors", "[1, 2]"), "--factors: expected a JSON object"),
    Try("factors not JSON", ("confidence", "score", "--factors", "{oops"), "--factors: not valid JSON"),
    Try(
        "factors file array",
        ("confidence", "score", "--factors", "{factors-array.json}"),
        "factors-array.json: expected a JSON object",
    ),
    Try("factors file binary", ("confidence", "score", "--factors", "{binary.jsonl}"), "a binary file"),
    Try("factors directory", ("confidence", "score", "--factors", "{dir}"), "is a directory"),
    # director
    Try(
        "script binary",
        ("director", "batch", "--character", "yana", "--file", "{binary.jsonl}"),
        "binary.jsonl: a binary file",
    ),
    Try(
        "script empty",
        ("director", "batch", "--character", "yana", "--file", "{empty.jsonl}"),
        "empty.jsonl: no utterances",
    ),
    Try(
        "script empty csv",
        ("director", "batch", "--character", "yana", "--file", "{empty.csv}"),
        "empty.csv:1: a CSV script needs a 'text' column",
    ),
    Try(
        "script huge",
        ("director", "batch", "--character", "yana", "--file", "{huge-script.jsonl}"),
        "huge-script.jsonl: 10.0 MB is above the input limit",
    ),
    Try(
        "script array line",
        ("director", "batch", "--character", "yana", "--file", "{array.jsonl}"),
        "array.jsonl:1: expected an object with 'text'",
    ),
    Try(
        "script no text",
        ("director", "batch", "--character", "yana", "--file", "{script-no-text.jsonl}"),
        "script-no-text.jsonl:1: 'text' is missing or empty",
    ),
    Try(
        "script csv no text",
        ("director", "batch", "--character", "yana", "--file", "{script-no-text.csv}"),
        "needs a 'text' column",
    ),
    Try(
        "script .txt",
        ("director", "batch", "--character", "yana", "--file", "{script.txt}"),
        "script.txt: expected a .jsonl or .csv file",
    ),
    Try(
        "script missing",
        ("director", "batch", "--character", "yana", "--file", "{missing.jsonl}"),
        "missing.jsonl: file not found",
    ),
    Try("script directory", ("director", "batch", "--character", "yana", "--file", "{dir}"), "is a directory"),
    Try("unknown character", ("director", "check", "--character", "nobody", "--rules-only", "hi"), "nobody"),
    # jury
    Try("cases binary", ("jury", "run", "--case", "{binary.jsonl}"), "binary.jsonl: a binary file"),
    Try("cases empty", ("jury", "run", "--case", "{empty.jsonl}"), "empty.jsonl: no cases"),
    Try("cases huge", ("jury", "eval", "--cases", "{huge-cases.jsonl}"), "huge-cases.jsonl: 10.0 MB is above"),
    Try(
        "cases array line",
        ("jury", "run", "--case", "{array.jsonl}"),
        "array.jsonl:1: expected an object with id and content",
    ),
    Try("cases wrong types", ("jury", "run", "--case", "{cases-types.jsonl}"), "cases-types.jsonl:1: content"),
    Try(
        "cases YAML scalar",
        ("jury", "run", "--case", "{cases-scalar.yaml}"),
        "cases-scalar.yaml[0]: expected an object",
    ),
    Try("cases bad YAML", ("jury", "run", "--case", "{cases-bad-yaml.yaml}"), "cases-bad-yaml.yaml:2: not valid YAML"),
    Try("cases binary YAML", ("jury", "eval", "--cases", "{binary.yaml}"), "binary.yaml: a binary file"),
    Try("cases missing", ("jury", "run", "--case", "{missing.jsonl}"), "missing.jsonl: file not found"),
    Try("cases directory", ("jury", "run", "--case", "{dir}"), "is a directory"),
    Try("case id unknown", ("jury", "run", "--case", CASES, "--id", "nope"), "no case 'nope'"),
    Try("threshold 5", ("jury", "run", "--case", CASES, "--threshold", "5"), "consensus_threshold=5.0"),
    Try("rounds 99", ("jury", "run", "--case", CASES, "--rounds", "99"), "max_discussion_rounds=99"),
    Try("rounds -1", ("jury", "run", "--case", CASES, "--rounds", "-1"), "'--rounds'", code=2),
    Try("unknown panel", ("jury", "run", "--case", CASES, "--panel", "nope"), "unknown panel 'nope'"),
    Try("juror unknown model", ("jury", "run", "--case", CASES, "--juror", "ghost:Critic"), "unknown model 'ghost'"),
    Try("limit 0", ("jury", "eval", "--cases", CASES, "--limit", "0"), "'--limit'", code=2),
    Try("replay unknown run", ("jury", "replay", "nope"), "no jury run 'nope'"),
    Try(
        "JURY rounds not a number",
        ("jury", "run", "--case", CASES),
        "JURY_MAX_DISCUSSION_ROUNDS='abc'",
        env={"JURY_MAX_DISCUSSION_ROUNDS": "abc"},
    ),
    Try(
        "JURY threshold out of range",
        ("jury", "run", "--case", CASES),
        "JURY_CONSENSUS_THRESHOLD='9'",
        env={"JURY_CONSENSUS_THRESHOLD": "9"},
    ),
    Try(
        "JURY method unknown",
        ("jury", "eval", "--cases", CASES),
        "JURY_FINAL_JUDGMENT_METHOD='vote'",
        env={"JURY_FINAL_JUDGMENT_METHOD": "vote"},
    ),
    Try(
        "JURY tie policy unknown",
        ("jury", "run", "--case", CASES),
        "JURY_TIE_POLICY='coin'",
        env={"JURY_TIE_POLICY": "coin"},
    ),
    Try(
        "JURY stagnation 0",
        ("jury", "run", "--case", CASES),
        "JURY_STAGNATION_ROUNDS='0'",
        env={"JURY_STAGNATION_ROUNDS": "0"},
    ),
    # hand raise
    Try("benchmark binary", ("handraise", "eval", "--benchmark", "{binary.jsonl}"), "binary.jsonl: a binary file"),
    Try("benchmark empty", ("handraise", "eval", "--benchmark", "{empty.jsonl}"), "empty.jsonl: no items"),
    Try(
        "benchmark huge",
        ("handraise", "eval", "--benchmark", "{huge-bench.jsonl}"),
        "huge-bench.jsonl: 10.0 MB is above the input limit",
    ),
    Try("benchmark array line", ("handraise", "eval", "--benchmark", "{array.jsonl}"), "array.jsonl:1"),
    Try(
        "benchmark wrong types",
        ("handraise", "eval", "--benchmark", "{bench-types.jsonl}"),
        "bench-types.jsonl:1: context",
    ),
    Try("benchmark missing", ("handraise", "eval", "--benchmark", "{missing.jsonl}"), "missing.jsonl: file not found"),
    Try("benchmark directory", ("handraise", "eval", "--benchmark", "{dir}"), "is a directory"),
    Try(
        "context 9",
        ("handraise", "eval", "--benchmark", "data/benchmarks/handraise.jsonl", "--context", "9"),
        "--context must be",
    ),
    Try(
        "hand threshold 2",
        ("handraise", "eval", "--benchmark", "data/benchmarks/handraise.jsonl", "--threshold", "2"),
        "'--threshold'",
        code=2,
    ),
    Try(
        "judge method unknown",
        ("handraise", "eval", "--benchmark", "data/benchmarks/handraise.jsonl", "--judge", "psychic"),
        "judge_method",
    ),
    Try("scenario binary", ("handraise", "judge", "--scenario", "{binary.yaml}"), "binary.yaml: a binary file"),
    Try(
        "scenario list",
        ("handraise", "judge", "--scenario", "{scenario-list.yaml}"),
        "scenario-list.yaml: expected a mapping",
    ),
    Try("scenario bad YAML", ("handraise", "judge", "--scenario", "{scenario-bad.yaml}"), "scenario-bad.yaml"),
    Try(
        "scenario wrong types",
        ("handraise", "judge", "--scenario", "{bench-types.jsonl}"),
        "bench-types.jsonl: context: Input should be a valid list",
    ),
    Try("scenario missing", ("handraise", "judge", "--scenario", "{missing.yaml}"), "missing.yaml: file not found"),
    Try("scenario directory", ("handraise", "judge", "--scenario", "{dir}"), "is a directory"),
    # runs, models, bench
    Try("run unknown", ("runs", "show", "nope"), "no run nope"),
    Try("runs limit 0", ("runs", "list", "--limit", "0"), "'--limit'", code=2),
    Try("model unknown", ("models", "check", "nope"), "unknown model 'nope'"),
    Try("benchmark name unknown", ("bench", "--only", "nope"), "unknown benchmark nope"),
    Try("bench output a directory", ("bench", "--only", "llm.judgment", "--output", "{dir}"), "--output"),
    # environment
    Try(
        "DATABASE_URL not a URL",
        ("runs", "list"),
        "JUDGELAB_DATABASE_URL='notaurl' is not a database URL",
        env={"JUDGELAB_DATABASE_URL": "notaurl"},
    ),
    Try(
        "DATABASE_URL unknown kind",
        ("runs", "list"),
        "unknown kind of database 'nosuchdb'",
        env={"JUDGELAB_DATABASE_URL": "nosuchdb://x/y"},
    ),
    Try(
        "DATABASE_URL server down",
        ("runs", "list"),
        "cannot open the database at postgresql://postgres@127.0.0.1:1/x",
        env={"JUDGELAB_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"},
    ),
    Try(
        "DATABASE_URL a directory", ("runs", "list"), "is a directory", env={"JUDGELAB_DATABASE_URL": "sqlite:///{dir}"}
    ),
    Try(
        "DATABASE_URL under a file",
        ("runs", "list"),
        "cannot create the database at",
        env={"JUDGELAB_DATABASE_URL": "sqlite:///{a-file}/x.db"},
    ),
    Try("THREADS not a number", ("runs", "list"), "JUDGELAB_THREADS='abc'", env={"JUDGELAB_THREADS": "abc"}),
    Try("THREADS zero", ("runs", "list"), "JUDGELAB_THREADS='0'", env={"JUDGELAB_THREADS": "0"}),
    Try(
        "busy timeout negative",
        ("runs", "list"),
        "JUDGELAB_SQLITE_BUSY_TIMEOUT_MS='-5'",
        env={"JUDGELAB_SQLITE_BUSY_TIMEOUT_MS": "-5"},
    ),
    Try("MAX_INPUT_MB zero", ("runs", "list"), "JUDGELAB_MAX_INPUT_MB='0'", env={"JUDGELAB_MAX_INPUT_MB": "0"}),
    Try(
        "STALE_AFTER not a number",
        ("runs", "list"),
        "JUDGELAB_RUN_STALE_AFTER_S='soon'",
        env={"JUDGELAB_RUN_STALE_AFTER_S": "soon"},
    ),
    Try("PRELOAD not a boolean", ("runs", "list"), "JUDGELAB_PRELOAD='maybe'", env={"JUDGELAB_PRELOAD": "maybe"}),
    Try(
        "CATALOG missing",
        ("models", "list"),
        "missing.yaml: catalog file not found",
        env={"JUDGELAB_CATALOG": "{missing.yaml}"},
    ),
    Try(
        "CATALOG binary",
        ("models", "list"),
        "binary.yaml: a binary file, not UTF-8 text",
        env={"JUDGELAB_CATALOG": "{binary.yaml}"},
    ),
    Try("CATALOG directory", ("models", "list"), "is a directory, not a file", env={"JUDGELAB_CATALOG": "{dir}"}),
]

DAMAGED = [  # commands on a database damaged in the middle of the file: refused, the file untouched
    Try("damaged: runs list", ("runs", "list"), "the file is damaged"),
    Try("damaged: runs show", ("runs", "show", "{run}"), "the file is damaged"),
    Try("damaged: jury run --replay", ("jury", "run", "--case", CASES, "--replay"), "the file is damaged"),
    Try("damaged: jury replay", ("jury", "replay", "{run}"), "the file is damaged"),
    Try(
        "damaged: skip simulate --model",
        ("skip", "simulate", "--generate", "--model", "gemma3-270m"),
        "the file is damaged",
    ),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("bad-inputs")
    paths = {}
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
        paths[name] = str(folder / name)
    (folder / "a-folder").mkdir()
    paths["dir"] = str(folder / "a-folder")
    paths["missing.jsonl"] = str(folder / "missing.jsonl")
    paths["missing.yaml"] = str(folder / "missing.yaml")
    return paths


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def judgelab(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI in a new process (forked from a warm one: tests/forkcli.py), from the project root, with
    this checkout's code."""
    return forkcli.run(args, {**os.environ, **env, "PYTHONPATH": str(ROOT)}, timeout=timeout)


def db_rows(path: Path) -> list[tuple[object, ...]]:
    """Every row of the store's tables, read without writing."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return [
            row
            for table in ("runs", "events", "llm_calls", "schema_migrations")
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")
        ]  # noqa: S608 - fixed names


def assert_clean_failure(done: subprocess.CompletedProcess[str], attempt: Try) -> None:
    output = done.stdout + done.stderr
    assert done.returncode != 0, f"{attempt.name}: exit 0\n{output}"
    if attempt.code is not None:
        assert done.returncode == attempt.code, f"{attempt.name}: exit {done.returncode}\n{output}"
    assert "Traceback" not in output, f"{attempt.name}: a traceback\n{output}"
    assert "error: unexpected" not in done.stderr, f"{attempt.name}: reached the last-resort handler\n{output}"
    assert done.stderr.strip(), f"{attempt.name}: nothing on stderr"
    assert len(done.stderr.strip().splitlines()) <= 25, f"{attempt.name}: a wall of text\n{done.stderr}"


@pytest.fixture
def recorded_db(tmp_path: Path) -> Path:
    """The test database with a finished run in it (JUDGELAB_DATABASE_URL points here)."""
    from engine.events import run_context
    from engine.store import Store

    path = tmp_path / "test.db"
    store = Store(f"sqlite:///{path}")
    with run_context(store, "jury.run", {"case": {"id": "x"}}) as run:
        run.emit("step", n=1)
    store.dispose()
    return path


@pytest.mark.server  # a real judgelab process per case
@pytest.mark.parametrize("attempt", TRIES, ids=[t.name for t in TRIES])
def test_bad_input_is_one_clear_error(attempt: Try, files: dict[str, str], recorded_db: Path) -> None:
    before = db_rows(recorded_db)
    args = [_fill(a, files) for a in attempt.args]
    env = {k: _fill(v, files) for k, v in attempt.env.items()}
    done = judgelab(args, env)
    assert_clean_failure(done, attempt)
    assert attempt.expected in done.stderr, f"{attempt.name}: expected {attempt.expected!r} in\n{done.stderr}"
    assert db_rows(recorded_db) == before, f"{attempt.name}: the database changed"


def test_the_table_covers_every_kind_of_bad_input() -> None:
    names = " ".join(t.name for t in TRIES).lower()
    for kind in ("binary", "empty", "huge", "array", "type", "1e15", "missing", "directory", "url", "jury"):
        assert kind in names, kind
    assert len(TRIES) + len(DAMAGED) >= 100


def _damage(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(size // 2 - (size // 2) % 4096)
        fh.write(bytes(range(256)) * 32)


@pytest.fixture
def damaged_db(tmp_path: Path) -> tuple[Path, str]:
    """A store with runs and calls, checkpointed into the main file, then damaged mid-file."""
    from engine.events import run_context
    from engine.store import Store
    from models.recording import CallRecord

    path = tmp_path / "test.db"
    store = Store(f"sqlite:///{path}")
    with run_context(store, "jury.run", {"case": {"id": "x"}}) as run:
        for i in range(300):
            store.record_call(
                CallRecord(
                    run_id=run.run_id,
                    model_id="m",
                    backend="llamacpp",
                    request_hash=f"h{i}",
                    request={"i": i},
                    raw_text="x" * 400,
                )
            )
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.dispose()
    _damage(path)
    return path, run.run_id


@pytest.mark.server  # a real judgelab process per case
@pytest.mark.parametrize("attempt", DAMAGED, ids=[t.name for t in DAMAGED])
def test_a_damaged_database_is_refused_and_left_as_it_was(attempt: Try, damaged_db: tuple[Path, str]) -> None:
    path, run_id = damaged_db
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done = judgelab([a.replace("{run}", run_id) for a in attempt.args], {})
    assert_clean_failure(done, attempt)
    assert attempt.expected in done.stderr and "nothing was written" in done.stderr, done.stderr
    assert str(path) in done.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_page_uploads_are_held_to_the_same_rules() -> None:
    from engine.inputs import InputError, read_upload

    assert read_upload("ok.jsonl", b'{"a": 1}\n') == '{"a": 1}\n'
    with pytest.raises(InputError, match="up.jsonl: a binary file"):
        read_upload("up.jsonl", BINARY)
    with pytest.raises(InputError, match="big.jsonl: 10.0 MB is above the input limit of 10 MB"):
        read_upload("big.jsonl", _huge(WORKLOAD_LINE))
    assert json.loads(read_upload("bom.json", "\ufeff{}".encode())) == {}
