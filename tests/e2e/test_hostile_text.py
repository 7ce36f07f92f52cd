"""Hostile text stays text, in a real browser.

Every text field of the stored runs (jury: case, roles, model ids, reasoning, statements, fallback errors,
final judgment; conversation: participants, messages, reasons, answers; director, confidence, skip and
benchmark runs; raw LLM calls: request, reply, parsed, error, purpose) holds HTML and markdown that would
fetch from a loopback listener if it were rendered: <img>, <a>, <script>, <svg onload>, <iframe>, headings,
markdown links and images. The live flows (Models, Conversation, Jury, Director, Confidence, Skip cache)
run against a loopback OpenAI-compatible server whose every answer is hostile too. Chromium opens every
page that shows them; no injected element may exist and no request may reach the listener or leave for
any host but the dashboard. The live answers also echo the dashboard's API key (a custom variable name):
it must not appear in any page's HTML, the dashboard's log or its database files."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_browser import BROWSER_ARGS, CHROMIUM, serve_dashboard
from tests.fakes.hostile import hostile, store_hostile_runs
from tests.fakes.servers import SchemaServer

pytestmark = [pytest.mark.browser, pytest.mark.server]
KEY = "sk-e2e-custom-Hh7Jj6Kk5Ll4Zz3X"  # MY_CUSTOM_KEY of the dashboard process

CHECK_DOM = """(leak) => {
  const found = [];
  for (const el of document.querySelectorAll('*')) {
    const tag = el.tagName.toLowerCase();
    for (const attr of el.attributes) {
      const typed = (tag === 'input' || tag === 'textarea') && attr.name === 'value';  // what the user typed
      const source = attr.name === 'data-unformatted';  // plotly keeps the (escaped) text it rendered
      const injected = attr.value.includes(leak) || attr.name.startsWith('on') && attr.value.includes('fetch');
      if (injected && !typed && !source) {
        found.push(`${tag}[${attr.name}]: ${el.outerHTML.slice(0, 300)}`);
      }
    }
    const text = (el.textContent || '').trim();
    if (tag === 'script' && text.includes(leak)) found.push('script');
    if (/^h[1-6]$/.test(tag) && text.startsWith('Heading ')) found.push(`${tag}: ${text.slice(0, 40)}`);
    if (tag === 'a' && text.includes('Click to approve')) found.push('a: Click to approve');
    if ((tag === 'strong' || tag === 'b') && /^bold-[\\w-]+$/.test(text)) found.push(`${tag}: ${text}`);
    if (el.classList.contains('katex')) found.push('katex');
  }
  return found;
}"""

# Clicks every closed expander a person could see, in one call (one round trip per expander and per visibility
# check, with a pause after each click, cost the test a third of its CPU on the Runs page's many calls): the count.
OPEN_EXPANDERS = """() => {
  const closed = [...document.querySelectorAll('[data-testid="stExpander"] details:not([open]) > summary')]
    .filter((summary) => summary.checkVisibility());
  closed.forEach((summary) => summary.click());
  return closed.length;
}"""


class Listener:
    """Counts every request that reaches 127.0.0.1:port (an injected element would make one)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                listener.hits.append(self.path)
                self.send_response(204)
                self.send_header("access-control-allow-origin", "*")
                self.end_headers()

            do_POST = do_GET  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self._timer = threading.Timer(900, self.stop)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener()
    yield served
    served.stop()


# -- the browser -----------------------------------------------------------------------------------------------


@pytest.fixture
def hostile_world(tmp_path: Path, listener: Listener) -> Iterator[dict[str, Any]]:
    from engine.store import Store

    port = listener.port
    # Every live answer also echoes the key the server was sent: page HTML and the dashboard's log must not.
    server = SchemaServer(
        lambda path, body, headers: (
            hostile(port, f"live{path.replace('.', '-')}")
            + " key="
            + headers.get("authorization", "").removeprefix("Bearer ")
        ),
        piece_size=7,
    ).start()
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "models:\n"
        f"  - id: gemma3-270m\n    backend: openai\n    model: hostile\n    base_url: '{server.url}/v1'\n"
        "    api_key_env: MY_CUSTOM_KEY\n    max_retries: 0\n    timeout_s: 30\n"
        f"    profile: {{name: {json.dumps(hostile(port, 'profile', one_line=True))}, "
        f"icon: 'http://127.0.0.1:{port}/avatar.png'}}\n"
        "    default_for: ['*']\n"
        "panels:\n  local:\n"
        + "".join(
            f"    - {{model: gemma3-270m, role_name: {json.dumps(hostile(port, f'seat-{i}', one_line=True))}, "
            f"role_focus: {json.dumps(hostile(port, f'seat-focus-{i}'))}}}\n"
            for i in range(2)
        ),
        encoding="utf-8",
    )
    db = tmp_path / "e2e.db"
    store = Store(f"sqlite:///{db}")
    runs = store_hostile_runs(store, port)
    store.dispose()
    workload = tmp_path / "hostile.jsonl"
    workload.write_text(
        "".join(
            json.dumps(
                {
                    "t": 60 * i,
                    "channel": f"C{i % 2}",
                    "id": f"m{i}",
                    "author": hostile(port, f"author-{i}", one_line=True),
                    "text": hostile(port, f"message-{i}"),
                }
            )
            + "\n"
            for i in range(4)
        ),
        encoding="utf-8",
    )
    with serve_dashboard(tmp_path, {"JUDGELAB_CATALOG": str(catalog), "MY_CUSTOM_KEY": KEY}) as (url, _db):
        yield {"url": url, "runs": runs, "workload": workload, "listener": listener, "dir": tmp_path}
    server.stop()


def test_hostile_text_is_shown_as_text_and_fetches_nothing(hostile_world: dict[str, Any]) -> None:
    from playwright.sync_api import expect, sync_playwright

    url: str = hostile_world["url"]
    listener: Listener = hostile_world["listener"]
    leak = f"127.0.0.1:{listener.port}"
    shots: Path = hostile_world["dir"]
    external: list[str] = []
    findings: dict[str, list[str]] = {}
    key_hits: dict[str, int] = {}
    redacted: dict[str, int] = {}
    checked: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(url) or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
            return
        external.append(r.request.url)
        r.continue_() if leak in r.request.url else r.abort()  # the listener counts what would have leaked

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        context = browser.new_context(viewport={"width": 1500, "height": 2400})
        context.route("**/*", route)
        page = context.new_page()

        def settle() -> None:
            """Wait until the script run is over (Streamlit shows its status widget while running)."""
            quiet_since = time.monotonic()
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if page.locator('[data-testid="stStatusWidget"]').count():
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > 1.0:  # as tests/e2e/test_flows.py's settle
                    return
                page.wait_for_timeout(150)

        def check(
            name: str, *, literal: bool = True, must: tuple[str, ...] = ("### Heading", "<img src=http://")
        ) -> None:
            settle()
            for _ in range(20):  # open every visible expander (those of hidden tabs are in the DOM already)
                if not page.evaluate(OPEN_EXPANDERS):  # then those the opened ones held, until none is left
                    break
                page.wait_for_timeout(200)
            findings[name] = page.evaluate(CHECK_DOM, leak)
            html = page.content()
            key_hits[name], redacted[name] = html.count(KEY), html.count("&lt;MY_CUSTOM_KEY&gt;")
            if literal:  # the hostile text is on the page, as the text it is
                body = page.inner_text("body").replace("\u2060", "")  # md()'s invisible autolink breakers
                assert all(text in body for text in must), name
            checked.append(name)

        def shot(name: str) -> None:
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

        # The listener and the route really see a request the page makes: a leak could not go unseen.
        page.goto(url, timeout=60_000)
        expect(page.get_by_role("heading", name="🧠 Models")).to_be_visible(timeout=60_000)
        page.evaluate(f"fetch('http://{leak}/sanity', {{mode: 'no-cors'}}).catch(() => 0)")
        deadline = time.monotonic() + 10
        while "/sanity" not in listener.hits and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listener.hits == ["/sanity"] and external == [f"http://{leak}/sanity"]
        listener.hits.clear()
        external.clear()

        # Models: a streamed hostile answer with "### Answer"-like headings; the profile name and icon too.
        page.get_by_label("Prompt", exact=True).fill(hostile(listener.port, "prompt"))
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_text("Completion tokens")).to_be_visible(timeout=120_000)
        check("models")
        assert not page.get_by_test_id("stChatMessage").locator("h1, h2, h3, h4").count()
        shot("models")

        # Runs: the list, then every stored run with every call expanded.
        page.goto(f"{url}/runs")
        expect(page.get_by_role("heading", name="🗂️ Runs")).to_be_visible(timeout=60_000)
        check("runs", literal=False)
        for kind, run_id in hostile_world["runs"].items():
            page.goto(f"{url}/runs?run={run_id}")
            expect(page.get_by_text("LLM calls", exact=False).first).to_be_visible(timeout=60_000)
            check(f"runs?run={kind}", literal=kind not in ("skip.simulate", "handraise.eval"))  # no call text
            if kind == "director.duo":
                shot("runs-call")

        # Replay (step-through and compare tabs) of the hostile jury run.
        page.goto(f"{url}/replay?run={hostile_world['runs']['jury.run']}")
        expect(page.get_by_text("Phase 3 — final judgment").first).to_be_visible(timeout=60_000)
        check("replay")
        shot("replay")

        # Jury, live: hostile seats from the catalog panel, a pasted hostile case, hostile answers.
        page.goto(f"{url}/jury")
        expect(page.get_by_role("heading", name="⚖️ Jury")).to_be_visible(timeout=60_000)
        page.get_by_text("Paste one").click()
        settle()
        page.get_by_label("Title").fill(hostile(listener.port, "pasted-title", one_line=True))
        page.get_by_label("Title").press("Enter")
        settle()
        page.get_by_label("Agent card and conversation log (or any text to judge)").fill(
            hostile(listener.port, "pasted-case")
        )
        page.get_by_label("Title").click()
        settle()
        page.get_by_role("button", name="Run the jury").click()
        expect(page.get_by_text("Phase 3 — final judgment").first).to_be_visible(timeout=180_000)
        check("jury")
        shot("jury")

        # Conversation, live: a hostile message; at threshold 0 every hand is a card with the judge's hostile
        # reason; all approved, the hostile answers stream in. The judge-benchmark tab lists the stored hostile
        # benchmark run.
        page.goto(f"{url}/handraise")
        expect(page.get_by_role("heading", name="🙋 Hand raise")).to_be_visible(timeout=60_000)
        page.get_by_role("slider", name="Threshold").first.press("Home")
        settle()
        page.get_by_test_id("stChatInputTextArea").fill(hostile(listener.port, "chat", one_line=True))
        page.get_by_test_id("stChatInputTextArea").press("Enter")
        expect(page.get_by_role("button", name="Approve all")).to_be_visible(timeout=120_000)
        check("conversation cards", must=("<img src=http://",))
        shot("conversation-cards")
        page.get_by_role("button", name="Approve all").click()
        expect(page.get_by_test_id("stChatMessage").nth(1)).to_be_visible(timeout=120_000)
        check("handraise")
        shot("handraise")

        # Director: a hostile line through the rules (highlighted) and the rubric; the duo simulator.
        page.goto(f"{url}/director")
        expect(page.get_by_role("heading", name="🎬 Director lab")).to_be_visible(timeout=60_000)
        page.get_by_label("Line", exact=True).fill(hostile(listener.port, "line") + " すごい")
        page.get_by_label("Scene (for the rubric)").fill(hostile(listener.port, "scene", one_line=True))
        page.get_by_label("Scene (for the rubric)").press("Enter")
        settle()
        page.get_by_text("Also score the LLM rubric").click()
        settle()
        page.get_by_role("button", name="Check", exact=True).click()
        expect(page.get_by_text("Normalised").first).to_be_visible(timeout=60_000)
        check("director check", must=("<img src=http://",))
        shot("director-check")
        page.get_by_role("tab", name="Duo simulator").click()
        page.get_by_label("Turns").fill("2")
        page.get_by_label("Turns").press("Enter")
        settle()
        page.get_by_role("button", name="Run dialogue").click()
        expect(page.get_by_text("recorded as run").last).to_be_visible(timeout=120_000)
        check("director duo", must=("<img src=http://",))
        shot("director-duo")

        # Confidence, live: a hostile question and answer, evaluated by the hostile model.
        page.goto(f"{url}/confidence")
        expect(page.get_by_role("heading", name="🎚️ Confidence lab")).to_be_visible(timeout=60_000)
        page.get_by_role("tab", name="Live").click()
        page.get_by_label("Query", exact=True).fill(hostile(listener.port, "query", one_line=True))
        page.get_by_label("Query", exact=True).press("Enter")
        settle()
        page.get_by_label("Answer", exact=True).fill(hostile(listener.port, "answer"))
        page.get_by_label("Sources (one per line)").fill("")
        page.get_by_label("Query", exact=True).click()
        settle()
        page.get_by_role("button", name="Evaluate", exact=True).click()
        expect(page.get_by_text("Recorded as run").first).to_be_visible(timeout=120_000)
        check("confidence", literal=False)

        # Skip cache: a hostile workload file (authors and messages go into the timeline's hover text).
        page.goto(f"{url}/skip")
        expect(page.get_by_role("heading", name="⏱️ Skip cache")).to_be_visible(timeout=60_000)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(hostile_world["workload"]))
        settle()
        page.get_by_role("button", name="Simulate").click()
        expect(page.get_by_text("recorded as run").first).to_be_visible(timeout=120_000)
        check("skip", literal=False)
        chart = page.locator(".js-plotly-plot", has=page.locator(".scatterlayer .point")).first
        chart.scroll_into_view_if_needed()
        point = chart.locator(".scatterlayer .point").first.bounding_box()
        assert point is not None
        for dx in (2, 0):  # plotly shows hover text on mouse moves over the plot area
            page.mouse.move(point["x"] + point["width"] / 2 + dx, point["y"] + point["height"] / 2)
            page.wait_for_timeout(400)
        shot("skip-cache-hover")
        assert "<img src=http://" in (chart.locator(".hoverlayer").text_content() or "")
        findings["skip-cache hover"] = page.evaluate(CHECK_DOM, leak)
        browser.close()

    time.sleep(1)  # a late fetch would still be counted
    report = {
        "findings": findings,
        "key_hits": key_hits,
        "redacted": redacted,
        "hits": listener.hits,
        "external": external,
        "checked": checked,
    }
    (shots / "findings.json").write_text(json.dumps(report, indent=1))
    assert {name: found for name, found in findings.items() if found} == {}
    assert listener.hits == [], listener.hits
    assert external == [], external
    assert len(checked) >= 17, checked
    # The echoed key: redacted on the pages (page HTML), in the dashboard's log and in its database files.
    assert not any(key_hits.values()) and sum(redacted.values()) >= 5, (key_hits, redacted)
    files = [shots / "dashboard.log", *shots.glob("e2e.db*")]
    assert not [f.name for f in files if KEY.encode() in f.read_bytes()]
