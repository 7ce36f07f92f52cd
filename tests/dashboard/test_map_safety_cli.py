"""Issue 35, points 1 and 2 at the command line: `calibrate-judge --labels [--adopt]` refuses a hand label whose
map id is a path in one line naming the label and field, before anything is written (also as a real `judgelab`
process under a memory limit); `labels maps` lists a damaged version as damaged, never starred, `labels adopt`
refuses it, and a damaged `in_use.json` shows the shipped map in use with why; hostile `--map` / versions are
one-line usage errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine import judgemaps
from engine.handraise.scripted_labeller import label_items, load_recording
from engine.judgemaps import CALIBRATION_DIR, POINTER, load_calibration, save_version
from engine.labels import add_label, labelable_items
from engine.store import Store

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
NAME = "handraise.likelihood"
MAP = "gemma3-270m+smollm2-135m"
ESCAPE = "x/../../escaped"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "maps"
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(folder))
    return folder


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def hostile_labels(store: Store, spoil: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """40 of the scripted labeller's hand labels (real judge features) and one more, its context spoiled by
    `spoil` (by default: a map id that walks out); the hostile label's id."""
    run = store.get_run(load_recording(store))
    assert run is not None
    good = label_items(store, labelable_items(store, run)[:40])
    context = dict(good[0].context)
    bad = add_label(
        store,
        mechanism="handraise",
        run_id=good[0].run_id,
        item_key="t3/coder",
        label="speak",
        user="mallory",
        context=spoil(context) if spoil else {**context, "map_id": ESCAPE},
    )
    return bad.id


def version(stamp: str) -> Path:
    cal = load_calibration(NAME, MAP, CALIBRATION_DIR)
    assert cal is not None
    return save_version(cal.model_copy(update={"version": stamp}))


@pytest.mark.parametrize("extra", [(), ("--adopt",), ("--adopt", "--json")], ids=["save", "adopt", "json"])
def test_calibrate_judge_labels_refuses_a_label_naming_a_path(
    maps: Path, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    label_id = hostile_labels(Store())
    before = files_under(tmp_path)
    started = time.perf_counter()
    code, out = invoke("calibrate-judge", "--labels", "--only", "handraise", *extra)
    assert time.perf_counter() - started < 15
    assert code == 1
    assert out == f"error: label {label_id} (t3/coder): context.map_id: {ESCAPE!r} is not a map id\n"
    assert files_under(tmp_path) == before and not (tmp_path / "escaped").exists()
    assert not (maps / POINTER).exists()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_real_judgelab_refuses_it_in_bounded_time_and_memory(maps: Path, tmp_path: Path) -> None:
    label_id = hostile_labels(Store())
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({2 * 1024**3}, {2 * 1024**3}))
        sys.argv = ["judgelab", "calibrate-judge", "--labels", "--only", "handraise", "--adopt"]
        from dashboard.cli import main
        main()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert time.perf_counter() - started < 45
    assert done.returncode == 1, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines == [f"error: label {label_id} (t3/coder): context.map_id: {ESCAPE!r} is not a map id"]
    assert not (tmp_path / "escaped").exists() and not (maps / POINTER).exists()


def test_labels_maps_lists_a_damaged_version_and_adopt_refuses_it(maps: Path) -> None:
    version("20260101T000000Z")
    damaged = version("20260102T000000Z")
    damaged.write_text(damaged.read_text()[:300])  # a half-written file
    (damaged.parent / f".{damaged.name}.abc.tmp").write_text("{")  # a crashed writer's temporary file
    code, out = invoke("labels", "maps")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("* shipped") and len(lines) == 3  # the temporary file is no version
    assert lines[2].startswith("  20260102T000000Z") and "DAMAGED: " in lines[2] and str(maps) not in out
    code, out = invoke("labels", "maps", "--json")
    listed = {v["version"]: v for v in json.loads(out)}
    assert listed["20260102T000000Z"]["damaged"] and not listed["20260102T000000Z"]["in_use"]
    assert listed["20260101T000000Z"]["damaged"] == ""
    code, out = invoke("labels", "adopt", "20260102T000000Z")
    assert code == 1 and out.count("\n") == 1 and "damaged" in out and str(maps) not in out
    assert not (maps / POINTER).exists()
    code, out = invoke("labels", "adopt", "20260101T000000Z")
    assert code == 0 and json.loads((maps / POINTER).read_text()) == {f"{NAME}.{MAP}": "20260101T000000Z"}


@pytest.mark.parametrize("pointer", ["{", "[]", json.dumps({f"{NAME}.{MAP}": ESCAPE})], ids=["json", "list", "path"])
def test_a_damaged_pointer_shows_the_shipped_map_in_use_and_why(maps: Path, pointer: str) -> None:
    version("20260101T000000Z")
    (maps / POINTER).write_text(pointer)
    code, out = invoke("labels", "maps")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("* shipped") and lines[1].startswith("  in use because the adopted map cannot be: ")
    assert not any(line.startswith("* 2026") for line in lines)
    code, out = invoke("labels", "adopt", "20260101T000000Z")  # adopting again repairs it
    assert code == 0, out
    assert json.loads((maps / POINTER).read_text()) == {f"{NAME}.{MAP}": "20260101T000000Z"}


@pytest.mark.parametrize("hostile", [ESCAPE, "..", "/etc", "a\nb", "x" * 300])
def test_a_map_or_version_that_is_a_path_is_a_one_line_error(maps: Path, hostile: str) -> None:
    for args in (("labels", "maps", "--map", hostile), ("labels", "adopt", "shipped", "--map", hostile)):
        code, out = invoke(*args)
        assert code == 2 and out.startswith("error: --map: ") and out.count("\n") == 1, out
    code, out = invoke("labels", "adopt", hostile)
    assert code == 1 and out.startswith("error: version: ") and out.count("\n") == 1, out
    assert not maps.exists()


@pytest.mark.parametrize("hostile", ["../../x", "a..b", "x/y"])
def test_calibrate_judge_refuses_a_model_id_that_cannot_name_a_map(tmp_path: Path, hostile: str) -> None:
    code, out = invoke("calibrate-judge", "--model", hostile, "--only", "skip", "--output-dir", str(tmp_path / "out"))
    assert code == 2 and out.startswith("error: --model: ") and out.count("\n") == 1, out
    assert not (tmp_path / "out").exists()


# -- a second round: link loops, line breaks, a damaged shipped map, hostile features -----------------------------


def test_labels_maps_and_adopt_with_a_link_loop_are_one_line_each(maps: Path) -> None:
    version("20260101T000000Z")
    loop = maps / f"{NAME}.{MAP}" / "20260102T000000Z.json"
    loop.symlink_to(loop.name)
    code, out = invoke("labels", "maps")
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == 3 and lines[2].startswith("  20260102T000000Z") and "DAMAGED: " in lines[2]
    code, out = invoke("labels", "adopt", "20260102T000000Z")
    assert code == 1 and out.count("\n") == 1 and "cannot be resolved" in out and str(maps) not in out


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_line_break_in_a_labels_user_cannot_forge_a_starred_version(maps: Path) -> None:
    store = Store()
    run = store.get_run(load_recording(store))
    assert run is not None
    forged = "bob\n* 20990101T000000Z   20990101T000000Z   forged"
    label_items(store, labelable_items(store, run)[:40], user=forged)
    code, out = invoke("calibrate-judge", "--labels")
    assert code == 0, out
    assert not [line for line in out.splitlines() if line.startswith("* 2099")]
    code, out = invoke("labels", "maps")
    assert code == 0 and len(out.splitlines()) == 2, out  # shipped, and the one refit: one line each
    assert out.splitlines()[0].startswith("* shipped")


def test_a_damaged_shipped_map_is_listed_not_a_traceback(
    maps: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version("20260101T000000Z")
    shutil.copytree(CALIBRATION_DIR, tmp_path / "calibration")
    monkeypatch.setattr(judgemaps, "CALIBRATION_DIR", tmp_path / "calibration")
    damaged = tmp_path / "calibration" / f"{NAME}.{MAP}.json"
    damaged.write_text(damaged.read_text()[:200])
    code, out = invoke("labels", "maps")
    assert code == 0, out
    assert out.splitlines()[0].startswith("  shipped") and "DAMAGED: " in out and str(tmp_path) not in out
    code, out = invoke("labels", "adopt", "shipped")
    assert code == 1 and out.count("\n") == 1 and str(tmp_path) not in out
    code, out = invoke("labels", "adopt", "20260101T000000Z")
    assert code == 0, out


def test_calibrate_judge_labels_refuses_a_feature_too_large_for_a_float(maps: Path) -> None:
    bad = hostile_labels(Store(), lambda c: {**c, "features": {**c["features"], "pmi_rel": 10**400}})
    code, out = invoke("calibrate-judge", "--labels", "--adopt")
    assert code == 1 and out.count("\n") == 1, out
    assert out.startswith(f"error: label {bad} (t3/coder): context.features.pmi_rel: ") and "Traceback" not in out
    assert not maps.exists()


@pytest.mark.parametrize("value", ["", "~/maps", "relative/maps"])
def test_a_maps_folder_that_is_not_absolute_is_a_one_line_error(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", value)
    for args in (("labels", "maps"), ("labels", "adopt", "shipped")):
        code, out = invoke(*args)
        assert code == 1 and out.count("\n") == 1 and "JUDGELAB_MAPS_DIR" in out, out
    assert list(tmp_path.iterdir()) == []
