"""Issue 35, points 1 and 2: a label never names a path, and map versions are atomic and checked.

Attacks: a hand label whose `context.map_id` (or `judge_model`) walks out of the maps folder; map names, ids and
versions with separators, `..`, control characters or a link that leads outside; a half-written version (a
truncated file, a crashed writer's temporary file), a full disk under a save and under an adopt, a damaged
`in_use.json` (not JSON, not an object, deeply nested, a value that is a path, a missing or damaged version), and
two refits or adopts at once (threads and processes). Each refusal is one line; nothing is written outside the
folder; the old state stays whole; the judge falls back to the shipped map, flagged."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine import judgemaps
from engine.config import ConfigError, get_settings
from engine.handraise import label_refit
from engine.handraise.judge import map_choice
from engine.handraise.scripted_labeller import label_items, load_recording
from engine.judgemaps import (
    CALIBRATION_DIR,
    POINTER,
    Adoption,
    Calibration,
    MapError,
    adopt_version,
    adoption,
    calibration_path,
    check_version,
    load_calibration,
    save_calibration,
    save_version,
    version_files,
    version_path,
)
from engine.labels import (
    LabelError,
    add_label,
    adopt_map,
    labelable_items,
    map_versions,
    refit_from_labels,
    save_candidate,
)
from engine.labelstore import Label
from engine.store import Store
from models import files

pytestmark = pytest.mark.timeout(120)
NAME = "handraise.likelihood"
MAP = "gemma3-270m+smollm2-135m"
HOSTILE_IDS = [
    "x/../../escaped",
    "../escaped",
    "..",
    "x..y",
    "/etc/passwd",
    "a\\..\\b",
    "x\n",
    " gemma3-270m",
    "gemma3-270m/",
    "a" * 5000,
    17,
    ["gemma3-270m"],
    {"id": "x"},
]


@pytest.fixture
def maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "maps"
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(folder))
    return folder


@pytest.fixture
def store(tmp_path: Path, maps: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'maps.db'}")
    yield s
    s.dispose()


def shipped() -> Calibration:
    cal = load_calibration(NAME, MAP, CALIBRATION_DIR)
    assert cal is not None
    return cal


def a_version(version: str = "20260101T000000Z", model_id: str = MAP) -> Path:
    return save_version(shipped().model_copy(update={"version": version, "model_id": model_id}))


def labelled(store: Store, n: int = 40) -> list[Label]:
    run = store.get_run(load_recording(store))
    assert run is not None
    return list(label_items(store, labelable_items(store, run)[:n]))


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


@contextmanager
def bounded(seconds: float, mb: float) -> Iterator[None]:
    """The block runs within `seconds` and allocates at most `mb` at its peak (tracemalloc)."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        yield
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - started < seconds
    assert peak < mb * 1024 * 1024, f"peak {peak / 1024 / 1024:.1f} MB"


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text and len(text) < 400, text
    return text


# -- 1. a label never names a path ------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["map_id", "judge_model"])
@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_a_label_naming_a_path_refuses_the_refit_naming_label_and_field(
    store: Store, tmp_path: Path, maps: Path, field: str, hostile: object
) -> None:
    labels = labelled(store, 12)
    good = labels[3]
    bad = add_label(
        store,
        mechanism="handraise",
        run_id=good.run_id,
        item_key="t3/coder",
        label="speak",
        user="mallory",
        context={**good.context, field: hostile},
    )
    before = files_under(tmp_path)
    with bounded(10, 50), pytest.raises(LabelError) as caught:
        refit = refit_from_labels(store)
        save_candidate(refit)
        adopt_map(store, "handraise", refit.model_id, refit.candidate.version)
    text = one_line(caught.value)
    assert text.startswith(f"label {bad.id} (t3/coder): context.{field}: ") and "is not a map id" in text
    assert files_under(tmp_path) == before  # nothing written, inside the folder or out
    assert not (maps / POINTER).exists()


@pytest.mark.parametrize("hostile", [h for h in HOSTILE_IDS if isinstance(h, str)], ids=range(10))
def test_names_ids_and_versions_are_closed_names(maps: Path, hostile: str) -> None:
    cal = shipped()
    for call in (
        lambda: calibration_path(NAME, hostile),
        lambda: calibration_path(hostile, MAP),
        lambda: calibration_path(NAME, hostile, CALIBRATION_DIR),
        lambda: version_path(NAME, MAP, hostile),
        lambda: version_path(NAME, hostile, "v1"),
        lambda: save_version(cal.model_copy(update={"model_id": hostile})),
        lambda: save_version(cal.model_copy(update={"version": hostile})),
        lambda: save_calibration(cal.model_copy(update={"model_id": hostile}), maps),
        lambda: adopt_version(NAME, MAP, hostile),
        lambda: adopt_version(NAME, hostile, "shipped"),
        lambda: load_calibration(NAME, hostile),
    ):
        with pytest.raises(MapError) as caught:
            call()
        assert "is not a map" in one_line(caught.value)
    assert not maps.exists()  # refused before any folder or file is made
    with pytest.raises(LabelError) as refused:
        adopt_map(None, "handraise", MAP, hostile)
    assert one_line(refused.value).startswith("version: ")
    with pytest.raises(LabelError):
        map_versions("handraise", hostile)


def test_every_catalog_and_shipped_id_is_a_map_name() -> None:
    from models.catalog import load_catalog

    for path in CALIBRATION_DIR.glob("*.json"):
        cal = Calibration.model_validate_json(path.read_bytes())
        assert calibration_path(cal.name, cal.model_id) == path
    for model_id in load_catalog().ids:
        calibration_path(NAME, model_id)
        version_path(NAME, f"{model_id}+{model_id}", "20260101T000000Z-2")


def test_a_link_in_the_maps_folder_does_not_lead_a_version_outside(maps: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    maps.mkdir()
    (maps / f"{NAME}.{MAP}").symlink_to(outside, target_is_directory=True)
    with pytest.raises(MapError) as caught:
        a_version()
    assert "outside the maps folder" in one_line(caught.value) and str(tmp_path) not in str(caught.value)
    assert list(outside.iterdir()) == []


# -- 2. atomic, verified versions -------------------------------------------------------------------------------


def test_a_version_is_written_whole_and_never_overwritten(maps: Path) -> None:
    path = a_version()
    assert check_version(NAME, MAP, "20260101T000000Z").version == "20260101T000000Z"
    again = a_version()  # the same version again: the next free name, the first untouched
    assert again.name == "20260101T000000Z-2.json" and path.read_bytes() != b""
    assert json.loads(again.read_text())["version"] == "20260101T000000Z-2"
    assert [v.version for v in version_files(NAME, MAP)] == ["20260101T000000Z", "20260101T000000Z-2"]
    assert not [p for p in files_under(maps) if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "empty",
        "not an object",
        "wrong shape",
        "other map",
        "no maps",
        "a component missing",
        "inconsistent map",
        "non-finite",
        "deep",
        "hostile key",
    ],
)
def test_a_damaged_version_is_listed_as_damaged_never_starred_never_adopted(
    maps: Path, store: Store, damage: str
) -> None:
    a_version("20260101T000000Z")
    adopt_version(NAME, MAP, "20260101T000000Z")
    good = a_version("20260102T000000Z")
    data = json.loads(good.read_text())
    text = good.read_text()
    bad = {
        "truncated": text[: len(text) // 2],
        "empty": "",
        "not an object": "[1, 2]",
        "wrong shape": json.dumps({"a": 1}),
        "other map": json.dumps(data | {"version": "20260101T000000Z"}),
        "no maps": json.dumps(data | {"maps": {}}),
        "a component missing": json.dumps(data | {"maps": {"relevance": data["maps"]["relevance"]}}),
        "inconsistent map": json.dumps(
            data | {"maps": data["maps"] | {"relevance": data["maps"]["relevance"] | {"coef": [1.0]}}}
        ),
        "non-finite": text.replace('"intercept": ', '"intercept": NaN, "x": ', 1),
        "deep": "[" * 5000 + "]" * 5000,
        "hostile key": json.dumps(data | {"maps": {"a\nb\x1b[2J" + "x" * 500: {"kind": "?", "features": []}}}),
    }[damage]
    good.write_text(bad)
    pointer = (maps / POINTER).read_bytes()
    with bounded(5, 20):
        versions = {v.version: v for v in map_versions("handraise", MAP)}
    damaged = versions["20260102T000000Z"]
    assert damaged.damaged and not damaged.in_use and "\n" not in damaged.damaged
    assert not damaged.damaged.startswith("damaged")  # the reason alone: the listing says "damaged"
    assert str(maps) not in damaged.damaged
    assert versions["20260101T000000Z"].in_use and not versions["20260101T000000Z"].damaged
    with pytest.raises(LabelError) as caught:
        adopt_map(store, "handraise", MAP, "20260102T000000Z")
    assert "damaged" in one_line(caught.value)
    assert (maps / POINTER).read_bytes() == pointer  # the map in use unchanged


def test_a_crashed_writers_temporary_file_is_ignored_and_cleaned(maps: Path) -> None:
    path = a_version()
    tmp = path.parent / f".{path.name}.abc123.tmp"
    tmp.write_text(path.read_text()[:100])  # kill -9 mid-write: a half temporary file
    (maps / f".{POINTER}.def456.tmp").write_text("{")
    assert [v.version for v in version_files(NAME, MAP)] == [path.stem]
    assert adoption(NAME, MAP).problem == ""
    old = time.time() - 2 * files.STALE_S
    os.utime(tmp, (old, old))
    a_version("20260103T000000Z")
    assert not tmp.exists()  # the next write of that folder removes a stale one


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_a_full_disk_leaves_the_old_state_whole_with_a_one_line_error(
    maps: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    first = a_version("20260101T000000Z")
    adopt_version(NAME, MAP, "20260101T000000Z")
    pointer = (maps / POINTER).read_bytes()
    before = {p: p.read_bytes() for p in files_under(maps)}

    def full(*args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    cal = shipped()
    with monkeypatch.context() as patched:
        patched.setattr(os, where, full)
        with pytest.raises(MapError) as saving:
            a_version("20260102T000000Z")
        with pytest.raises(MapError) as adopting:
            adopt_version(NAME, MAP, "shipped")
        with pytest.raises(MapError) as shipping:
            save_calibration(cal, maps / "out")
    for exc in (saving.value, adopting.value, shipping.value):
        assert "No space left on device" in one_line(exc) and str(maps) not in str(exc)
    assert {p: p.read_bytes() for p in files_under(maps)} == before  # no version, no temporary file, same pointer
    assert (maps / POINTER).read_bytes() == pointer and adoption(NAME, MAP).version == first.stem


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "pointer",
    [
        "{",
        "",
        "\x00\x01binary",
        "[]",
        '"shipped"',
        _nested(5000),
        json.dumps({f"{NAME}.{MAP}": 5}),
        json.dumps({f"{NAME}.{MAP}": "../../escaped"}),
        json.dumps({f"{NAME}.{MAP}": "20991231T000000Z"}),
        json.dumps({f"{NAME}.{MAP}": "20260101T000000Z"}),  # a truncated version
    ],
    ids=range(10),
)
def test_a_damaged_pointer_falls_back_to_the_shipped_map_flagged_until_adopted_again(maps: Path, pointer: str) -> None:
    damaged = a_version("20260101T000000Z")
    damaged.write_text(damaged.read_text()[:200])
    maps.mkdir(exist_ok=True)
    (maps / POINTER).write_text(pointer)
    with bounded(5, 20):
        cal = load_calibration(NAME, MAP)
        choice = map_choice("likelihood", "gemma3-270m", ["smollm2-135m"])
        versions = map_versions("handraise", MAP)
    assert cal is not None and cal.version == shipped().version and cal.fallback
    assert "\n" not in cal.fallback and str(maps) not in cal.fallback
    assert "map_fallback" in choice.flags and "the adopted map cannot be used" in choice.describe()
    assert [v.version for v in versions if v.in_use] == ["shipped"] and versions[0].fallback
    a_version("20260105T000000Z")
    adopt_version(NAME, MAP, "20260105T000000Z")  # adopting again repairs the pointer
    assert json.loads((maps / POINTER).read_text()) == {f"{NAME}.{MAP}": "20260105T000000Z"}
    assert adoption(NAME, MAP) == Adoption("20260105T000000Z", check_version(NAME, MAP, "20260105T000000Z"), named=True)


@pytest.mark.parametrize(
    "pointer", ["{", json.dumps({f"{NAME}.{MAP}": "20260101T000000Z"})], ids=["not-json", "damaged"]
)
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_after_a_damaged_pointer_the_next_refit_from_labels_works(maps: Path, store: Store, pointer: str) -> None:
    damaged = a_version("20260101T000000Z")
    damaged.write_text(damaged.read_text()[:200])
    (maps / POINTER).write_text(pointer)
    labelled(store)
    refit = refit_from_labels(store)
    assert refit.current is not None and refit.current.fallback  # compared with the shipped map, flagged
    save_candidate(refit)
    adopt_map(store, "handraise", refit.model_id, refit.candidate.version)
    assert json.loads((maps / POINTER).read_text()) == {f"{NAME}.{MAP}": refit.candidate.version}
    cal = load_calibration(NAME, MAP)
    assert cal is not None and cal.version == refit.candidate.version and not cal.fallback


def test_two_refits_in_one_second_save_two_versions(maps: Path) -> None:
    cal = shipped().model_copy(update={"version": "20260101T000000Z"})
    paths: list[Path] = []
    barrier = threading.Barrier(8)

    def save() -> None:
        barrier.wait()
        paths.append(save_version(cal))

    threads = [threading.Thread(target=save) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len({p.name for p in paths}) == 8
    files = version_files(NAME, MAP)
    assert len(files) == 8 and all(v.calibration is not None for v in files)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_two_refits_from_labels_at_once_both_saved(store: Store, maps: Path) -> None:
    labelled(store)
    refits = [refit_from_labels(store) for _ in range(2)]
    for r in refits:
        r.candidate = r.candidate.model_copy(update={"version": "20260101T000000Z"})
    paths = [save_candidate(r) for r in refits]
    assert paths[0] != paths[1] and refits[1].candidate.version == "20260101T000000Z-2"
    adopt_map(store, "handraise", MAP, refits[1].candidate.version)
    assert adoption(NAME, MAP).version == "20260101T000000Z-2"


def _adopt_at(barrier: threading.Barrier, model_id: str, errors: list[BaseException]) -> None:
    barrier.wait()
    try:
        adopt_version(NAME, model_id, "20260101T000000Z")
    except BaseException as exc:  # noqa: BLE001  (reported by the test)
        errors.append(exc)


def test_concurrent_adopts_leave_a_valid_pointer_with_every_choice(maps: Path) -> None:
    """16 adopts of 16 maps at once, each once: a read-modify-write without the lock loses some of them."""
    ids = [f"m{i}" for i in range(16)]
    for model_id in ids:
        a_version("20260101T000000Z", model_id)
    for _ in range(3):
        (maps / POINTER).unlink(missing_ok=True)
        barrier = threading.Barrier(len(ids))
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_adopt_at, args=(barrier, m, errors)) for m in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        assert json.loads((maps / POINTER).read_text()) == {f"{NAME}.{m}": "20260101T000000Z" for m in ids}


def _adopt_in_process(maps: str, model_id: str, start: float) -> None:
    os.environ["JUDGELAB_MAPS_DIR"] = maps
    time.sleep(max(0.0, start - time.time()))  # all at once
    adopt_version(NAME, model_id, "20260101T000000Z")


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_concurrent_adopts_in_processes_leave_a_valid_pointer(maps: Path) -> None:
    ids = [f"p{i}" for i in range(8)]
    for model_id in ids:
        a_version("20260101T000000Z", model_id)
    context = multiprocessing.get_context("fork")
    start = time.time() + 0.5
    workers = [context.Process(target=_adopt_in_process, args=(str(maps), m, start)) for m in ids]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0] * len(ids)
    assert json.loads((maps / POINTER).read_text()) == {f"{NAME}.{m}": "20260101T000000Z" for m in ids}
    assert not [p for p in files_under(maps) if p.name.endswith(".tmp")]


# -- a second round of attacks (links, the lock, line breaks, the shipped map, hostile features, kill -9) ----------


def _loop(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(path.name)  # a link to itself: resolving it loops


@pytest.mark.parametrize("where", ["version", "versions folder"])
def test_a_link_loop_is_a_damaged_version_and_the_judge_falls_back(maps: Path, where: str) -> None:
    a_version("20260101T000000Z")
    if where == "version":
        _loop(maps / f"{NAME}.{MAP}" / "20260102T000000Z.json")
        (maps / POINTER).write_text(json.dumps({f"{NAME}.{MAP}": "20260102T000000Z"}))
    else:
        (maps / f"{NAME}.{MAP}").rename(maps / "moved")
        _loop(maps / f"{NAME}.{MAP}")
        (maps / POINTER).write_text(json.dumps({f"{NAME}.{MAP}": "20260101T000000Z"}))
    with bounded(5, 20):
        found = adoption(NAME, MAP)
        choice = map_choice("likelihood", "gemma3-270m", ("smollm2-135m",))
        versions = map_versions("handraise", MAP)
    assert found.version is None and "cannot be resolved" in one_line(MapError(found.problem))
    assert str(maps) not in found.problem
    assert choice.calibration is not None and choice.calibration.version == shipped().version
    assert "map_fallback" in choice.flags
    assert versions[0].version == "shipped" and versions[0].in_use and versions[0].fallback
    assert not any(v.in_use for v in versions[1:])
    with pytest.raises(LabelError) as caught:
        adopt_map(None, "handraise", MAP, "20260102T000000Z" if where == "version" else "20260101T000000Z")
    assert "cannot be resolved" in one_line(caught.value) and str(maps) not in str(caught.value)
    if where == "versions folder":
        with pytest.raises(MapError) as refused:
            save_version(shipped().model_copy(update={"version": "20260103T000000Z"}))
        assert "cannot be resolved" in one_line(refused.value)


def test_the_maps_folder_a_link_loop_refuses_in_one_line(maps: Path) -> None:
    _loop(maps)
    assert adoption(NAME, MAP).problem  # the pointer cannot be read: the shipped map, flagged
    for call in (
        lambda: save_version(shipped().model_copy(update={"version": "20260103T000000Z"})),
        lambda: adopt_version(NAME, MAP, "20260101T000000Z"),
        lambda: adopt_version(NAME, MAP, "shipped"),
    ):
        with pytest.raises(MapError) as caught:
            call()
        assert str(maps.parent) not in one_line(caught.value)


def test_a_link_planted_as_the_lock_file_opens_nothing_elsewhere(maps: Path, tmp_path: Path) -> None:
    a_version("20260101T000000Z")
    target = tmp_path / "created-by-the-lock"
    (maps / ".in_use.lock").symlink_to(target)
    with pytest.raises(MapError) as caught:
        adopt_version(NAME, MAP, "20260101T000000Z")
    assert one_line(caught.value).startswith(f"{POINTER}: cannot be written (")
    assert not target.exists() and not (maps / POINTER).exists()
    existing = tmp_path / "someone-elses-file"
    existing.write_text("keep")
    (maps / ".in_use.lock").unlink()
    (maps / ".in_use.lock").symlink_to(existing)
    with pytest.raises(MapError):
        adopt_version(NAME, MAP, "20260101T000000Z")
    assert existing.read_text() == "keep"


def test_a_reader_refusal_is_said_once_without_a_machine_path(maps: Path) -> None:
    a_version("20260101T000000Z")
    (maps / POINTER).symlink_to(POINTER)  # ELOOP when opened
    problem = adoption(NAME, MAP).problem
    assert problem == f"{POINTER} cannot be read (Too many levels of symbolic links)"
    (maps / POINTER).unlink()
    (maps / POINTER).mkdir()
    assert adoption(NAME, MAP).problem == f"{POINTER} cannot be read (is a directory, not a file)"


@pytest.mark.parametrize("user", ["bob\n* 20990101T000000Z   20990101T000000Z   forged", "bob\r* x", "bob\u2028* x"])
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_line_break_in_a_labels_user_never_splits_a_listing_line(store: Store, maps: Path, user: str) -> None:
    for lab in labelled(store, 40):
        add_label(
            store,
            mechanism="handraise",
            run_id=lab.run_id,
            item_key=lab.item_key,
            label=lab.label,
            user=user,
            context=lab.context,
        )
    refit = refit_from_labels(store, user=user)
    assert refit.provenance.isprintable()
    save_candidate(refit)
    path = a_version("20260101T000000Z")  # a hand-edited file: line breaks in its time and notes
    path.write_text(json.dumps(json.loads(path.read_text()) | {"fitted_at": "x\ny", "notes": "a\n* b\x1b[2J"}))
    for v in map_versions("handraise", MAP):
        assert v.provenance.isprintable() and v.created.isprintable(), v


@pytest.fixture
def shipped_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of data/calibration/ read as the shipped maps, to damage."""
    folder = tmp_path / "calibration"
    shutil.copytree(CALIBRATION_DIR, folder)
    monkeypatch.setattr(judgemaps, "CALIBRATION_DIR", folder)
    return folder / f"{NAME}.{MAP}.json"


@pytest.mark.parametrize("damage", ["truncated", "fifo", "directory", "link loop"])
def test_a_damaged_shipped_map_is_listed_damaged_and_a_version_can_still_be_adopted(
    maps: Path, shipped_copy: Path, damage: str
) -> None:
    a_version("20260101T000000Z")  # from the real shipped map, before it is damaged
    text = shipped_copy.read_text()
    shipped_copy.unlink()
    {
        "truncated": lambda: shipped_copy.write_text(text[:200]),
        "fifo": lambda: os.mkfifo(shipped_copy),
        "directory": shipped_copy.mkdir,
        "link loop": lambda: _loop(shipped_copy),
    }[damage]()
    with bounded(5, 20):
        versions = map_versions("handraise", MAP)
    assert versions[0].version == "shipped" and versions[0].damaged and not versions[0].in_use
    assert versions[1].version == "20260101T000000Z" and not versions[1].damaged  # not the version's fault
    assert all(str(shipped_copy.parent) not in v.damaged for v in versions)
    with pytest.raises(LabelError) as caught:  # the damaged shipped map is not adopted either
        adopt_map(None, "handraise", MAP, "shipped")
    assert str(shipped_copy.parent) not in one_line(caught.value)
    adopt_map(None, "handraise", MAP, "20260101T000000Z")  # the repair: a saved version
    choice = map_choice("likelihood", "gemma3-270m", ("smollm2-135m",))
    assert choice.calibration is not None and choice.calibration.version == "20260101T000000Z"
    (maps / POINTER).unlink()
    with pytest.raises(MapError) as judge:  # nothing adopted: the judge refuses the damaged file in one line
        map_choice("likelihood", "gemma3-270m", ("smollm2-135m",))
    assert str(shipped_copy.parent) not in one_line(judge.value)


@pytest.mark.parametrize(
    "value", [1e308, -1.7e308, 10**400, True, 1e7], ids=["1e308", "-1.7e308", "10^400", "true", "1e7"]
)
def test_a_hostile_feature_value_refuses_the_refit_naming_label_and_field(
    store: Store, maps: Path, value: object
) -> None:
    good = labelled(store, 12)[3]
    bad = add_label(
        store,
        mechanism="handraise",
        run_id=good.run_id,
        item_key="t3/coder",
        label="speak",
        user="mallory",
        context={**good.context, "features": {**good.context["features"], "pmi_rel": value}},
    )
    with bounded(10, 50), pytest.raises(LabelError) as caught:
        refit_from_labels(store)
    text = one_line(caught.value)
    assert text.startswith(f"label {bad.id} (t3/coder): context.features.pmi_rel: ") and "not a feature value" in text
    assert not maps.exists()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_fit_that_gives_no_usable_map_is_one_line(store: Store, maps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labelled(store, 40)

    def overflow(*args: object, **kwargs: object) -> object:
        raise OverflowError("math range error\nsecond line")

    monkeypatch.setattr(label_refit, "fit_candidate", overflow)
    with pytest.raises(LabelError) as caught:
        refit_from_labels(store)
    assert one_line(caught.value) == "labels: the fit failed (math range error second line)"

    def no_map(*args: object, **kwargs: object) -> object:
        return Calibration.model_validate({"name": NAME, "model_id": MAP, "version": "v", "maps": {"x": {"kind": "?"}}})

    monkeypatch.setattr(label_refit, "fit_candidate", no_map)
    with pytest.raises(LabelError) as caught:
        refit_from_labels(store)
    assert one_line(caught.value).startswith("labels: the fit gives no usable map (maps.x.kind: ")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_versions_and_the_pointer_get_the_mode_open_would_give(maps: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        path = a_version()
        adopt_version(NAME, MAP, path.stem)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600: another account can read it
    assert (maps / POINTER).stat().st_mode & 0o777 == 0o666 & ~umask


_WRITER = """
import os, sys
os.environ["JUDGELAB_MAPS_DIR"] = sys.argv[1]
from engine.judgemaps import CALIBRATION_DIR, adopt_version, load_calibration, save_version
cal = load_calibration("handraise.likelihood", "gemma3-270m+smollm2-135m", CALIBRATION_DIR)
big = cal.model_copy(update={"notes": "x" * 2_000_000})  # a write long enough to be killed in
print("ready", flush=True)
for i in range(1, 10_000):
    path = save_version(big.model_copy(update={"version": f"20260101T{i:06d}Z"}))
    adopt_version("handraise.likelihood", "gemma3-270m+smollm2-135m", path.stem)
"""


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_writer_killed_mid_write_leaves_only_sound_versions_and_pointer(maps: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for delay in random.Random(35).sample([0.05, 0.1, 0.2, 0.3, 0.45, 0.6], 4):
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(maps)], stdout=subprocess.PIPE, env=env, cwd=root)
        assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(30)
        versions = map_versions("handraise", MAP)
        assert not [v.version for v in versions if v.damaged]
        assert adoption(NAME, MAP).problem == ""
    assert len(versions) > 1  # it wrote, and was killed while writing


def test_a_key_given_twice_makes_a_version_or_the_pointer_damaged(maps: Path) -> None:
    a_version("20260101T000000Z")
    twice = a_version("20260102T000000Z")
    text = twice.read_text()
    twice.write_text(text.replace("{", '{\n "version": "20260101T000000Z",', 1))  # which one counts?
    versions = {v.version: v for v in map_versions("handraise", MAP)}
    assert versions["20260102T000000Z"].damaged == "the key 'version' is given twice"
    with pytest.raises(LabelError):
        adopt_map(None, "handraise", MAP, "20260102T000000Z")
    key = f"{NAME}.{MAP}"
    (maps / POINTER).write_text(f'{{"{key}": "20260101T000000Z", "{key}": "20260101T000000Z"}}')
    found = adoption(NAME, MAP)
    assert found.version is None and found.problem.startswith(f"{POINTER}: the key {key[:20]!r}"[:-1])
    assert found.problem.endswith(" is given twice")
    choice = map_choice("likelihood", "gemma3-270m", ("smollm2-135m",))
    assert "map_fallback" in choice.flags


@pytest.mark.parametrize("value", ["", "  ", "~/maps", "~", "relative/maps", "./maps"])
def test_a_maps_folder_that_is_not_an_absolute_path_is_refused(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", value)
    with pytest.raises(ConfigError) as caught:
        get_settings()
    assert one_line(caught.value).startswith(f"environment: JUDGELAB_MAPS_DIR={value!r}: ")
    with pytest.raises(ValueError):
        save_version(shipped().model_copy(update={"version": "20260101T000000Z"}))
    with pytest.raises(ValueError):
        adopt_version(NAME, MAP, "shipped")
    assert list(tmp_path.iterdir()) == []  # nothing made in the current folder (`.`, `~`, `relative`)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_version_reading_a_feature_the_judge_never_gives_is_damaged(store: Store, maps: Path) -> None:
    path = a_version("20260102T000000Z")
    data = json.loads(path.read_text())
    data["maps"]["relevance"]["features"][0] = "bogus"  # every hand: KeyError 'bogus', and every refit after
    path.write_text(json.dumps(data))
    versions = {v.version: v for v in map_versions("handraise", MAP)}
    assert versions["20260102T000000Z"].damaged == "'relevance' reads 'bogus', not a feature"
    with pytest.raises(LabelError):
        adopt_map(store, "handraise", MAP, "20260102T000000Z")
    (maps / POINTER).write_text(json.dumps({f"{NAME}.{MAP}": "20260102T000000Z"}))
    labelled(store, 40)
    refit = refit_from_labels(store)  # the map in use is the shipped one: the refit works
    assert refit.current is not None and refit.current.version == shipped().version
    save_candidate(refit)
    adopt_map(store, "handraise", MAP, refit.candidate.version)  # its `is:<participant>` features are allowed
