"""Every main flow of the dashboard in Debian's Chromium, as a new user clicks through it: Conversation (type,
cards, approve one, the streamed answer in the chat, What-if), Jury live then its Replay, Director check then
batch retune, the Confidence sliders, a Skip simulation, and Runs (search, export, download, read the file).
Then the whole tour in demo mode with no model that could load.

The live flows' models are an OpenAI-compatible loopback server (tests/fakes/servers.py) that answers every
request from its schema at once, so the flows take seconds; the bundled model's own browser test is in
test_browser.py. Each step leaves a full-page screenshot in the test's folder (JUDGELAB_E2E_SHOTS=DIR keeps
them there instead)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_browser import fresh_page, serve_dashboard
from tests.fakes.servers import SchemaServer

pytestmark = [pytest.mark.browser, pytest.mark.server]

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "Start with the config loader: print the keys it read before the lookup."
REASON = "It is about the config"
DEMO_MANIFEST = json.loads((ROOT / "data" / "demo" / "manifest.json").read_text(encoding="utf-8"))


def _text(path: str, body: dict[str, Any], headers: dict[str, str]) -> str:
    """Free text (an answer) is ANSWER; every string field of a structured reply is REASON."""
    return ANSWER if path == "" else REASON


def _demo_load(db: Path) -> dict[str, Any]:
    """`judgelab demo load` into `db`, as a presenter runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "dashboard.cli", "demo", "load", "--json"],
        env=os.environ | {"JUDGELAB_DATABASE_URL": f"sqlite:///{db}", "HF_HUB_OFFLINE": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout)
    recorded = sum(len(page["run_ids"]) for page in DEMO_MANIFEST["pages"].values())  # the Confidence lab: two
    assert len(loaded["loaded"]) == recorded, loaded
    return loaded


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One dashboard for the live flows: every model of the catalog is the loopback server; the demo runs are
    in its database (real stored runs, with events and calls, for the Runs page)."""
    tmp = tmp_path_factory.mktemp("flows")
    server = SchemaServer(_text, piece_size=4, lifetime_s=900).start()
    catalog = tmp / "catalog.yaml"
    catalog.write_text(
        "models:\n"
        f"  - id: gemma3-270m\n    backend: openai\n    model: fake\n    base_url: '{server.url}/v1'\n"
        "    needs_key: false\n    max_retries: 0\n    timeout_s: 30\n    concurrency: 8\n"
        "    profile: {name: Loopback Gemma, icon: '💎'}\n    default_for: ['*']\n"
        "panels:\n  local:\n"
        + "".join(
            f"    - {{model: gemma3-270m, role_name: {role}, role_focus: 'look closely'}}\n"
            for role in ("Safety officer", "Security auditor", "User advocate")
        ),
        encoding="utf-8",
    )
    _demo_load(tmp / "e2e.db")
    with serve_dashboard(tmp, {"JUDGELAB_CATALOG": str(catalog)}) as (url, db):
        yield {"url": url, "db": db, "server": server}
    server.stop()


class Shots:
    """Full-page screenshots, one per step, numbered in the order taken."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def __call__(self, page: Any, name: str) -> None:
        """Streamlit scrolls its main area, not the page: the viewport grows to the main area's height for the
        shot (at most 6000 px), then goes back."""
        self.n += 1
        size = page.viewport_size
        height = page.evaluate(
            "() => { const m = document.querySelector('[data-testid=\"stMain\"]'); return m ? m.scrollHeight : 0 }"
        )
        if height > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, 6000)})
            page.wait_for_timeout(300)
        page.screenshot(path=str(self.folder / f"{self.n:02d}-{name}.png"), full_page=True)
        if height > size["height"]:
            page.set_viewport_size(size)


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path) -> Shots:
    keep = os.environ.get("JUDGELAB_E2E_SHOTS")
    return Shots(Path(keep) / request.node.name if keep else tmp_path / "shots")


@pytest.fixture
def page(world: dict[str, Any], browser: Any) -> Iterator[Any]:
    with fresh_page(browser, viewport={"width": 1400, "height": 1100}, accept_downloads=True) as fresh:
        yield fresh


def settle(page: Any, quiet_s: float = 1.0, timeout_s: float = 120) -> None:
    """Wait until no script run is going (Streamlit shows its status widget while one runs)."""
    quiet_since = time.monotonic()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.locator('[data-testid="stStatusWidget"]').count():
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > quiet_s:
            return
        page.wait_for_timeout(150)


def open_page(page: Any, url: str, path: str, heading: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{url}/{path}", timeout=60_000)
    expect(page.get_by_role("heading", name=heading)).to_be_visible(timeout=60_000)
    settle(page)


def metric(page: Any, label: str, scope: Any = None) -> str:
    """The shown value of the metric called `label`."""
    box = (
        (scope or page)
        .get_by_test_id("stMetric")
        .filter(has=page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True))
    )
    return str(box.first.get_by_test_id("stMetricValue").inner_text()).strip()


def metric_moved(page: Any, label: str, scope: Any, before: str, timeout_s: float = 60) -> str:
    """The metric's value once the rerun a widget started has shown another one than `before` (a fixed quiet
    time could end before a loaded machine had begun the rerun), and the run is over; `before` at the timeout."""
    deadline = time.monotonic() + timeout_s
    while metric(page, label, scope) == before and time.monotonic() < deadline:
        page.wait_for_timeout(150)
    settle(page, quiet_s=0.5)
    return metric(page, label, scope)


CARDS_WITH_BUBBLES = """() => {
  const cards = [];
  for (const button of document.querySelectorAll('button')) {
    if (button.innerText.trim() !== 'Speak') continue;
    let el = button.parentElement;
    while (el && !el.innerText.includes('wants to speak')) el = el.parentElement;
    if (el) cards.push(el);
  }
  const withBubbles = cards.filter((card) => card.querySelector('[data-testid="stChatMessage"]'));
  return {cards: cards.length, with_bubbles: withBubbles.length};
}"""


def visible_panel(page: Any) -> Any:
    return page.locator('[role="tabpanel"]:visible').first


def run_id_in_url(page: Any, prefix: str) -> str:
    found = re.search(rf"run=({prefix}-[\w-]+)", page.url)
    assert found, page.url
    return found.group(1)


# -- the live flows ----------------------------------------------------------------------------------------------


def test_conversation_cards_approve_one_streamed_answer_and_what_if(
    world: dict[str, Any], page: Any, shots: Shots
) -> None:
    from playwright.sync_api import expect

    open_page(page, world["url"], "handraise", "🙋 Hand raise")
    shots(page, "conversation-open")
    # The structured judge (the loopback server has no token likelihoods); threshold 0: every hand is a card.
    page.get_by_role("combobox", name="Judge method").click()
    page.get_by_role("option", name="judge", exact=True).click()
    settle(page)
    page.get_by_role("slider", name="Threshold").first.press("Home")
    settle(page)
    chat_input = page.get_by_test_id("stChatInputTextArea")
    chat_input.fill("My Python API returns a KeyError when it reads the database config — how do I debug it?")
    chat_input.press("Enter")
    expect(page.get_by_role("button", name="Approve all")).to_be_visible(timeout=120_000)
    speak = page.get_by_role("button", name="Speak", exact=True)
    expect(speak.first).to_be_visible()
    cards = speak.count()
    assert cards >= 2, cards
    expect(page.get_by_text(REASON).first).to_be_visible()
    shots(page, "conversation-cards")

    speak.first.click()
    # The answer streams into a chat bubble while the other cards still wait, outside every card.
    answer = page.get_by_test_id("stChatMessage").filter(has_text=ANSWER)
    expect(answer.first).to_be_visible(timeout=60_000)
    expect(page.get_by_role("button", name="Skip all")).to_be_visible()
    expect(speak).to_have_count(cards - 1, timeout=30_000)
    # Each card: the smallest block holding a Speak button and its "wants to speak" line. No card holds a bubble.
    holding = page.evaluate(CARDS_WITH_BUBBLES)
    assert holding == {"cards": cards - 1, "with_bubbles": 0}, holding
    shots(page, "conversation-one-approved")

    page.get_by_role("button", name="Skip all").click()
    expect(page.get_by_role("button", name="Approve all")).to_have_count(0, timeout=60_000)
    expect(chat_input).to_be_enabled(timeout=60_000)
    expect(answer).to_have_count(1)  # in the chat log once the turn closed, not twice
    expect(page.get_by_text("skipped by you", exact=False)).to_have_count(cards - 1)  # the skipped cards, as lines
    shots(page, "conversation-turn-closed")

    page.get_by_role("tab", name="What-if").click()
    panel = visible_panel(page)
    expect(panel.get_by_text(re.compile(r"^Re-decided \d+ hands"))).to_be_visible(timeout=30_000)
    assert metric(page, "Hands raised", panel) == str(cards)
    assert metric(page, "Hands that change", panel) == "0"
    panel.get_by_role("slider", name="Threshold").press("End")  # threshold 1: no hand is raised any more
    settle(page)
    expect(
        panel.get_by_test_id("stMetric").filter(has_text="Hands raised").get_by_test_id("stMetricValue")
    ).to_have_text("0", timeout=30_000)
    assert metric(page, "Hands that change", panel) == str(cards)
    shots(page, "conversation-what-if")


def test_jury_live_then_its_replay(world: dict[str, Any], page: Any, shots: Shots) -> None:
    from playwright.sync_api import expect

    url = world["url"]
    open_page(page, url, "jury", "⚖️ Jury")
    expect(page.get_by_role("button", name="Run the jury")).to_be_enabled(timeout=30_000)
    shots(page, "jury-open")
    page.get_by_role("button", name="Run the jury").click()
    expect(page.get_by_text("Phase 1 — independent evaluations", exact=True)).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible(timeout=120_000)
    run_id = run_id_in_url(page, "jury")
    # Right or wrong against the case's gold label, beside the verdict.
    expect(
        page.get_by_text(re.compile(r"^(Right — matches|Wrong — the gold label is|.*no gold label)")).first
    ).to_be_visible()
    expect(page.get_by_role("button", name="Run the jury")).to_be_enabled(timeout=30_000)
    settle(page)
    shots(page, "jury-finished")
    with sqlite3.connect(world["db"]) as conn:
        ((status, events),) = conn.execute(
            "SELECT status, (SELECT count(*) FROM events WHERE run_id = runs.id) FROM runs WHERE id = ?", (run_id,)
        ).fetchall()
    assert status == "finished" and events > 5

    page.goto(f"{url}/replay?run={run_id}", timeout=60_000)
    expect(page.get_by_role("heading", name="⏯️ Replay")).to_be_visible(timeout=60_000)
    single = page.get_by_role("tabpanel", name="Step through a run")
    caption = single.get_by_text(re.compile(r"^Event \d+ of \d+"))
    expect(caption).to_be_visible(timeout=30_000)
    shown, total = map(int, re.findall(r"\d+", caption.inner_text())[:2])
    assert shown == total and 5 < total <= events, (shown, total, events)
    events = total
    expect(single.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="↺ Replay")).to_be_visible()  # at the last event: no "Pause"
    page.get_by_role("button", name="⏮ Start").click()
    expect(page.get_by_text(f"Event 0 of {events}", exact=False)).to_be_visible(timeout=30_000)
    expect(single.get_by_text("Phase 3 — final judgment", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Step ▶").click()
    expect(single.get_by_text(re.compile(rf"^Event 1 of {events}\b"))).to_be_visible(timeout=30_000)
    shots(page, "replay-step")
    page.get_by_role("button", name="▶ Play").click()
    expect(page.get_by_role("button", name="⏸ Pause")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(f"Event {events} of {events}", exact=False)).to_be_visible(timeout=120_000)
    expect(page.get_by_role("button", name="↺ Replay")).to_be_visible(timeout=30_000)
    expect(single.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible()
    settle(page)
    shots(page, "replay-played")
    page.get_by_role("tab", name="Compare two runs").click()
    panel = visible_panel(page)
    expect(panel.get_by_role("combobox", name="Left run")).to_be_visible(timeout=30_000)
    settle(page)
    shots(page, "replay-compare")


def test_director_check_then_batch_retune(world: dict[str, Any], page: Any, shots: Shots) -> None:
    from playwright.sync_api import expect

    open_page(page, world["url"], "director", "🎬 Director lab")
    page.get_by_role("button", name="Check", exact=True).click()
    expect(page.get_by_text("Normalised", exact=False).first).to_be_visible(timeout=120_000)
    expect(page.get_by_text("recorded as run director-", exact=False).first).to_be_visible(timeout=30_000)
    assert metric(page, "Tone score") != ""
    settle(page)
    shots(page, "director-check")

    page.get_by_role("tab", name="Batch").click()
    panel = visible_panel(page)
    expect(panel.get_by_test_id("stMetricLabel").get_by_text("Changed by retuning")).to_be_visible(timeout=60_000)
    lines = int(metric(page, "Lines", panel))
    assert lines > 0 and metric(page, "Changed by retuning", panel) == "0"
    before = {s: int(metric(page, s, panel)) for s in ("PASS", "WARN", "RETRY")}
    assert sum(before.values()) == lines
    shots(page, "director-batch")
    # Retune: a line passes the tone only at the top score now; statuses move, with no model call.
    calls_before = len(world["server"].seen)
    tone_pass = panel.get_by_label("Tone: PASS from score")
    tone_pass.fill("3")
    tone_pass.press("Enter")
    settle(page)
    expect(
        panel.get_by_test_id("stMetric").filter(has_text="Changed by retuning").get_by_test_id("stMetricValue")
    ).not_to_have_text("0", timeout=30_000)
    after = {s: int(metric(page, s, panel)) for s in ("PASS", "WARN", "RETRY")}
    assert sum(after.values()) == lines and after["PASS"] < before["PASS"], (before, after)
    assert len(world["server"].seen) == calls_before
    shots(page, "director-batch-retuned")
    panel.get_by_text("LLM rubric for every line (optional)").click()
    record = panel.get_by_role("button", name="Record the rules only")
    expect(record).to_be_visible(timeout=30_000)
    settle(page)  # a click that lands during the rerun the retuning started can be lost
    record.click()
    expect(panel.get_by_text("rules recorded in run director-", exact=False)).to_be_visible(timeout=120_000)
    settle(page)
    shots(page, "director-batch-recorded")


def test_confidence_sliders_move_the_score_and_level(world: dict[str, Any], page: Any, shots: Shots) -> None:
    from playwright.sync_api import expect

    open_page(page, world["url"], "confidence", "🎚️ Confidence lab")
    panel = visible_panel(page)
    first_score = metric(page, "Score", panel)
    shots(page, "confidence-open")
    # Not a search step: the base is the weighted mean of the counted factors (tool success, self-confidence).
    panel.get_by_role("slider", name="Tool success rate").press("Home")
    low_score = metric_moved(page, "Score", panel, first_score)
    low_level = metric(page, "Level", panel).lower()
    assert float(low_score) < float(first_score), (first_score, low_score)
    shots(page, "confidence-low")
    panel.get_by_role("slider", name="Tool success rate").press("End")
    high_score = metric_moved(page, "Score", panel, low_score)
    high_level = metric(page, "Level", panel).lower()
    assert float(high_score) > float(low_score) and high_level != low_level, (low_score, low_level, high_score)
    shots(page, "confidence-high")
    # The level thresholds in the sidebar: NOTIFY at 1.0 (SILENT pushed along) lowers the same score's level.
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_role("slider", name="NOTIFY at ≥").press("End")
    settle(page)
    expect(sidebar.get_by_text("SILENT moved to 1", exact=False)).to_be_visible(timeout=30_000)
    assert metric(page, "Level", panel).lower() not in (high_level, "silent")
    assert metric(page, "Score", panel) == high_score
    shots(page, "confidence-thresholds")


def test_skip_simulation_shows_its_results(world: dict[str, Any], page: Any, shots: Shots) -> None:
    from playwright.sync_api import expect

    open_page(page, world["url"], "skip", "⏱️ Skip cache")
    shots(page, "skip-open")
    page.get_by_role("button", name="Simulate").click()
    expect(page.get_by_text("recorded as run skip-", exact=False).first).to_be_visible(timeout=180_000)
    without, with_cache = metric(page, "Judge calls without cache"), metric(page, "With cache")
    assert int(without.replace(",", "")) > int(with_cache.replace(",", "")) > 0, (without, with_cache)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=30_000)
    settle(page)
    shots(page, "skip-results")
    page.get_by_role("tab", name="Calls saved vs. delay").click()
    expect(visible_panel(page).locator(".js-plotly-plot").first).to_be_visible(timeout=30_000)
    shots(page, "skip-tradeoff")


def test_runs_search_export_and_download(world: dict[str, Any], page: Any, shots: Shots, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    run_id = DEMO_MANIFEST["pages"]["jury"]["run_ids"][0]
    open_page(page, world["url"], "runs", "🗂️ Runs")
    shots(page, "runs-open")
    search = page.get_by_role("textbox", name="Search", exact=True)
    search.fill(run_id)
    search.press("Enter")
    expect(page.get_by_text("Runs 1–1 of 1", exact=False)).to_be_visible(timeout=30_000)
    settle(page)
    shots(page, "runs-searched")
    page.get_by_role("combobox", name="Run", exact=True).click()
    page.get_by_role("option", name=run_id).click()
    expect(page.get_by_text(f"jury.run · {run_id}", exact=True)).to_be_visible(timeout=30_000)  # under its name
    page.get_by_role("tab", name="Export").click()
    panel = visible_panel(page)
    with page.expect_download(timeout=60_000) as got:
        panel.get_by_role("button", name="⬇ JSON (whole run)").click()
    download = got.value
    assert download.suggested_filename == f"{run_id}.json"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["run"]["id"] == run_id and record["run"]["kind"] == "jury.run"
    assert record["events"][0]["type"] == "run_started" and record["events"][-1]["type"] == "run_finished"
    assert record["calls"]

    with page.expect_download(timeout=60_000) as got:
        panel.get_by_role("button", name="⬇ CSV tables (zip)").click()
    path = tmp_path / got.value.suggested_filename
    got.value.save_as(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names and all(n.endswith(".csv") for n in names)
        tables = {n: list(csv.DictReader(io.TextIOWrapper(archive.open(n), encoding="utf-8"))) for n in names}
    assert any(rows for rows in tables.values())
    flat = json.dumps(tables, ensure_ascii=False)
    assert run_id in flat

    with page.expect_download(timeout=60_000) as got:
        panel.get_by_role("button", name="⬇ CSV", exact=True).click()
    text = Path(got.value.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and got.value.suggested_filename.startswith(run_id)
    settle(page)
    shots(page, "runs-export")


# -- the whole tour in demo mode, with no model that could load ---------------------------------------------------


@pytest.fixture(scope="module")
def demo_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """JUDGELAB_DEMO=1 over a database filled by `judgelab demo load`; the catalog's bundled model points at a
    GGUF file that does not exist, so any attempt to load it would fail the flow it serves."""
    tmp = tmp_path_factory.mktemp("demo")
    source = (ROOT / "models" / "catalog.yaml").read_text(encoding="utf-8")
    broken = source.replace("    model: bundled ", f"    model: {tmp / 'no-such-model.gguf'} ", 1)
    assert broken != source
    catalog = tmp / "catalog.yaml"
    catalog.write_text(broken, encoding="utf-8")
    _demo_load(tmp / "e2e.db")
    with serve_dashboard(tmp, {"JUDGELAB_CATALOG": str(catalog), "JUDGELAB_DEMO": "1"}) as (url, db):
        yield {"url": url, "db": db, "log": tmp / "dashboard.log"}


def _replayed(db: Path, kind: str) -> list[tuple[str, str]]:
    """The runs of `kind` the tour made (not the loaded demo runs): (id, status); their calls all replayed."""
    demo_ids = {r for p in DEMO_MANIFEST["pages"].values() for r in p["run_ids"]}
    with sqlite3.connect(db) as conn:
        runs = [r for r in conn.execute("SELECT id, status FROM runs WHERE kind = ?", (kind,)) if r[0] not in demo_ids]
        for run_id, _ in runs:
            backends = {b for (b,) in conn.execute("SELECT backend FROM llm_calls WHERE run_id = ?", (run_id,))}
            assert backends <= {"replay"}, (run_id, backends)
    return runs


def test_the_demo_tour_needs_no_model(demo_world: dict[str, Any], browser: Any, shots: Shots) -> None:
    from playwright.sync_api import expect

    url, db = demo_world["url"], demo_world["db"]
    pages = DEMO_MANIFEST["pages"]
    with fresh_page(browser, viewport={"width": 1400, "height": 1100}) as page:
        open_page(page, url, "models", "🧠 Models")
        expect(page.get_by_test_id("stSidebar").get_by_role("switch", name="Demo (recorded)")).to_be_checked()
        shots(page, "demo-models")

        # Conversation: the recorded messages in order, every raised hand approved, the recorded answers.
        open_page(page, url, "handraise", "🙋 Hand raise")
        sidebar_codes = page.get_by_test_id("stSidebar").get_by_test_id("stCode")
        expect(sidebar_codes.first).to_be_visible()
        approved = 0
        for message in pages["handraise"]["inputs"]:
            chat_input = page.get_by_test_id("stChatInputTextArea")
            expect(chat_input).to_be_enabled(timeout=120_000)
            chat_input.fill(message)
            chat_input.press("Enter")
            # The message is in the chat and its judgment under way (the input closed) before anything else is read.
            expect(page.get_by_test_id("stChatMessage").filter(has_text=message)).to_be_visible(timeout=60_000)
            approve = page.get_by_role("button", name="Approve all")
            open_input = page.locator('textarea[data-testid="stChatInputTextArea"]:not([disabled])')
            expect(approve.or_(open_input)).to_be_visible(timeout=180_000)  # cards, or no hand raised
            settle(page)
            if approve.count():
                shots(page, f"demo-conversation-cards-{approved}")
                approve.click()
                approved += 1
                expect(approve).to_have_count(0, timeout=60_000)
            expect(chat_input).to_be_enabled(timeout=120_000)
        assert approved >= 1
        # Two messages and at least one recorded answer, each in its own bubble.
        expect(page.get_by_test_id("stChatMessage").nth(2)).to_be_visible(timeout=60_000)
        expect(page.get_by_text("not in the demo recording")).to_have_count(0)
        settle(page)
        shots(page, "demo-conversation")
        assert [s for _, s in _replayed(db, "handraise.conversation")] == ["running"]

        # Jury: the recorded case, live through the replay backend, to its verdict against gold.
        open_page(page, url, "jury", "⚖️ Jury")
        page.get_by_role("button", name="Run the jury").click()
        expect(page.get_by_text("Phase 3 — final judgment", exact=True)).to_be_visible(timeout=120_000)
        expect(page.get_by_text(re.compile(r"^Right — matches the gold label")).first).to_be_visible()
        # The recorded deliberation: the seats disagree, a round moves the unsure one and its statement says why.
        expect(page.get_by_text("Phase 2 — discussion", exact=True)).to_be_visible()
        expect(page.get_by_text(re.compile(r"^Moved to unsafe: ")).first).to_be_visible()
        settle(page)
        shots(page, "demo-jury")
        assert [s for _, s in _replayed(db, "jury.run")] == ["finished"]

        # Replay of the recorded jury run.
        jury_id = pages["jury"]["run_ids"][0]
        page.goto(f"{url}/replay?run={jury_id}", timeout=60_000)
        expect(page.get_by_text("Phase 3 — final judgment", exact=True).first).to_be_visible(timeout=60_000)
        settle(page)
        shots(page, "demo-replay")

        # Director: the rules need no model; the duo replays its recorded retries.
        open_page(page, url, "director", "🎬 Director lab")
        page.get_by_role("button", name="Check", exact=True).click()
        expect(page.get_by_text("Normalised", exact=False).first).to_be_visible(timeout=60_000)
        page.get_by_role("tab", name="Batch").click()
        expect(visible_panel(page).get_by_text("Changed by retuning")).to_be_visible(timeout=60_000)
        page.get_by_role("tab", name="Duo simulator").click()
        page.get_by_role("button", name="Run dialogue").click()
        expect(page.get_by_text("recorded as run director-", exact=False).last).to_be_visible(timeout=120_000)
        expect(page.get_by_text("not in the demo recording")).to_have_count(0)
        settle(page)
        shots(page, "demo-director-duo")
        assert [s for _, s in _replayed(db, "director.duo")] == ["finished"]

        # Confidence: sliders (no model), then the recorded live evaluation.
        open_page(page, url, "confidence", "🎚️ Confidence lab")
        panel = visible_panel(page)
        score = metric(page, "Score", panel)
        slider = panel.get_by_role("slider", name="Tool success rate")
        slider.press("Home")
        # the rerun that redraws the score can land after the page looks settled: wait for it (a loaded CI machine)
        deadline = time.monotonic() + 60
        while float(metric(page, "Score", panel)) >= float(score) and time.monotonic() < deadline:
            settle(page, quiet_s=0.5)
        assert float(metric(page, "Score", panel)) < float(score)
        page.get_by_role("tab", name="Live").click()
        query = visible_panel(page).get_by_label("Query", exact=True)
        # the box keeps its default through the slider's reruns (#40: the form lives in the page's own state; an
        # empty box here was a glitch under CI load, tests/e2e/test_progress_busy.py reproduces it)
        assert query.input_value() == "What is the capital of France?"
        visible_panel(page).get_by_role("button", name="Evaluate", exact=True).click()
        expect(page.get_by_text("Recorded as run confidence-", exact=False).first).to_be_visible(timeout=180_000)
        expect(page.get_by_text("not in the demo recording")).to_have_count(0)
        settle(page)
        shots(page, "demo-confidence")
        assert [s for _, s in _replayed(db, "confidence.evaluate")] == ["finished"]

        # Skip cache: the recorded workload judged by the recorded Gemma.
        open_page(page, url, "skip", "⏱️ Skip cache")
        page.get_by_role("button", name="Simulate").click()
        # The finished simulation: its figures and its run id (the export box names it; the summary's own caption
        # was seen missing once in CI while every figure showed — reported, not hidden here).
        expect(page.get_by_text("Judge calls without cache").first).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Export run skip-", exact=False).first).to_be_visible(timeout=60_000)
        expect(page.get_by_text("not in the demo recording")).to_have_count(0)
        settle(page)
        shots(page, "demo-skip")
        assert [s for _, s in _replayed(db, "skip.simulate")] == ["finished"]

        # Runs: the demo runs and the tour's, tagged and searchable.
        open_page(page, url, "runs", "🗂️ Runs")
        expect(page.get_by_text(re.compile(r"Runs 1–\d+ of (1[0-9]|[5-9])"))).to_be_visible(timeout=30_000)
        shots(page, "demo-runs")

        # A message outside the recording is a message, not a traceback.
        open_page(page, url, "confidence", "🎚️ Confidence lab")
        page.get_by_role("tab", name="Live").click()
        live = visible_panel(page)
        live.get_by_label("Query", exact=True).fill("What is the capital of Peru?")
        live.get_by_label("Query", exact=True).press("Enter")
        settle(page)
        live.get_by_role("button", name="Evaluate", exact=True).click()
        expect(page.get_by_text("not in the demo recording", exact=False).first).to_be_visible(timeout=60_000)
        expect(page.get_by_test_id("stException")).to_have_count(0)
        shots(page, "demo-miss")
    log = demo_world["log"].read_text(encoding="utf-8", errors="replace")
    assert "no-such-model.gguf" not in log and "Traceback" not in log, log[-3000:]
