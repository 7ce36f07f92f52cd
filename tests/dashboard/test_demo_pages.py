"""Demo mode on every page (AppTest, JUDGELAB_DEMO=1): the demo runs load themselves, the recorded input replays
with no model loaded and no live call, and an input outside the recording is a message naming the recorded ones
(never a traceback). `judgelab demo load` is idempotent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard import demo
from dashboard.cli import app
from dashboard.mechanisms.director.check import RULES_ONLY_NOTE
from engine.confidence.demo import CONFIDENCE_EXAMPLES
from engine.demo import load_manifest
from engine.store import Store
from tests.dashboard.rendered import rerun_until, run_ended
from tests.engine.test_demo import DEMO, DEMO_RUNS, no_local_model  # noqa: F401 — a fixture
from tests.fakes.forms import wkey

NOTICE = "This input is not in the demo recording"


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch, no_local_model: None) -> Iterator[None]:  # noqa: F811
    from dashboard import state

    monkeypatch.setenv("JUDGELAB_DEMO", "1")

    def clear() -> None:
        for cached in (state._demo_hub_for, state._hub_for, state._checked_availability, state._list_runs):
            cached.clear()

    clear()
    yield
    clear()


def _demo_app(page: str, url_path: str) -> None:
    """What dashboard/app.py does around a page: the switch (on through JUDGELAB_DEMO), hints, the miss message."""
    import importlib

    from dashboard import demo

    on = demo.render_switch()
    demo.run_page(importlib.import_module(f"pages.{page}").render, url_path, on)


def open_page(page: str, url_path: str) -> AppTest:
    at = AppTest.from_function(_demo_app, args=(page, url_path), default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def settle(at: AppTest, timeout_s: float = 60.0) -> None:
    """The Hand raise page judges and answers in the background and watches: rerun until it waits on the
    user again (cards to decide, or the chat input open) or shows an error."""

    def waits_on_the_user() -> bool:
        cards = any(b.label == "Approve all" for b in at.button)
        return bool(cards or at.error or not at.chat_input(key="conv.input").disabled)

    rerun_until(at, waits_on_the_user, timeout_s, "the page never settled")


def watch_to_end(at: AppTest, kind: str, timeout_s: float = 60.0) -> None:
    """The Jury page watches its run from the registry: rerun until no run of `kind` is running any more, stored
    or in the registry (the page shows a run's end once its entry point has returned, a moment after it is stored)."""
    store = Store()
    rerun_until(at, lambda: all(run_ended(r.id) for r in store.list_runs(kind=kind)), timeout_s, "the run never ended")
    at.run()


def missed(at: AppTest) -> str:
    """The friendly notice for an input outside the recording (issue 25: no red on the presenting path): no error
    element, the notice, and the recorded inputs it names (markdown escapes taken out: pages escape them)."""
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any(NOTICE in i.value for i in at.info), [i.value for i in at.info]
    texts = [c.value.replace("\\", "").replace("\u2060", "") for c in at.caption]
    return " ".join(t for t in texts if t.startswith("Recorded: "))


def replayed_runs(kind: str) -> list[Any]:
    """The runs of `kind` this test made (not the loaded demo runs), each with only replayed, free calls."""
    store = Store()
    demo_ids = {r for p in load_manifest(DEMO).pages.values() for r in p.run_ids}
    runs = [r for r in store.list_runs(kind=kind) if r.id not in demo_ids]
    for run in runs:
        calls = store.calls(run.id, limit=None)
        assert calls and all(c.backend == "replay" for c in calls)
    return runs


def demo_runs(kind: str) -> list[Any]:
    demo_ids = {r for p in load_manifest(DEMO).pages.values() for r in p.run_ids}
    return [r for r in Store().list_runs(kind=kind) if r.id in demo_ids]


def demo_summary(kind: str) -> dict[str, Any]:
    (run,) = demo_runs(kind)
    return run.summary


def test_demo_load_cli_is_idempotent() -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["demo", "load", "--json"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["demo", "load", "--json"])
    assert second.exit_code == 0, second.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert len(a["loaded"]) == DEMO_RUNS and not a["already_present"]
    assert not b["loaded"] and sorted(b["already_present"]) == sorted(a["loaded"])
    assert len(Store().list_runs(limit=100)) == DEMO_RUNS


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_switch_loads_the_demo_and_offers_only_the_recorded_model(demo_env: None) -> None:
    at = open_page("runs", "runs")
    ok(at)
    assert at.sidebar.toggle(key="demo.on").value is True
    assert len(Store().list_runs(limit=100)) == DEMO_RUNS  # loaded on first use
    at = open_page("director", "director")
    # the recorded models only: the judge model and the answering model, none of the catalog's others
    assert at.selectbox(key=wkey(at, "director.duo_model")).options == [
        "💎 Gemma 3 270M (local)",
        "🐣 SmolLM2 135M (local)",
    ]


@pytest.mark.model  # the packaged embedder
def test_conversation_recorded_and_unrecorded(demo_env: None) -> None:
    messages = load_manifest(DEMO).pages["handraise"].inputs
    at = open_page("handraise", "handraise")
    assert [c.value for c in at.sidebar.code] == messages  # the recorded messages, ready to copy
    approved = 0
    for text in messages:
        at.chat_input(key="conv.input").set_value(text).run()
        settle(at)
        ok(at)
        approve = [b for b in at.button if b.label == "Approve all"]
        if approve:
            approve[0].click().run()
            settle(at)
            ok(at)
            approved += 1
    assert approved >= 1, "no hand was raised"
    (run,) = replayed_runs("handraise.conversation")
    assert run.status == "running"  # open until New conversation, as live
    store = Store()
    (recorded,) = [r for r in store.list_runs(kind="handraise.conversation") if r.id != run.id]
    assert sorted(e.type for e in store.events(run.id)) == sorted(
        e.type for e in store.events(recorded.id) if e.type != "run_finished"
    )
    texts = [m.markdown[0].value for m in at.chat_message if m.name == "assistant" and m.markdown]
    assert texts, "no answer was shown"
    at = open_page("handraise", "handraise")
    at.chat_input(key="conv.input").set_value("What is the weather like on Mars today?").run()
    settle(at)
    message = missed(at)
    assert messages[0] in message


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_recorded_script_plays_through_its_button_and_another_path_says_so(demo_env: None) -> None:
    """The sidebar's script as a presenter plays it: the first message, Speak on the raised card, then the "Send
    the recorded message" button — every judgment and answer replays (the tour found the second refused when
    the answers' tidy step had changed since the recording). Skipping the card instead leads the conversation
    off the recorded path: the notice says the message is recorded and the path is not."""
    from dashboard.demo import OFF_PATH

    messages = load_manifest(DEMO).pages["handraise"].inputs
    for speak in (True, False):
        at = open_page("handraise", "handraise")
        at.chat_input(key="conv.input").set_value(messages[0]).run()
        settle(at)
        ok(at)
        prefix = "conv.approve." if speak else "conv.skip."
        for button in [b for b in at.button if b.key and b.key.startswith(prefix)]:
            button.click().run()
        page = at

        def offered(page: AppTest = page) -> bool:
            return any(b.key == "conv.send_recorded" for b in page.button)

        rerun_until(at, offered, 60, "no next message")
        at.button(key="conv.send_recorded").click().run()
        settle(at)
        assert not at.exception and not at.error, [e.value for e in at.error]
        off_path = any(OFF_PATH in i.value for i in at.info)
        assert off_path is not speak, [i.value for i in at.info]
        if speak:
            assert any(b.label == "Approve all" for b in at.button)  # the second turn's cards, replayed


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_jury_recorded_and_unrecorded(demo_env: None) -> None:
    page = load_manifest(DEMO).pages["jury"]
    at = open_page("jury", "jury")
    # The recorded case is prefilled (a real browser keeps it through the click: tests/e2e/test_flows.py); AppTest
    # sends an object-valued select box back as its first option on the next run, so it is chosen again here.
    chosen = at.selectbox(key=wkey(at, f"jury.case.{page.prefill['jury.file']}"))
    assert chosen.value is not None and chosen.value.id == page.prefill["jury.case"]
    chosen.set_value(chosen.value).run()
    at.button(key="jury.run").click().run()
    watch_to_end(at, "jury.run")
    ok(at)
    (run,) = replayed_runs("jury.run")
    assert run.status == "finished" and run.config["case"]["id"] == page.prefill["jury.case"]
    at = open_page("jury", "jury")
    file = at.selectbox(key=wkey(at, "jury.file"))
    assert file.value is not None
    case_box = at.selectbox(key=wkey(at, f"jury.case.{file.value.name}"))
    other = [c for c in case_box.options if page.prefill["jury.case"] not in c]
    case_box.select_index(case_box.options.index(other[0])).run()
    at.button(key="jury.run").click().run()
    watch_to_end(at, "jury.run")
    assert page.prefill["jury.case"] in missed(at)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_director_duo_recorded_and_unrecorded(demo_env: None) -> None:
    at = open_page("director", "director")
    at.button(key="director.duo_run").click().run()
    watch_to_end(at, "director.duo")
    ok(at)
    (run,) = replayed_runs("director.duo")
    assert run.summary["result"] == demo_summary("director.duo")["result"]
    at = open_page("director", "director")
    at.text_input(key=wkey(at, "director.duo_topic")).set_value("宇宙旅行").run()
    at.button(key="director.duo_run").click().run()
    watch_to_end(at, "director.duo")
    assert "topic" in missed(at)


def test_director_check_with_an_unrecorded_rubric_still_shows_the_rules_verdict(demo_env: None) -> None:
    """The prefilled line with the rubric on: its rubric call is not in the recording, yet the rules need no model.
    The page shows the rules' verdict with one line saying the rubric is missing (no error, no notice, no doubled
    icon), and the Check tab's export names that check run, not another tab's."""
    at = open_page("director", "director")
    at.toggle(key=wkey(at, "director.use_rubric")).set_value(True).run()
    at.button(key="director.check").click().run()
    rerun_until(at, lambda: any(RULES_ONLY_NOTE in c.value for c in at.caption), 60, "no rules-only verdict")
    ok(at)
    assert not any(NOTICE in i.value for i in at.info), [i.value for i in at.info]
    assert any(m.value.startswith("### ") and any(s in m.value for s in ("PASS", "WARN", "RETRY")) for m in at.markdown)
    store = Store()
    checks = store.list_runs(kind="director.check")
    rules = [r for r in checks if r.status == "finished" and r.config.get("model_id") is None]
    missed_rubric = [r for r in checks if r.config.get("model_id") is not None]
    assert len(rules) == 1 and len(missed_rubric) == 1 and missed_rubric[0].status != "finished"
    assert (
        rules[0].config["text"] == missed_rubric[0].config["text"] == at.text_area(key=wkey(at, "director.line")).value
    )
    exports = [c.value for c in at.caption if c.value.startswith("Export run")]
    assert len(exports) == 1 and rules[0].id.replace("-", "") in exports[0].replace("\\", "").replace("-", "")


def test_the_miss_notice_carries_one_icon() -> None:
    assert "🎬" not in demo.NOTICE and "🎬" not in demo.OFF_PATH  # st.info(icon="🎬") draws the one icon


@pytest.mark.model  # the packaged embedder
def test_confidence_recorded_and_unrecorded(demo_env: None) -> None:
    at = open_page("confidence", "confidence")
    at.button(key="confidence.live_run").click().run()
    watch_to_end(at, "confidence.evaluate")
    ok(at)
    (run,) = replayed_runs("confidence.evaluate")
    assert run.status == "finished"
    assert any(m.value.startswith("**The judge read p(supported) = ") for m in at.markdown)
    # the demo's second story: the wrong example (no sources) is recorded too, and the level it got is the page's
    at.button(key="confidence.example_wrong").click().run()
    assert at.text_input(key=wkey(at, "confidence.live_query")).value == CONFIDENCE_EXAMPLES["wrong"]["query"]
    assert at.text_area(key=wkey(at, "confidence.live_sources")).value == ""
    # the result shown is the right example's: said so, until Evaluate runs on the new boxes
    stale = "This result is for an earlier query, answer and sources: press Evaluate for the ones above."
    assert [w.value for w in at.warning] == [stale]
    at.button(key="confidence.live_run").click().run()
    watch_to_end(at, "confidence.evaluate")
    ok(at)
    assert not at.warning
    assert any("the no-sources penalty applies" in m.value for m in at.markdown)  # why it is stopped, in words
    right, wrong = sorted(replayed_runs("confidence.evaluate"), key=lambda r: r.started_at)
    assert wrong.status == "finished" and wrong.config["answer"] == CONFIDENCE_EXAMPLES["wrong"]["answer"]
    levels = {r.id: r.summary.get("level") for r in (right, wrong)}
    recorded = {r.config["answer"]: r.summary.get("level") for r in demo_runs("confidence.evaluate")}
    assert levels[wrong.id] == recorded[CONFIDENCE_EXAMPLES["wrong"]["answer"]]
    assert levels[right.id] == recorded[CONFIDENCE_EXAMPLES["right"]["answer"]]
    at.text_input(key=wkey(at, "confidence.live_query")).set_value("What is the capital of Peru?").run()
    at.button(key="confidence.live_run").click().run()
    watch_to_end(at, "confidence.evaluate")
    assert "capital of France" in missed(at)
    at.button(key="confidence.live_generate").click().run()  # in the background: the page shows the miss itself
    rerun_until(at, lambda: at.session_state["confidence.generating"] is None, 60)
    at.run()
    assert "capital of France" in missed(at)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_skip_cache_recorded_and_unrecorded(demo_env: None) -> None:
    at = open_page("skip", "skip")
    assert at.selectbox(key=wkey(at, "skip.judge")).value == "gemma3-270m"
    at.button(key="skip.run").click().run()
    watch_to_end(at, "skip.simulate")
    ok(at)
    (run,) = replayed_runs("skip.simulate")
    assert run.summary["result"] == demo_summary("skip.simulate")["result"]
    at.number_input(key=wkey(at, "skip.seed")).set_value(8).run()
    at.button(key="skip.run").click().run()
    watch_to_end(at, "skip.simulate")
    assert "workload" in missed(at)
    # "Use the recorded input" puts the recorded workload back; it replays again.
    (use,) = [b for b in at.button if b.label == "Use the recorded input"]
    use.click().run()
    assert at.number_input(key=wkey(at, "skip.seed")).value == 7
    at.button(key="skip.run").click().run()
    watch_to_end(at, "skip.simulate")
    ok(at)


@pytest.mark.parametrize(("page", "url"), [("models", "models"), ("runs", "runs"), ("replay", "replay")])
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_pages_without_a_model_open_in_demo_mode(demo_env: None, page: str, url: str) -> None:
    ok(open_page(page, url))


def test_the_app_starts_in_demo_mode_with_the_switch_on(demo_env: None) -> None:
    from pathlib import Path

    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=120).run()
    ok(at)
    assert at.sidebar.toggle(key="demo.on").value is True


@pytest.mark.model
def test_demo_record_refreshes_one_page_and_keeps_the_others(tmp_path: Any) -> None:
    """`judgelab demo record --only confidence` with the bundled model: a new live run for that page, the other
    pages' runs kept as they were, and the result loads and replays."""
    import shutil

    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    from engine.demo import load_demo, read_runs

    before = {d["run"]["id"]: d for d in read_runs(folder / "runs.jsonl")}
    result = CliRunner().invoke(app, ["demo", "record", "--only", "confidence", "--folder", str(folder)])
    assert result.exit_code == 0, result.output
    after = {d["run"]["id"]: d for d in read_runs(folder / "runs.jsonl")}
    manifest = load_manifest(folder)
    new_id, wrong_id = manifest.pages["confidence"].run_ids  # the right example, then the wrong one
    assert {new_id, wrong_id}.isdisjoint(before)
    assert after[new_id]["run"]["kind"] == after[wrong_id]["run"]["kind"] == "confidence.evaluate"
    # the signals: SmolLM2's two scoring calls (the answer with and without its sources), the multilingual
    # embeddings of the question, the answer and the two sources; the two sources' MiniLM agreement
    backends = sorted(c["backend"] for c in after[new_id]["calls"])
    assert backends == ["llamacpp"] * 2 + ["sentence-transformers"] * 2 + ["usem3-numpy"] * 4
    kept = {r for page, p in manifest.pages.items() if page != "confidence" for r in p.run_ids}
    assert all(after[r] == before[r] for r in kept) and len(after) == len(before)
    report = load_demo(Store(), folder)
    assert len(report.loaded) == len(after)
