"""Your labels teach the judge (issue 29), in Debian's Chromium: Speak and Skip on the Hand raise page's cards
become labels, the page counts them; the Labels page's queue takes a label from the keyboard; its agreement view
shows the judge against you; "Refit from my labels" fits a candidate map, "Use this map" adopts it, and the
Hand raise page then says the judge reads a map learnt from your approvals.

Every catalog model is the built-in mock backend (tests/fakes/mock_catalog.py): it scores options from the request's
hash, so the likelihood judge runs its real path (features, the shipped map) with no model loaded. Map versions go
to the test's own folder (JUDGELAB_MAPS_DIR), never to data/. Each step leaves a full-page screenshot in the test's
folder (JUDGELAB_E2E_SHOTS=DIR keeps them there instead)."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.e2e.test_browser import BROWSER_ARGS, CHROMIUM, serve_dashboard
from tests.e2e.test_flows import Shots, metric, open_page, settle, visible_panel
from tests.fakes.mock_catalog import mock_catalog

pytestmark = [pytest.mark.browser, pytest.mark.server]

MESSAGES = (
    "My Python API returns a KeyError when it reads the database config: how do I debug it?",
    "The checkout page takes four seconds to render on mobile: where do we start?",
    "Which colour palette reads well for colour-blind users in our charts?",
    "Is there a study on how often people reread long onboarding e-mails?",
)


@pytest.fixture
def labels_world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    catalog = mock_catalog(tmp_path)
    env = {
        "JUDGELAB_CATALOG": str(catalog),
        "JUDGELAB_MAPS_DIR": str(tmp_path / "maps"),
        "JUDGELAB_USER": "researcher-e2e",
        "JUDGELAB_REFIT_EVERY": "6",
    }
    with serve_dashboard(tmp_path, env) as (url, db):
        yield {"url": url, "db": db, "maps": tmp_path / "maps"}


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path) -> Shots:
    keep = os.environ.get("JUDGELAB_E2E_SHOTS")
    return Shots(Path(keep) / request.node.name if keep else tmp_path / "shots")


@pytest.fixture
def browser_page(labels_world: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1100})
        yield context.new_page()
        browser.close()


def _labels(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return [tuple(r) for r in con.execute("SELECT mechanism, label, source FROM labels ORDER BY id")]


def _play_turn(page: Any, text: str, skip_all: bool = False) -> int:
    """Send `text`; Speak on the first card, Skip on each other one by one (each click is a label), or "Skip all"
    (a batch: no label). Returns the number of cards labelled."""
    from playwright.sync_api import expect

    chat_input = page.get_by_test_id("stChatInputTextArea")
    expect(chat_input).to_be_enabled(timeout=60_000)
    chat_input.fill(text)
    chat_input.press("Enter")
    speak = page.get_by_role("button", name="Speak", exact=True)
    expect(speak.first).to_be_visible(timeout=60_000)
    settle(page)
    cards = speak.count()
    speak.first.click()
    expect(speak).to_have_count(cards - 1, timeout=30_000)
    if skip_all:
        page.get_by_role("button", name="Skip all").click()
        expect(page.get_by_role("button", name="Approve all")).to_have_count(0, timeout=60_000)
        settle(page)
        return 1
    skip = page.get_by_role("button", name="Skip", exact=True)
    for left in range(cards - 1, 0, -1):
        skip.first.click()
        expect(skip).to_have_count(left - 1, timeout=30_000)
    expect(page.get_by_role("button", name="Approve all")).to_have_count(0, timeout=60_000)
    settle(page)
    return cards


def test_approve_and_skip_then_agreement_refit_adopt_and_the_caption_names_the_map(
    labels_world: dict[str, Any], browser_page: Any, shots: Shots
) -> None:
    from playwright.sync_api import expect

    page, url, db = browser_page, labels_world["url"], labels_world["db"]
    open_page(page, url, "handraise", "🙋 Hand raise")
    page.get_by_role("slider", name="Threshold").first.press("Home")  # threshold 0: every hand is a card
    settle(page)
    # Three turns labelled card by card; in the last one the other cards go by "Skip all", which labels nothing.
    cards = sum(_play_turn(page, text, skip_all=i == len(MESSAGES) - 1) for i, text in enumerate(MESSAGES))
    assert cards >= 2 * (len(MESSAGES) - 1) + 1, cards
    stored = _labels(db)
    assert len(stored) == cards and {s for _, _, s in stored} == {"approval"}, stored
    assert sum(v == "speak" for _, v, _ in stored) == len(MESSAGES)
    counted = f"{cards} hand labels (Speak/Skip and the Labels queue) in this conversation"
    expect(page.get_by_text(counted, exact=False)).to_be_visible()
    shots(page, "conversation-labels-counted")

    # Past JUDGELAB_REFIT_EVERY new approvals the page offers a refit; the What-if shows the candidate's decisions.
    page.get_by_role("button", name="Refit from my labels").click()
    expect(page.get_by_text("A map refitted from your labels is ready", exact=False)).to_be_visible(timeout=120_000)
    page.get_by_role("tab", name="What-if").click()
    panel = visible_panel(page)
    expect(panel.get_by_text("With the map refitted from your labels", exact=False)).to_be_visible(timeout=60_000)
    assert int(metric(page, "Hands read again", panel)) == 3 * len(MESSAGES)
    shots(page, "conversation-what-if-candidate")
    page.get_by_role("tab", name="Chat").click()

    # The queue: one item more, labelled from the keyboard (key 1 = its first answer).
    open_page(page, url, "labels", "🏷️ Labels")
    page.get_by_role("button", name="Draw a queue").click()
    settle(page)
    # The hands "Skip all" passed over are not labelled yet: the queue offers them.
    expect(page.get_by_text(re.compile(r"^0 of \d+ done$"))).to_be_visible(timeout=30_000)
    page.locator("body").press("1")  # key 1: the first answer, "Should speak"
    expect(page.get_by_text(re.compile(r"^1 of \d+ done$"))).to_be_visible(timeout=30_000)
    assert _labels(db)[-1] == ("handraise", "speak", "manual")
    shots(page, "labels-queue-keyboard")
    cards += 1

    page.get_by_role("tab", name="Agreement with you").click()
    panel = visible_panel(page)
    panel.get_by_role("combobox", name="Mechanism").click()
    page.get_by_role("option", name="Hand raise (who should speak)").click()
    settle(page)
    expect(panel.get_by_text("Your labels", exact=True).first).to_be_visible(timeout=30_000)
    assert int(metric(page, "Your labels", panel)) >= cards
    assert metric(page, "Agreement", panel).endswith("%")
    shots(page, "labels-agreement")

    panel.get_by_role("button", name="Refit from my labels").click()
    expect(panel.get_by_role("button", name="Use this map")).to_be_visible(timeout=120_000)
    expect(panel.get_by_text(re.compile(r"New map: learnt from \d+ of your approvals"))).to_be_visible()
    shots(page, "labels-refit-candidate")
    panel.get_by_role("button", name="Use this map").click()
    expect(page.get_by_text("Now in use for", exact=False).first).to_be_visible(timeout=30_000)  # a toast too
    # The notice does not move the tabs: the agreement view stays open where the button was pressed.
    expect(page.get_by_role("tab", name="Agreement with you")).to_have_attribute("aria-selected", "true")
    assert any(labels_world["maps"].rglob("*.json")), "the adopted map is a file in the test's maps folder"
    shots(page, "labels-adopted")

    open_page(page, url, "handraise", "🙋 Hand raise")
    expect(page.get_by_text(re.compile(r"Map in use: learnt from \d+ of your approvals"))).to_be_visible(timeout=30_000)
    shots(page, "conversation-caption-names-the-map")


def test_an_upload_imports_as_a_watched_run_and_a_hostile_one_shows_its_first_lines(
    labels_world: dict[str, Any], browser_page: Any, shots: Shots, tmp_path: Path
) -> None:
    """Issue 35 on the Labels page, uploaded through the browser: 5,000 labels import in a run the page watches
    ("5000 imported, 0 already present"), the same file again adds nothing, and a hostile file (5,000 nested
    arrays, a time at the calendar's edge, a duplicate key, 30 bad values) shows its first 20 lines and how many
    more, each naming the file by its own name, with no traceback."""
    import json

    from playwright.sync_api import expect

    page, url, db = browser_page, labels_world["url"], labels_world["db"]
    good = tmp_path / "upload" / "five.jsonl"
    good.parent.mkdir()
    good.write_text(
        "".join(json.dumps({"mechanism": "director", "item_key": f"l{i}", "label": "ok"}) + "\n" for i in range(5000)),
        encoding="utf-8",
    )
    row = '{"mechanism": "director", "item_key": "x", "label": "ok"'
    hostile = tmp_path / "upload" / "hostile.jsonl"
    hostile.write_text(
        "\n".join(
            [
                row + ', "context": {"deep": ' + "[" * 5000 + "]" * 5000 + "}}",
                row + ', "created_at": "9999-12-31T23:59:59-23:59"}',
                row + ', "label": "retry"}',
            ]
            + [json.dumps({"mechanism": "director", "item_key": f"b{i}", "label": "maybe"}) for i in range(30)]
        )
        + "\n",
        encoding="utf-8",
    )
    open_page(page, url, "labels", "🏷️ Labels")
    page.get_by_role("tab", name="Your labels").click()
    for expected in (
        "five.jsonl: 5,000 imported, 0 already present.",
        "five.jsonl: 0 imported, 5,000 already present.",
    ):
        page.locator("input[type=file]").set_input_files(str(good))
        settle(page)  # the upload's own rerun first: a click landing inside it can be lost
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.get_by_text(expected)).to_be_visible(timeout=60_000)
        settle(page)
    assert len(_labels(db)) == 5000
    shots(page, "labels-import-done")
    page.locator("input[type=file]").set_input_files(str(hostile))
    settle(page)
    expect(page.get_by_text("hostile.jsonl")).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Import", exact=True).click()
    alert = page.get_by_text("Nothing imported — fix these lines:")
    expect(alert).to_be_visible(timeout=60_000)
    box = page.locator("[data-testid=stAlert]").filter(has_text="Nothing imported")
    text = box.inner_text()
    assert "hostile.jsonl:1: context: nested more than 64 levels deep" in text, text
    assert "hostile.jsonl:2: created_at: '9999-12-31T23:59:59-23:59' is outside the years 1970 to 9998" in text
    assert "hostile.jsonl:3: duplicate key 'label'" in text and "… and 13 more" in text
    assert "Traceback" not in text and str(tmp_path) not in text and "/tmp/" not in text
    assert len(_labels(db)) == 5000
    shots(page, "labels-import-refused")
    # its run on the Runs page: one line (the lines are the Labels page's), no traceback, no path
    run_id = parse_qs(urlparse(page.url).query)["import"][0]
    open_page(page, url, f"runs?run={run_id}", "🗂️ Runs")
    failed = page.locator("[data-testid=stAlert]").filter(has_text="nothing was imported")
    one_line = r"^\s*LabelImportFailed: hostile\.jsonl: 33 bad row\(s\); nothing was imported\s*$"
    expect(failed).to_have_text(re.compile(one_line))
    assert "Traceback" not in page.content() and str(tmp_path) not in failed.inner_text()


@pytest.fixture
def recorded_world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The recorded conversation (120 hands of the real likelihood judge) in the dashboard's database."""
    from engine.handraise.scripted_labeller import load_recording
    from engine.store import Store

    store = Store(f"sqlite:///{tmp_path / 'e2e.db'}")
    run_id = load_recording(store)
    store.dispose()
    env = {"JUDGELAB_CATALOG": str(mock_catalog(tmp_path)), "JUDGELAB_USER": "keyboard-e2e"}
    with serve_dashboard(tmp_path, env) as (url, db):
        yield {"url": url, "db": db, "run_id": run_id}


def test_fifty_items_are_labelled_with_keys_only(recorded_world: dict[str, Any], shots: Shots) -> None:
    """#38 (6): the queue drawn where a label teaches most, then 50 labels given with the keys 1 and 2 alone — no
    click after the draw; every key press is one stored label, in the queue's order."""
    from playwright.sync_api import expect, sync_playwright

    url, db = recorded_world["url"], recorded_world["db"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
        open_page(page, url, "labels", "🏷️ Labels")
        expect(page.get_by_role("combobox", name="Which items")).to_have_value(re.compile("teaches most"))
        how_many = page.get_by_label("How many")
        how_many.fill("50")
        how_many.press("Enter")
        settle(page)
        page.get_by_role("button", name="Draw a queue").press("Enter")  # focused and pressed: still the keyboard
        expect(page.get_by_text("0 of 50 done", exact=True)).to_be_visible(timeout=60_000)
        for i in range(50):
            page.locator("body").press("1" if i % 3 else "2")
            expect(page.get_by_text(re.compile(rf"^{i + 1} of 50 done$"))).to_be_visible(timeout=30_000)
        expect(page.get_by_text("Queue finished: 50 of 50 labelled", exact=False)).to_be_visible(timeout=30_000)
        shots(page, "labels-keyboard-50")
        browser.close()
    stored = _labels(db)
    assert len(stored) == 50 and {m for m, _, _ in stored} == {"handraise"}
    assert [v for _, v, _ in stored] == ["skip" if i % 3 == 0 else "speak" for i in range(50)]
