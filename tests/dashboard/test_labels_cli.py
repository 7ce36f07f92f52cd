"""`judgelab labels list | export | import | agreement` and `calibrate-judge --labels`: JSON shapes, a round trip
through a file, a bad import refused by line with nothing written (also 100,000 bad rows, in a subprocess
under a memory limit and a timeout), and clear errors for wrong options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.labels import add_label, list_labels
from engine.store import Store

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args or "export" in args else result.output


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    return Store()  # the test's own database (conftest sets JUDGELAB_DATABASE_URL)


def _some(store: Store) -> None:
    for i, (label, predicted) in enumerate(
        [("speak", "speak"), ("skip", "speak"), ("skip", "skip"), ("speak", "speak")]
    ):
        add_label(
            store,
            mechanism="handraise",
            run_id="r1",
            item_key=f"t{i}/coder",
            label=label,
            user="ann",
            note='=HYPERLINK("x")' if i == 0 else "",
            context={
                "predicted": predicted,
                "will": 0.7 if predicted == "speak" else 0.3,
                "threshold": 0.6,
                "judge": "j",
            },
        )
    add_label(store, mechanism="director", item_key="line2", label="retry", user="bob")


def test_list_and_agreement_as_json(store: Store) -> None:
    _some(store)
    code, out = invoke("labels", "list", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["item_key"] for r in rows] == ["t0/coder", "t1/coder", "t2/coder", "t3/coder", "line2"]
    code, out = invoke("labels", "list", "--mechanism", "director")
    assert code == 0 and "line2" in out and "t0/coder" not in out
    code, out = invoke("labels", "agreement", "--mechanism", "handraise", "--json")
    assert code == 0, out
    (a,) = json.loads(out)
    assert a["judge"] == "j" and a["n"] == 4 and a["accuracy"] == 0.75
    assert a["confusion"] == {"speak": {"speak": 2, "skip": 0}, "skip": {"speak": 1, "skip": 1}}
    assert a["confidently_wrong"][0]["key"] == "t1/coder"
    code, out = invoke("labels", "agreement", "--mechanism", "handraise")
    assert code == 0 and "accuracy 0.75" in out


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_then_import_into_another_database(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    _some(store)
    path = tmp_path / f"out.{fmt}"
    code, out = invoke("labels", "export", "--format", fmt, "--output", str(path))
    assert code == 0, out
    before = [lab.to_json() for lab in list_labels(store, latest=False)]
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'other.db'}")
    code, out = invoke("labels", "import", str(path), "--json")
    assert code == 0, out
    assert json.loads(out) == {"imported": 5, "already_present": 0, "rows": 5}
    assert [lab.to_json() for lab in list_labels(Store(), latest=False)] == before


def test_a_bad_import_names_lines_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"mechanism": "handraise", "item_key": "t1/a", "label": "speak"})
        + "\n"
        + json.dumps({"mechanism": "handraise", "item_key": "t1/b", "label": "shout"})
        + "\n",
        encoding="utf-8",
    )
    code, out = invoke("labels", "import", str(path))
    assert code == 1 and f"{path}:2: label: 'shout' is not a handraise label" in out and "nothing was imported" in out
    assert list_labels(store) == []
    code, out = invoke("labels", "import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "missing.jsonl" in out
    code, out = invoke("labels", "import", str(path), "--format", "xml")
    assert code == 2 and "format" in out
    code, out = invoke("labels", "agreement", "--mechanism", "astrology")
    assert code == 2 and "astrology" in out


def test_calibrate_judge_labels_needs_enough_labels(store: Store) -> None:
    _some(store)
    code, out = invoke("calibrate-judge", "--labels")
    assert code == 1 and "at least 10 are needed" in out
    code, out = invoke("calibrate-judge", "--labels", "--only", "jury")
    assert code == 2 and "--only handraise" in out
    code, out = invoke("calibrate-judge", "--adopt")
    assert code == 2 and "--labels" in out


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_calibrate_judge_labels_refits_saves_and_adopts(store: Store) -> None:
    from engine.handraise.scripted_labeller import USER, label_items, load_recording

    run_id = load_recording(store)
    from engine.labels import label_queue

    label_items(store, label_queue(store, mechanism="handraise", rule="random", n=50, user=USER, run_ids=[run_id]))
    code, out = invoke("calibrate-judge", "--labels", "--only", "handraise", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["n_labels"] == 50 and report["adopted"] is False and Path(report["file"]).is_file()
    assert report["comparison"]["test"] == "exact McNemar"
    code, out = invoke("labels", "maps", "--json")
    versions = json.loads(out)
    assert [v["version"] for v in versions] == ["shipped", report["candidate_version"]] and versions[0]["in_use"]
    code, out = invoke("labels", "adopt", report["candidate_version"])
    assert code == 0, out
    code, out = invoke("labels", "maps")
    assert f"* {report['candidate_version']}" in out and "learnt from 50 of your approvals" in out
    code, out = invoke("labels", "adopt", "20000101T000000Z")
    assert code == 1 and "no version" in out


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_100_000_bad_rows_are_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    line = json.dumps({"mechanism": "handraise", "item_key": "t1/a", "label": "maybe"}) + "\n"
    path.write_text(line * 100_000, encoding="utf-8")  # 6 MB: under the 10 MB input limit
    code = textwrap.dedent(
        f"""
        import resource, time
        resource.setrlimit(resource.RLIMIT_AS, ({2 * 1024**3}, {2 * 1024**3}))
        from engine.labels import LabelImportError, import_labels, list_labels
        from engine.store import Store
        store = Store("sqlite:///{tmp_path / "huge.db"}")
        t0 = time.perf_counter()
        try:
            import_labels(store, __import__("pathlib").Path({str(path)!r}))
            raise SystemExit("imported")
        except LabelImportError as exc:
            message = str(exc)
        assert "100000 bad row(s); nothing was imported" in message, message[:300]
        assert "… and 99,980 more" in message and len(message) < 10_000
        assert list_labels(store) == []
        print(round(time.perf_counter() - t0, 2))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 30


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_two_concurrent_cli_imports_of_a_file_without_times_store_each_label_once(store: Store, tmp_path: Path) -> None:
    """Issue 35: two `judgelab labels import` of one file at once, then a third: each label stored once, and each
    says how many of its rows were new ("N imported, M already present")."""
    import re
    import time

    path = tmp_path / "untimed.jsonl"
    path.write_text(
        "".join(
            json.dumps({"mechanism": "director", "item_key": f"line{i}", "label": "ok", "note": "n"}) + "\n"
            for i in range(5000)
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-c", "from dashboard.cli import main; main()", "labels", "import", str(path)]
    started = time.monotonic()
    procs = [subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    counts = [re.match(r"(\d+) imported, (\d+) already present \(5000 label row", out) for out in outputs]
    assert all(counts), outputs
    assert (
        sorted(int(m.group(1)) for m in counts if m) == [0, 5000] or sum(int(m.group(1)) for m in counts if m) == 5000
    )
    assert sum(int(m.group(1)) + int(m.group(2)) for m in counts if m) == 10_000
    code, out = invoke("labels", "import", str(path))
    assert code == 0 and out.startswith("0 imported, 5000 already present"), out
    assert len(list_labels(store, latest=False)) == 5000
    runs = store.list_runs(kind="labels.import")
    assert len(runs) == 3 and {r.status for r in runs} == {"finished"}
    assert time.monotonic() - started < 90
