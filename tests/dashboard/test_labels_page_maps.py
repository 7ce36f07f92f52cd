"""Issue 35, points 1 and 2 on the Labels page (AppTest, a real SQLite store, the scripted labeller's recorded hand
labels): a damaged map version is listed as damaged with why, never in use and never offered to restore; a damaged
`in_use.json` is said above the versions (the shipped map in use); a label whose map id is a path is never read as
a map id, and the refit it blocks says so in one line — no traceback, no machine path anywhere on the page."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from engine import judgemaps
from engine.handraise.scripted_labeller import label_items, load_recording
from engine.judgemaps import CALIBRATION_DIR, POINTER, load_calibration, save_version
from engine.labels import add_label, labelable_items
from tests.dashboard.rendered import shown

pytestmark = pytest.mark.timeout(180)
NAME = "handraise.likelihood"
MAP = "gemma3-270m+smollm2-135m"


def _labels_page() -> None:
    from pages import labels

    labels.render()


def _version(stamp: str) -> Path:
    cal = load_calibration(NAME, MAP, CALIBRATION_DIR)
    assert cal is not None
    return save_version(cal.model_copy(update={"version": stamp}))


def _page_text(at: Any) -> str:
    """Everything the page shows as text: markdown, captions, notices and the tables' cells."""
    parts = [
        shown(str(e.value))
        for kind in ("markdown", "caption", "error", "warning", "success", "info")
        for e in at.get(kind)
    ]
    parts += [frame.value.to_csv() for frame in at.dataframe]
    parts += [str(e.label) for e in at.expander]
    return "\n".join(parts)


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    maps = tmp_path / "maps"
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(maps))
    monkeypatch.setenv("JUDGELAB_USER", "page-tester")
    store = state.get_store()
    run = store.get_run(load_recording(store))
    assert run is not None
    good = label_items(store, labelable_items(store, run)[:12], user="page-tester")
    add_label(  # the newest label: its map id walks out of the maps folder
        store,
        mechanism="handraise",
        run_id=good[0].run_id,
        item_key="t3/coder",
        label="speak",
        user="page-tester",
        context={**good[0].context, "map_id": "x/../../escaped"},
    )
    return maps


def _open(maps: Path) -> Any:
    at = AppTest.from_function(_labels_page, default_timeout=120).run()
    at.selectbox(key="labels.a.mechanism").set_value("handraise").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_damaged_version_is_listed_as_damaged_never_offered(page: Path, tmp_path: Path) -> None:
    _version("20260101T000000Z")
    damaged = _version("20260102T000000Z")
    damaged.write_text(damaged.read_text()[:300])  # a half-written version
    started = time.perf_counter()
    at = _open(page)
    assert time.perf_counter() - started < 60
    (table,) = [f.value for f in at.dataframe if "what it learnt from" in f.value.columns]
    rows = {r["version"]: r for r in table.to_dict("records")}
    assert rows["20260102T000000Z"]["what it learnt from"].startswith("damaged: ")
    assert not rows["20260102T000000Z"]["in use"] and rows["shipped"]["in use"]
    assert any("1 damaged" in e.label for e in at.expander), [e.label for e in at.expander]
    offered = at.selectbox(key="labels.v.pick").options
    assert "20260102T000000Z" not in offered and "20260101T000000Z" in offered
    text = _page_text(at)
    assert MAP in text and str(tmp_path) not in text and "Traceback" not in text and "escaped" not in text


def test_a_damaged_pointer_is_said_and_the_shipped_map_is_in_use(page: Path, tmp_path: Path) -> None:
    _version("20260101T000000Z")
    (page / POINTER).write_text('{"handraise.likelihood.gemma3-270m+smollm2-135m": "../../../etc/passwd"}')
    at = _open(page)
    (warning,) = [shown(w.value) for w in at.warning if "cannot be read" in w.value]
    assert "in_use.json" in warning and "the judge reads the shipped map" in warning and str(tmp_path) not in warning
    (table,) = [f.value for f in at.dataframe if "what it learnt from" in f.value.columns]
    assert [r["version"] for r in table.to_dict("records") if r["in use"]] == ["shipped"]
    at.selectbox(key="labels.v.pick").set_value("20260101T000000Z")
    at.button(key="labels.v.restore").click().run()  # adopting again repairs the pointer
    assert not at.exception
    assert not [w for w in at.warning if "cannot be read" in w.value]


def test_a_damaged_pointer_is_repaired_by_choosing_the_shipped_map(page: Path) -> None:
    """With no version to restore, "Use the shipped map" rewrites the pointer: the warning goes, and the pointer
    names no adopted version."""
    page.mkdir(parents=True, exist_ok=True)
    (page / POINTER).write_text('{"handraise.likelihood.gemma3-270m+smollm2-135m": "2026')  # cut short
    at = _open(page)
    assert [w for w in at.warning if "cannot be read" in w.value]
    at.button(key="labels.v.shipped").click().run()
    assert not at.exception and not [w for w in at.warning if "cannot be read" in w.value]
    assert "the shipped map" in " ".join(shown(s.value) for s in at.success)
    pointer = page / POINTER  # no adopted version left: the pointer holds none, or is gone
    assert not pointer.exists() or json.loads(pointer.read_text()) == {}


def test_a_refit_blocked_by_a_label_naming_a_path_says_which_in_one_line(page: Path, tmp_path: Path) -> None:
    at = _open(page)
    at.button(key="labels.r.go").click().run()
    assert not at.exception
    (error,) = [shown(e.value) for e in at.error]
    assert (
        error.startswith("No refit: label ")
        and "(t3/coder): context.map_id: 'x/../../escaped' is not a map id" in error
    )
    assert "\n" not in error and str(tmp_path) not in _page_text(at)
    assert not page.exists() or not any(page.rglob("*.json"))


def _conversation_page() -> None:
    from pages import handraise as conversation

    conversation.render()


def test_the_conversation_caption_says_the_adopted_map_cannot_be_used(page: Path, tmp_path: Path) -> None:
    damaged = _version("20260101T000000Z")
    (page / POINTER).write_text(f'{{"{NAME}.{MAP}": "20260101T000000Z"}}')
    damaged.write_text(damaged.read_text()[:300])  # adopted, then half-written
    at = AppTest.from_function(_conversation_page, default_timeout=120)
    judge, *partners = MAP.split("+")
    at.session_state["conv.judge_model"] = judge
    at.run()
    at.multiselect(key="conv.ensemble").set_value(partners).run()
    assert not at.exception
    (caption,) = [shown(c.value) for c in at.caption if "Map in use:" in c.value]
    assert "the shipped one — the adopted map cannot be used (in_use.json: " in caption and "damaged" in caption
    assert str(tmp_path) not in caption


def test_a_hostile_feature_and_a_damaged_shipped_map_are_said_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    monkeypatch.setenv("JUDGELAB_USER", "page-tester")
    _version("20260101T000000Z")
    store = state.get_store()
    run = store.get_run(load_recording(store))
    assert run is not None
    good = label_items(store, labelable_items(store, run)[:12], user="page-tester")
    add_label(  # the newest label: a feature too large for a float (a traceback before)
        store,
        mechanism="handraise",
        run_id=good[0].run_id,
        item_key="t3/coder",
        label="speak",
        user="page-tester",
        context={**good[0].context, "features": {**good[0].context["features"], "pmi_rel": 10**400}},
    )
    shutil.copytree(CALIBRATION_DIR, tmp_path / "calibration")
    monkeypatch.setattr(judgemaps, "CALIBRATION_DIR", tmp_path / "calibration")
    shipped = tmp_path / "calibration" / f"{NAME}.{MAP}.json"
    shipped.write_text(shipped.read_text()[:200])  # the shipped map damaged
    at = _open(tmp_path / "maps")
    (table,) = [f.value for f in at.dataframe if "what it learnt from" in f.value.columns]
    rows = {r["version"]: r for r in table.to_dict("records")}
    assert rows["shipped"]["what it learnt from"].startswith("damaged: ") and not rows["shipped"]["in use"]
    assert at.selectbox(key="labels.v.pick").options == ["20260101T000000Z"]  # never the damaged shipped map
    at.button(key="labels.r.go").click().run()
    assert not at.exception
    (error,) = [shown(e.value) for e in at.error]
    assert error.startswith("No refit: label ") and "(t3/coder): context.features.pmi_rel: " in error
    assert "\n" not in error and str(tmp_path) not in _page_text(at) and "Traceback" not in _page_text(at)
