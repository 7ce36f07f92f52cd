"""Playwright drives Debian's Chromium against `judgelab dashboard` on 127.0.0.1: open the Models page,
send a prompt to the bundled model, see the answer; then find the run on the Runs page."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard.bench import pages as bench_pages
from tests.fakes.dashboard import running_dashboard

pytestmark = [pytest.mark.browser, pytest.mark.server]

# The tests' Chromium runs the pages' JavaScript without V8's optimising compilers (TurboFan, Maglev): a test's
# page lives seconds, too short for optimised code to pay back its compiling on background threads (measured on 2
# cores: the demo tour 36 → 33 s of CPU, ~10 %; page loads ~14 % less in the renderer). The interpreter and the
# baseline compiler run the same code. `judgelab bench` keeps Chromium's defaults (its figures are a user's).
BROWSER_ARGS = [*bench_pages.BROWSER_ARGS, "--js-flags=--no-opt --no-maglev"]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextlib.contextmanager
def module_browser() -> Iterator[Any]:
    """One Chromium (and one Playwright driver) for the tests of a module that share a dashboard, each test on a
    fresh context (its own cookies, storage and cache, as in a new browser): a Chromium and its driver take ~1.2 s
    of CPU to start and stop. Only for modules whose tests all share a server fixture (tests/conftest.py keeps them
    together on one worker, one after the other): a sync Playwright left running makes any other test's
    `asyncio.run` in the same thread fail."""
    from playwright.sync_api import sync_playwright

    _require_browser()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def fresh_page(browser: Any, **context: Any) -> Iterator[Any]:
    """A page on a new context of `browser`, closed afterwards."""
    made = browser.new_context(**context)
    try:
        yield made.new_page()
    finally:
        made.close()


def _require_browser() -> None:
    if Path(CHROMIUM).exists():
        return
    message = "Debian's chromium is not installed (apt-get install chromium)"
    if os.environ.get("JUDGELAB_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def serve_dashboard(tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """`judgelab dashboard` on a free loopback port with its own SQLite file; stopped afterwards."""
    _require_browser()
    db = tmp_path / "e2e.db"
    with running_dashboard(
        tmp_path, {"JUDGELAB_DATABASE_URL": f"sqlite:///{db}", "HF_HUB_OFFLINE": "1"} | (env or {})
    ) as port:
        yield f"http://127.0.0.1:{port}", db


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with serve_dashboard(tmp_path) as served:
        yield served


def test_models_page_answers_a_prompt_with_the_bundled_model(dashboard: tuple[str, Path], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, db = dashboard
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, timeout=60_000)
        expect(page.get_by_role("heading", name="🧠 Models")).to_be_visible(timeout=60_000)
        expect(page.get_by_role("combobox", name="Model")).to_have_value(re.compile("SmolLM2 135M"), timeout=30_000)
        prompt = page.get_by_label("Prompt", exact=True)
        prompt.fill("Explain what a jury does.")
        page.get_by_label("Max tokens").fill("64")
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_text("Completion tokens")).to_be_visible(timeout=180_000)
        page.screenshot(path=str(tmp_path / "models.png"), full_page=True)
        answer = page.get_by_test_id("stChatMessage").last.inner_text()
        browser.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT r.kind, r.status, c.raw_text, c.error FROM runs r JOIN llm_calls c ON c.run_id = r.id"
        ).fetchall()
    assert len(rows) == 1
    kind, status, raw_text, error = rows[0]
    assert (kind, status, error) == ("models.prompt", "finished", None)
    # Markdown renders list markers, so compare the words of the first line.
    first_line = re.sub(r"^\W*\d*[.)]?\s*", "", raw_text.strip().splitlines()[0])
    assert first_line[:30] in answer


PAGES = {
    "models": "🧠 Models",
    "runs": "🗂️ Runs",
    "labels": "🏷️ Labels",
    "handraise": "🙋 Hand raise",
    "skip": "⏱️ Skip cache",
    "director": "🎬 Director lab",
    "confidence": "🎚️ Confidence lab",
    "jury": "⚖️ Jury",
    "replay": "⏯️ Replay",
}


def test_every_page_opens_directly_by_its_url(dashboard: tuple[str, Path], tmp_path: Path) -> None:
    """A bookmark or a link to /models (or any page) opens that page — no "Page not found" — and "/" lands on
    Models, whose URL it then shows."""
    from playwright.sync_api import expect, sync_playwright

    url, _ = dashboard
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        for path, title in PAGES.items():
            page = browser.new_page(viewport={"width": 1400, "height": 1000})  # a new session, as a bookmark is
            page.goto(f"{url}/{path}", timeout=60_000)
            expect(page.get_by_role("heading", name=title)).to_be_visible(timeout=60_000)
            expect(page.get_by_text("Page not found")).to_have_count(0)
            assert page.url.rstrip("/").endswith(f"/{path}")
            page.close()
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, timeout=60_000)
        expect(page.get_by_role("heading", name="🧠 Models")).to_be_visible(timeout=60_000)
        expect(page).to_have_url(re.compile(r"/models$"), timeout=30_000)
        page.screenshot(path=str(tmp_path / "root.png"), full_page=True)
        browser.close()
