"""#38 (5): honest progress, read in Chromium on a busy machine (a CPU burner spins whenever the rest of the machine
leaves a core idle; under make test the other workers keep it busy) — on the jury, the duo, the experiment and the
skip pages. Every progress line shown is sampled until the run ends, then held against what the run stored: the total
counts only steps that ran, an ETA is never below the steps known to remain, an experiment's recording phase counts
recorded items, the skip simulation counts its trade-off sweep. The models are an OpenAI-compatible loopback server
that answers after a delay (tests/e2e/test_live_runs.py)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_live_runs import browser_page, slow_dashboard  # noqa: F401 — browser_page: a fixture

pytestmark = [pytest.mark.browser, pytest.mark.server]

Sample = tuple[float, str]
COUNT = re.compile(r"^(\d+) / (\d+)")
LEFT = re.compile(r"about (\d+) (s|min) left")


def _runnable() -> int:
    """How many threads are running or ready to run now, in the whole machine (/proc/stat's procs_running)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def busy_cpu(n: int = 1, every_s: float = 0.5) -> Iterator[None]:
    """A busy machine: `n` processes spinning at full speed, paused (SIGSTOP) while the rest of the machine already
    wants every core but half of one — under `make test` the other workers do, and a burner then only took CPU from
    them — and spinning again as soon as it leaves a core idle. Stopped afterwards."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    cores = os.cpu_count() or 1
    stop = threading.Event()

    def govern() -> None:
        paused = False
        while not stop.is_set():
            samples = []
            for _ in range(10):  # the demand of the rest over `every_s`: runnable threads, less this reader and
                samples.append(_runnable() - 1 - (0 if paused else n))  # the burners while they spin
                if stop.wait(every_s / 10):
                    return
            want_paused = sum(samples) / len(samples) >= cores - 0.5
            if want_paused != paused:
                for p in burners:
                    p.send_signal(signal.SIGSTOP if want_paused else signal.SIGCONT)
                paused = want_paused

    governor = threading.Thread(target=govern, daemon=True)
    governor.start()
    try:
        yield
    finally:
        stop.set()
        governor.join(timeout=5)
        for p in burners:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    tmp = tmp_path_factory.mktemp("busy")
    with slow_dashboard(tmp) as (url, db):
        yield url, db, tmp


@pytest.fixture
def page(request: pytest.FixtureRequest) -> Any:
    """A fresh page of the module's Chromium (the fixtures of tests/e2e/test_live_runs.py, on this module's server)."""
    return request.getfixturevalue("browser_page")


def _sample(page: Any, timeout_s: float = 240) -> list[Sample]:
    """Every progress line the page shows, with the time, from the first bar until the bar is gone."""
    from playwright.sync_api import expect

    bar = page.get_by_test_id("stProgress")
    expect(bar.first).to_be_visible(timeout=60_000)
    samples: list[Sample] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if bar.count() == 0:
                break
            text = bar.first.inner_text(timeout=2_000).strip()
        except Exception:  # the bar went away between the count and the read
            continue
        if text and (not samples or samples[-1][1] != text):
            samples.append((time.monotonic(), text))
        time.sleep(0.25)
    assert samples, "no progress line was shown"
    return samples


def _newest_run(db: Path, kind: str) -> tuple[str, str]:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT id, status FROM runs WHERE kind = ? ORDER BY started_at DESC", (kind,)).fetchone()
    assert row is not None
    return row[0], row[1]


def _wait_finished(db: Path, kind: str, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run_id, status = _newest_run(db, kind)
        if status != "running":
            assert status == "finished", status
            return run_id
        time.sleep(0.5)
    raise AssertionError(f"the {kind} run did not finish")


def _press_and_sample(page: Any, button: Any, db: Path, kind: str, timeout_s: float = 240) -> tuple[list[Sample], str]:
    """Press `button` (a locator), read every progress line while a core is busy, and wait for the `kind` run to
    finish: (the lines, its run id)."""
    button.click(timeout=60_000)
    with busy_cpu():
        samples = _sample(page, timeout_s)
    return samples, _wait_finished(db, kind, timeout_s)


def _count(db: Path, run_id: str, *types: str) -> int:
    with sqlite3.connect(db) as conn:
        marks = ",".join("?" * len(types))
        sql = f"SELECT COUNT(*) FROM events WHERE run_id = ? AND type IN ({marks})"
        return int(conn.execute(sql, (run_id, *types)).fetchone()[0])


def _counts(samples: list[Sample]) -> list[tuple[int, int]]:
    return [c for _, c in _with_counts(samples)]


def _with_counts(samples: list[Sample]) -> list[tuple[str, tuple[int, int]]]:
    """Each line that opens with 'done / total', with those two numbers."""
    return [(text, (int(m.group(1)), int(m.group(2)))) for _, text in samples if (m := COUNT.match(text))]


def _seconds_left(text: str) -> float | None:
    m = LEFT.search(text)
    return None if m is None else float(m.group(1)) * (60 if m.group(2) == "min" else 1)


def test_the_jury_counts_only_the_steps_that_run(served: tuple[str, Path, Path], page: Any) -> None:
    url, db, _ = served
    page.goto(url + "/jury", timeout=60_000)
    samples, run_id = _press_and_sample(page, page.get_by_role("button", name="Run the jury"), db, "jury.run")
    steps = _count(db, run_id, "juror_evaluation", "juror_statement", "final_judgment")
    counts = _counts(samples)
    assert counts, samples
    assert all(total <= steps for _, total in counts), (counts, steps)  # no phantom round in any total shown
    assert all(done <= total for done, total in counts)


def test_the_duos_eta_never_falls_below_the_turns_left(served: tuple[str, Path, Path], page: Any) -> None:
    from playwright.sync_api import expect

    url, db, _ = served
    page.goto(url + "/director", timeout=60_000)
    page.get_by_role("tab", name="Duo simulator").click(timeout=60_000)
    turns = page.get_by_label("Turns")
    turns.fill("4")
    turns.press("Enter")
    button = page.get_by_role("button", name="Run dialogue")
    expect(button).to_be_enabled(timeout=30_000)
    samples, run_id = _press_and_sample(page, button, db, "director.duo")
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT ts FROM events WHERE run_id = ? AND type = 'director_turn' ORDER BY seq", (run_id,)
        ).fetchall()
    assert len(rows) == 4
    for text, (done, total) in _with_counts(samples):
        left = _seconds_left(text)
        if left is not None and total - done >= 2:  # turns after the one in flight: never "almost none left"
            assert left >= 1, text
        assert "almost done" not in text or total - done <= 1, text


def test_the_experiment_counts_its_recording_first(served: tuple[str, Path, Path], page: Any) -> None:
    from playwright.sync_api import expect

    url, db, tmp = served
    definition = tmp / "jury-small.yaml"
    definition.write_text(
        "name: progress check\nmechanism: jury\ncases: data/benchmarks/jury.jsonl\nlimit: 3\n"
        "base: {panel: local}\nspace:\n  consensus_threshold: [0.67, 1.0]\nmetric: accuracy\n",
        encoding="utf-8",
    )
    page.goto(url + "/experiments", timeout=60_000)
    page.get_by_text("Upload a YAML", exact=True).click(timeout=60_000)
    page.locator("input[type=file]").first.set_input_files(str(definition))
    button = page.get_by_role("button", name="Launch the experiment")
    expect(button).to_be_enabled(timeout=60_000)
    samples, _ = _press_and_sample(page, button, db, "experiment", timeout_s=300)
    recording = [text for _, text in samples if text.startswith("recording:")]
    assert recording, samples  # the recording phase is counted in recorded items…
    for _, text in samples:  # …never "0 / N cells" while items remain to be recorded
        m = re.match(r"^0 / \d+ · (\d+) / (\d+) items recorded", text)
        assert m is None or m.group(1) == m.group(2), text


def test_the_skip_simulation_counts_its_tradeoff_sweep(served: tuple[str, Path, Path], page: Any) -> None:
    url, db, _ = served
    page.goto(url + "/skip", timeout=60_000)
    samples, _ = _press_and_sample(page, page.get_by_role("button", name="Simulate"), db, "skip.simulate")
    sweep = [(text, c) for text, c in _with_counts(samples) if "trade-off sweep" in text]
    assert not sweep or all(done < total for _, (done, total) in sweep), sweep  # the sweep is steps still to run
    assert not any("about 0 s left" in text for _, text in samples if "trade-off sweep" in text), samples


def _idle(page: Any, quiet_s: float = 2.0, timeout_s: float = 90) -> None:
    """Wait until the app has run no script for `quiet_s` (its running indicator gone that long)."""
    running = page.get_by_test_id("stStatusWidget")
    deadline, quiet_since = time.monotonic() + timeout_s, time.monotonic()
    while time.monotonic() < deadline:
        if running.count() and running.first.is_visible():
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError("the page never went quiet")


def _slider_value(page: Any, label: str) -> float:
    slider = page.get_by_role("slider", name=label).first
    return float(slider.input_value())  # an <input type="range">


def test_sliders_pressed_on_a_busy_machine_never_empty_or_change_a_box(
    served: tuple[str, Path, Path], page: Any
) -> None:
    """#40 (4): the Confidence lab's form under load. An example put into the Live tab's boxes, then slider after
    slider pressed while each rerun is still being drawn: every box keeps the example, every slider the value it
    was moved to, and a later rerun changes none of them (the form's values live in the page's own state, each
    widget drawn from it: `dashboard.formstate`)."""
    from engine.confidence.demo import CONFIDENCE_EXAMPLES

    url, _db, _tmp = served
    wrong, right = CONFIDENCE_EXAMPLES["wrong"], CONFIDENCE_EXAMPLES["right"]
    with busy_cpu():
        # A slider pressed while the page's first run is still being drawn (the demo tour's glitch: the Query box's
        # default never reached the browser, and it came back empty)
        page.goto(f"{url}/confidence", timeout=120_000)
        page.get_by_role("slider", name="Tool success rate").first.press("Home", timeout=90_000)
        page.get_by_role("slider", name="Tool success rate").first.press("ArrowRight")
        _idle(page)
        page.get_by_role("tab", name="Live").click()
        assert page.get_by_label("Query", exact=True).input_value() == right["query"]
        assert page.get_by_label("Answer", exact=True).input_value() == right["answer"]
        # an example put in the boxes, then slider after slider pressed while its rerun is still being drawn
        page.get_by_role("button", name="Example: wrong answer").click()
        page.get_by_role("tab", name="Factors").click()
        labels = ("LLM self-confidence", "Query coverage", "Source agreement")
        for label in labels:
            page.get_by_role("slider", name=label).first.focus()
            for _ in range(6):
                page.keyboard.press("ArrowRight")
                time.sleep(0.05)
        _idle(page)
        moved = {label: _slider_value(page, label) for label in labels}
        page.get_by_role("tab", name="Live").click()
        boxes = {
            "Query": page.get_by_label("Query", exact=True).input_value(),
            "Answer": page.get_by_label("Answer", exact=True).input_value(),
            "Sources": page.get_by_label("Sources (one per line)", exact=True).input_value(),
        }
        assert boxes == {"Query": wrong["query"], "Answer": wrong["answer"], "Sources": ""}
        # one more rerun (a toggle on the Factors tab): nothing the person set moves
        page.get_by_role("tab", name="Factors").click()
        page.get_by_text("Search step", exact=True).click()
        _idle(page)
        assert {label: _slider_value(page, label) for label in labels} == moved
        page.get_by_role("tab", name="Live").click()
        assert page.get_by_label("Query", exact=True).input_value() == wrong["query"]
        assert page.get_by_label("Answer", exact=True).input_value() == wrong["answer"]
    defaults = {"LLM self-confidence": 0.5, "Query coverage": 0.0, "Source agreement": 0.0}
    assert all(moved[label] > defaults[label] for label in moved), moved  # the presses moved every slider
