"""Runs that outlive the page, in Chromium: a reload during a jury run re-attaches to it, Cancel stops it
(stored `cancelled` with what it did), and a double click on Run starts one run. The jurors are an
OpenAI-compatible loopback server that answers every request from its schema after a delay, so a run
lasts a few seconds without the real model."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_browser import fresh_page, serve_dashboard
from tests.fakes.servers import Reply, SchemaServer

pytestmark = [pytest.mark.browser, pytest.mark.server]

DELAY_S = 1.2


class SlowSchemaServer(SchemaServer):
    def default(self, method: str, path: str, body: Any) -> Reply:
        reply = super().default(method, path, body)
        if method == "POST":
            reply.delay_s = DELAY_S
        return reply


@contextlib.contextmanager
def slow_dashboard(tmp: Path) -> Iterator[tuple[str, Path]]:
    """The dashboard on a catalog of one model, the slow loopback server (and a `local` panel of three of it)."""
    server = SlowSchemaServer(lambda path, body, headers: "the agent leaked the password").start()
    catalog = tmp / "catalog.yaml"
    catalog.write_text(
        "models:\n"
        f"  - id: slow-juror\n    backend: openai\n    model: fake\n    base_url: '{server.url}/v1'\n"
        "    needs_key: false\n    max_retries: 0\n    timeout_s: 30\n    concurrency: 8\n"
        "    profile: {name: Slow juror}\n    default_for: ['*']\n"
        "panels:\n  local:\n"
        + "".join(f"    - {{model: slow-juror, role_name: Juror {i}, role_focus: 'look closely'}}\n" for i in range(3)),
        encoding="utf-8",
    )
    try:
        with serve_dashboard(tmp, {"JUDGELAB_CATALOG": str(catalog)}) as (url, db):
            yield url, db
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    with slow_dashboard(tmp_path_factory.mktemp("live")) as (url, db):
        yield url, db


@pytest.fixture
def browser_page(browser: Any) -> Iterator[Any]:
    with fresh_page(browser, viewport={"width": 1400, "height": 1600}) as fresh:
        yield fresh


def _runs(db: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status, error FROM runs WHERE kind = 'jury.run' ORDER BY started_at").fetchall()


def _event_types(db: Path, run_id: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT type FROM events WHERE run_id = ? ORDER BY seq", (run_id,))]


def _open_jury(page: Any, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url + "/jury", timeout=60_000)
    expect(page.get_by_role("heading", name="⚖️ Jury")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("button", name="Run the jury")).to_be_enabled(timeout=30_000)


def _wait_ended(db: Path, run_id: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        status = next(s for i, s, _ in _runs(db) if i == run_id)
        if status != "running" or time.monotonic() > deadline:
            return status
        time.sleep(0.3)


def test_a_reload_during_a_jury_run_re_attaches_to_it(served: tuple[str, Path], browser_page: Any) -> None:
    from playwright.sync_api import expect

    url, db = served
    page = browser_page
    _open_jury(page, url)
    before = len(_runs(db))
    page.get_by_role("button", name="Run the jury").click()
    expect(page.get_by_test_id("stProgress")).to_be_visible(timeout=30_000)
    expect(page).to_have_url(re.compile(r"[?&]run=jury-"), timeout=10_000)
    run_id = re.search(r"run=([\w-]+)", page.url).group(1)  # type: ignore[union-attr]
    assert len(_runs(db)) == before + 1
    page.reload()
    # The same run, still live: its progress, its id, its Run button disabled; no new run.
    expect(page.get_by_test_id("stProgress")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(run_id).first).to_be_visible()
    expect(page.get_by_role("button", name="Run the jury")).to_be_disabled()
    # It goes on to its end on the reloaded page, which stops refreshing then.
    expect(page.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible(timeout=120_000)
    expect(page.get_by_test_id("stProgress")).to_have_count(0, timeout=10_000)
    assert _wait_ended(db, run_id) == "finished" and len(_runs(db)) == before + 1
    # A second tab with the same address shows the same (finished) run.
    second = page.context.new_page()
    second.goto(page.url, timeout=60_000)
    expect(second.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible(timeout=60_000)


def test_cancel_stops_the_run_and_it_is_stored_cancelled(served: tuple[str, Path], browser_page: Any) -> None:
    from playwright.sync_api import expect

    url, db = served
    page = browser_page
    _open_jury(page, url)
    page.get_by_role("button", name="Run the jury").click()
    expect(page.get_by_text("Phase 1 — independent evaluations", exact=True)).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Cancel")).to_be_enabled(timeout=30_000)
    run_id = re.search(r"run=([\w-]+)", page.url).group(1)  # type: ignore[union-attr]
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text(re.compile("^Cancelled"))).to_be_visible(timeout=60_000)
    assert _wait_ended(db, run_id) == "cancelled"
    types = _event_types(db, run_id)
    assert types[0] == "run_started" and types[-1] == "run_cancelled" and "jury_finished" not in types
    expect(page.get_by_role("button", name="Run the jury")).to_be_enabled()


def test_a_double_click_on_run_starts_one_run(served: tuple[str, Path], browser_page: Any) -> None:
    from playwright.sync_api import expect

    url, db = served
    page = browser_page
    _open_jury(page, url)
    before = len(_runs(db))
    page.get_by_role("button", name="Run the jury").dblclick()
    expect(page.get_by_test_id("stProgress")).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1500)
    runs = _runs(db)[before:]
    assert len(runs) == 1, runs
    assert _wait_ended(db, runs[0][0]) == "finished"
    assert len(_runs(db)) == before + 1
