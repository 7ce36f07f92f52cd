"""The database file deleted under a running dashboard (issue 35, point 7): the Labels page's import says so in one
line and claims nothing, every page says so at its top, and a background run fails with the reason — at its start
(the registry's one line) or in the middle (its task ends with the reason, and the page watching it says failed);
`labels import` at the CLI says so in one line and exits 1."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from dashboard.background import BackgroundLoop
from dashboard.live_runs import RegistryError, RunRegistry
from engine.store import Store, StoreError
from tests.dashboard.rendered import shown
from tests.dashboard.test_live_runs import jury_start, wait_for

GONE = "was deleted while judgelab was running"


def _db() -> Path:
    return Path(os.environ["JUDGELAB_DATABASE_URL"].removeprefix("sqlite:///"))


def _import_first() -> None:
    import streamlit as st

    from pages.labels import handle_import, render_import

    if not st.session_state.get("imported"):  # once: the page then watches its import run
        st.session_state["imported"] = True
        handle_import("first.jsonl", b'{"mechanism": "director", "item_key": "line1", "label": "ok", "user": "a"}\n')
    render_import()


def _import_second() -> None:
    from dashboard import state as page_state
    from pages.labels import handle_import, render_import

    page_state.store_notice()
    handle_import("second.jsonl", b'{"mechanism": "director", "item_key": "line2", "label": "ok", "user": "a"}\n')
    render_import()


@pytest.mark.timeout(120)
def test_an_import_after_the_file_was_deleted_says_so_and_claims_nothing() -> None:
    from tests.dashboard.rendered import rerun_until, run_ended

    at = AppTest.from_function(_import_first, default_timeout=60).run()
    run_id = at.query_params["import"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    rerun_until(at, lambda: run_ended(run_id), what="the import never ended")  # the page watches its import run
    at.run()
    assert [s.value for s in at.success] == ["first\\.jsonl: 1 imported, 0 already present."]
    os.unlink(_db())
    at = AppTest.from_function(_import_second, default_timeout=60).run()
    assert not at.exception and not at.success
    notice, refused = (shown(e.value) for e in at.error)
    assert GONE in notice and "nothing more can be recorded" in notice and "restart the dashboard" in notice
    assert refused.startswith("Nothing imported: the database") and GONE in refused and "\n" not in refused
    assert "nothing was written" in refused
    assert not _db().exists()
    state.get_store().dispose()


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    bg = BackgroundLoop()
    yield bg
    bg.stop()


@pytest.mark.timeout(120)
def test_a_background_run_fails_with_the_reason_at_its_start_and_in_its_middle(
    loop: BackgroundLoop, tmp_path: Path
) -> None:
    path = tmp_path / "running.db"
    store = Store(f"sqlite:///{path}")
    registry = RunRegistry(loop, store, progress_every_s=0.0, reap_every_s=None, hard_cancel_after_s=30)
    try:
        run_id = jury_start(registry, store, delay_s=0.2)
        wait_for(lambda: len(store.events(run_id)) > 0)
        os.unlink(path)
        started = time.monotonic()
        with pytest.raises(StoreError) as failed:
            registry.wait(run_id, timeout=60)
        assert time.monotonic() - started < 30  # it ends, with the reason; it does not hang or die silently
        assert GONE in str(failed.value) and "nothing was written" in str(failed.value)
        live = registry.get(run_id)
        assert live is not None and live.done and isinstance(live.future.exception(), StoreError)
        with pytest.raises(RegistryError) as refused:  # a new run cannot even start
            jury_start(registry, store, delay_s=0.0)
        message = str(refused.value)
        assert message.startswith("the jury.run run could not start: the database") and GONE in message
        assert "StoreError" not in message and "\n" not in message
        assert not path.exists()
    finally:
        registry.close()
        store.dispose()


def _watch(run_id: str) -> None:
    from dashboard.watch import Collected, watch_run

    watch_run(run_id, Collected, lambda view, live: None, key="w")


@pytest.mark.timeout(120)
def test_the_page_watching_a_run_says_it_failed_when_its_end_could_not_be_stored() -> None:
    store, registry = state.get_store(), state.get_registry()
    run_id = jury_start(registry, store, delay_s=0.2)
    wait_for(lambda: len(store.events(run_id)) > 0)
    os.unlink(_db())
    with pytest.raises(StoreError):
        registry.wait(run_id, timeout=60)
    stored = store.get_run(run_id)
    assert stored is not None and stored.status == "running"  # what the deleted file still says
    at = AppTest.from_function(_watch, args=(run_id,), default_timeout=60).run()
    assert not at.exception
    (error,) = (shown(e.value) for e in at.error)
    assert error.startswith("Run failed — the database") and GONE in error
    assert not at.get("progress")  # no progress bar of a run that is no longer going


@pytest.mark.timeout(60)
def test_the_cli_import_says_so_in_one_line_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from dashboard.cli import app
    from dashboard.commands import labels as labels_command

    path = tmp_path / "cli.db"
    store = Store(f"sqlite:///{path}")
    monkeypatch.setattr(labels_command, "_store", lambda: store)  # the command's store, its file gone meanwhile
    os.unlink(path)
    marks = tmp_path / "marks.jsonl"
    marks.write_text('{"mechanism": "director", "item_key": "line1", "label": "ok", "user": "a"}\n')
    started = time.monotonic()
    result = CliRunner().invoke(app, ["labels", "import", str(marks)])
    assert time.monotonic() - started < 30
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and GONE in lines[0] and "nothing was imported" in lines[0], result.output
    assert "label(s) imported" not in result.output  # no claim of success
    assert not path.exists()
    store.dispose()
