"""The HTML report of every kind of hostile run, opened from file:// in Debian's Chromium with no network: its
charts draw (plotly.js is inside the file), nothing is requested but the file itself, no request reaches
the loopback listener the hostile texts point at, and no element, handler, heading, link or bold text
from the run exists in the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.report import figures_for, report_of
from engine.exports import load_run
from engine.store import Store
from tests.e2e.test_browser import BROWSER_ARGS, CHROMIUM, _require_browser
from tests.e2e.test_hostile_text import CHECK_DOM, Listener
from tests.fakes.hostile import store_hostile_runs

pytestmark = pytest.mark.browser


def test_reports_open_offline_and_inject_nothing(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    _require_browser()
    listener = Listener()
    store = Store(f"sqlite:///{tmp_path / 'report.db'}")
    try:
        runs = store_hostile_runs(store, listener.port)
        files = {}
        for kind, run_id in runs.items():
            record = load_run(store, run_id)
            path = tmp_path / f"{kind}.html"
            path.write_text(report_of(record), encoding="utf-8")
            files[kind] = (path, len(figures_for(record)))
        leak = f"http://127.0.0.1:{listener.port}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            context = browser.new_context(offline=True)
            requests: list[str] = []
            problems: list[str] = []

            def gate(route: object) -> None:
                url = route.request.url  # type: ignore[attr-defined]
                requests.append(url)
                if url.startswith("file://"):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    route.abort()  # type: ignore[attr-defined]

            context.route("**/*", gate)
            page = context.new_page()
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            for kind, (path, figures) in files.items():
                requests.clear()
                page.goto(path.as_uri())
                if figures:
                    page.wait_for_function(
                        f"document.querySelectorAll('div.figure .main-svg').length >= {figures}", timeout=30_000
                    )
                page.wait_for_timeout(300)
                assert requests == [path.as_uri()], (kind, requests)
                assert page.evaluate(CHECK_DOM, leak) == [], kind
                assert page.locator("h1").inner_text().startswith(kind)
                outside_charts = (
                    "[...document.querySelectorAll('img, a, iframe, svg, object, embed, link, form')]"
                    ".filter(e => !e.closest('div.figure, #js-plotly-tester')).length"
                )  # plotly's own
                assert page.evaluate(outside_charts) == 0, kind
                assert page.evaluate("typeof window.Plotly") == ("object" if figures else "undefined")
                assert not problems, (kind, problems)
            browser.close()
        assert listener.hits == []
    finally:
        store.dispose()
        listener.stop()


def test_reports_fit_the_window_at_1440_and_900_px(tmp_path: Path) -> None:
    """E1, measured: the page of a run report and of an experiment export is no wider than the window (a wide
    table scrolls inside itself), and every chart is drawn within it."""
    from playwright.sync_api import sync_playwright

    from dashboard.report import experiment_report
    from tests.dashboard.test_export_colors import shown_experiment
    from tests.fakes.runs import stored_conversation, stored_jury

    _require_browser()
    store = Store(f"sqlite:///{tmp_path / 'fit.db'}")
    try:
        files = {
            "jury": run_report_file(store, stored_jury(store)[0], tmp_path / "jury.html"),
            "conversation": run_report_file(store, stored_conversation(store)[0], tmp_path / "conversation.html"),
        }
        wide = shown_experiment()
        wide["rows"] = [r | {f"a_long_parameter_name_{i}": 0.5 for i in range(12)} for r in wide["rows"]]
        (tmp_path / "experiment.html").write_text(experiment_report(wide), encoding="utf-8")
        files["experiment"] = tmp_path / "experiment.html"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            for width in (1440, 900):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, path in files.items():
                    page.goto(path.as_uri())
                    page.wait_for_function("document.querySelectorAll('div.figure .main-svg').length > 0")
                    page.wait_for_timeout(300)
                    assert page.evaluate("document.documentElement.scrollWidth") <= width, (name, width)
                    right = page.evaluate(
                        "Math.max(...[...document.querySelectorAll('div.figure')]"
                        ".map(e => e.getBoundingClientRect().right))"
                    )
                    assert right <= width, (name, width, right)
                page.close()
            browser.close()
    finally:
        store.dispose()


def run_report_file(store: Store, run_id: str, path: Path) -> Path:
    path.write_text(report_of(load_run(store, run_id)), encoding="utf-8")
    return path
