"""`judgelab bench --only 'dashboard.*'`: the running dashboard's memory, and each page's script run (AppTest) and
full load in Chromium over a store with a long history (`harness.history_store`)."""

from __future__ import annotations

import importlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from dashboard import demo
from dashboard.bench.harness import BenchResult, Progress, benchmark, history_store
from dashboard.net import running_dashboard
from dashboard.ui_registry import uis


def _tree_rss_bytes(pid: int) -> int:

    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return int(total)


@benchmark("dashboard.memory")
def bench_dashboard_memory(repeat: int, progress: Progress) -> BenchResult:
    """Resident memory of a running dashboard with the bundled model and the embedder loaded."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        return BenchResult(
            name="dashboard.memory",
            description="dashboard RSS",
            skipped="needs Debian's chromium to open a session (apt-get install chromium)",
        )
    from playwright.sync_api import sync_playwright  # optional: playwright, the browser benchmarks only

    folder = tempfile.mkdtemp(prefix="judgelab-bench-")
    env = {"JUDGELAB_PRELOAD": "1", "JUDGELAB_DATABASE_URL": f"sqlite:///{folder}/bench.db", "HF_HUB_OFFLINE": "1"}
    samples: list[float] = []
    try:
        with running_dashboard(env) as server, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            page = browser.new_page()
            page.goto(f"{server.url}/", timeout=60_000)
            page.get_by_text("Local model and embedder loaded").wait_for(timeout=180_000)
            for _ in range(max(repeat, 3)):
                time.sleep(1.0)
                samples.append(_tree_rss_bytes(server.process.pid) / 2**20)
            browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = BenchResult.from_samples(
        "dashboard.memory",
        "RSS of `judgelab dashboard` with the bundled model and the embedder loaded",
        samples,
        unit="MiB",
        target="≤ 1536 MiB (1.5 GiB)",
    )
    result.met = result.median is not None and result.median <= 1536
    return result


BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# -- the dashboard's pages with a long history --------------------------------------------------------
PAGE_PATHS = {  # module under pages/ → its URL path: the workbench's, each mechanism's (in the app's order), replay
    "models": "models",
    "runs": "runs",
    **{Path(u.page).stem: u.url_path for u in uis() if u.page.startswith("pages/")},
    "replay": "replay",
}


def _page_app(page: str) -> None:
    """What dashboard/app.py runs around a page (the demo switch, off here), for AppTest."""

    on = demo.render_switch()
    demo.run_page(importlib.import_module(f"pages.{page}").render, page, on)


@benchmark("dashboard.page_script")
def bench_page_script(repeat: int, progress: Progress) -> BenchResult:
    """Each page's script run (AppTest, a new session each time, the read caches cleared) over a store with
    10 000 runs and their events and calls."""
    import streamlit as st  # heavy: streamlit, the page benchmarks only
    from streamlit.logger import set_log_level  # heavy: streamlit, the page benchmarks only
    from streamlit.testing.v1 import AppTest  # heavy: streamlit, the page benchmarks only

    set_log_level("error")  # AppTest runs bare: its "no runtime" warnings would bury the figures
    folder = Path(tempfile.mkdtemp(prefix="judgelab-bench-"))
    saved = {k: os.environ.get(k) for k in ("JUDGELAB_DATABASE_URL", "JUDGELAB_DEMO")}
    try:
        started = time.perf_counter()
        url, counts = history_store(folder)
        built = time.perf_counter() - started
        os.environ["JUDGELAB_DATABASE_URL"] = url
        os.environ.pop("JUDGELAB_DEMO", None)
        per_page: dict[str, float] = {}
        cold: dict[str, float] = {}
        for page in PAGE_PATHS:
            if progress:
                progress(f"   {page}")
            samples = []
            for i in range(repeat + 1):  # the first run of a page imports what it needs: reported apart
                st.cache_data.clear()
                at = AppTest.from_function(_page_app, args=(page,), default_timeout=120)
                t0 = time.perf_counter()
                at.run()
                elapsed = time.perf_counter() - t0
                if at.exception:
                    raise RuntimeError(f"page {page}: {at.exception[0].message}")
                if i == 0:
                    cold[page] = elapsed
                else:
                    samples.append(elapsed)
            per_page[page] = statistics.median(samples)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(folder, ignore_errors=True)
    worst = max(per_page, key=per_page.__getitem__)
    result = BenchResult.from_samples(
        "dashboard.page_script",
        f"script run of each page with {counts['runs']:,} stored runs (median per page; the worst page's is the "
        "headline)",
        [per_page[worst]],
        metrics={
            **{f"{page} median ms": round(v * 1000, 1) for page, v in per_page.items()},
            **{f"{page} first run ms": round(v * 1000, 1) for page, v in cold.items()},
            "stored": f"{counts['runs']:,} runs · {counts['events']:,} events · {counts['llm_calls']:,} calls "
            f"(built in {built:.1f} s)",
            "slowest page": worst,
        },
        target="≤ 300 ms median per page",
    )
    result.met = all(v <= 0.3 for v in per_page.values())
    return result


LOADED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !!document.querySelector('[data-testid="stMain"] h1');
}"""


@benchmark("dashboard.page_load")
def bench_page_load(repeat: int, progress: Progress) -> BenchResult:
    """Each page opened in Chromium (a new tab, a new session): from navigation until the app has drawn the
    page's title and its script run is over, over a store with 10 000 runs."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        return BenchResult(
            name="dashboard.page_load",
            description="page load in Chromium",
            skipped="needs Debian's chromium (apt-get install chromium)",
        )
    from playwright.sync_api import sync_playwright  # optional: playwright, the browser benchmarks only

    folder = Path(tempfile.mkdtemp(prefix="judgelab-bench-"))
    url, counts = history_store(folder)
    env = {"JUDGELAB_DATABASE_URL": url, "HF_HUB_OFFLINE": "1", "JUDGELAB_DEMO": None}
    per_page: dict[str, float] = {}
    cold: dict[str, float] = {}
    try:
        with running_dashboard(env) as server, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            for page_name, path in PAGE_PATHS.items():
                if progress:
                    progress(f"   {path}")
                samples = []
                for i in range(repeat + 1):  # the first load of a page warms the server's imports and caches
                    tab = context.new_page()
                    t0 = time.perf_counter()
                    tab.goto(f"{server.url}/{path}", timeout=60_000)
                    tab.wait_for_function(LOADED_JS, timeout=120_000, polling=20)
                    elapsed = time.perf_counter() - t0
                    tab.close()
                    if i == 0:
                        cold[page_name] = elapsed
                    else:
                        samples.append(elapsed)
                per_page[page_name] = statistics.median(samples)
            browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    worst = max(per_page, key=per_page.__getitem__)
    result = BenchResult.from_samples(
        "dashboard.page_load",
        f"full page load in Chromium with {counts['runs']:,} stored runs (median per page; the worst page's is "
        "the headline)",
        [per_page[worst]],
        metrics={
            **{f"{PAGE_PATHS[p]} median s": round(v, 3) for p, v in per_page.items()},
            **{f"{PAGE_PATHS[p]} first load s": round(v, 3) for p, v in cold.items()},
            "slowest page": PAGE_PATHS[worst],
        },
        target="≤ 1.5 s median per page",
    )
    result.met = all(v <= 1.5 for v in per_page.values())
    return result
