"""Issue 25 (Presentable), seen by tests: hand reasons in words with the machine detail behind Details, lowered
hands without reasons, the tokens headline split, What-if rows by participant, and demo mode without red."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from engine.demo import load_demo, load_manifest
from tests.dashboard.rendered import rerun_until, shown
from tests.dashboard.test_demo_pages import demo_env, open_page  # noqa: F401 — a fixture
from tests.engine.test_demo import DEMO, no_local_model  # noqa: F401 — a fixture
from tests.fakes.forms import wkey

MACHINE = ("PMI", "closest expertise", "calibration:")


def _conversation() -> None:
    from pages import handraise as conversation

    conversation.render()


def _texts(at: AppTest) -> list[str]:
    return [shown(e.value) for e in [*at.caption, *at.markdown, *at.info]]


def test_a_recorded_conversation_reads_in_words_and_keeps_its_machine_detail_behind_details() -> None:
    load_demo(state.get_store(), DEMO)
    (run_id,) = load_manifest(DEMO).pages["handraise"].run_ids
    at = AppTest.from_function(_conversation, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    texts = _texts(at)
    assert not [t for t in texts if any(m in t for m in MACHINE)], texts
    # the recorded answers (to the KeyError question and to the statistics one) read without markdown symbols
    answers = [t.value for t in at.text if "traceback" in t.value or "evaluation of experiments" in t.value]
    assert len(answers) == 2 and not [a for a in answers if "**" in a or "`" in a], answers
    lowered = [t for t in texts if "hand down" in t]
    assert lowered and all(t.endswith(")") and "my area" not in t for t in lowered), lowered
    at.toggle(key="details.handraise.toggle").set_value(True).run()
    assert any("closest expertise" in t and "PMI" in t for t in _texts(at))  # the seed's skip line, in Details
    assert at.toggle(key="details.handraise.toggle").value is True
    assert at.session_state["details.handraise"] is True  # kept apart from the widget: outlives the page


def test_tokens_headline_splits_answer_tokens_saved_from_judge_tokens() -> None:
    from dashboard.mechanisms.handraise.charts_tab import token_caption, token_metrics

    figures = {
        "judge_tokens": 1276,
        "answer_tokens": 450,
        "baseline_tokens": 1215,
        "answers": 2,
        "baseline_answers": 6,
        "spent_tokens": 1726,
    }
    shown = [m if isinstance(m, dict) else {"label": m[0], "value": m[1]} for m in token_metrics(figures)]
    metrics = {m["label"]: m for m in shown}
    assert metrics["Answer tokens saved"]["value"] == "765"
    assert metrics["Judge tokens (deciding who speaks)"]["value"] == "1,276"
    assert not any("1726" in str(m) or "1,726" in str(m) for m in metrics.values())  # never one sum vs. baseline
    said = token_caption(figures, "likelihood")
    assert "450 tokens written instead of 1,215 (765 saved)" in said and "1,276 judge tokens (read by" in said


def test_what_if_rows_name_participants_not_model_ids() -> None:
    from dashboard.mechanisms.handraise.whatif import whatif_rows
    from engine.handraise.cast import default_cast
    from engine.handraise.conversation import Conversation

    cast = default_cast(["gemma3-270m"])
    conv: Any = Conversation.__new__(Conversation)
    conv.participants = {p.id: p for p in cast}
    change = {
        "turn": 1,
        "model": cast[0].id,
        "status_before": "raised",
        "status_after": "lowered",
        "answered_before": True,
        "answered_after": False,
        "will_before": 0.7,
        "will_after": 0.4,
    }
    (row,) = whatif_rows(conv, [change])
    assert "model" not in row and row["participant"] == f"{cast[0].icon} {cast[0].name}"


def test_the_next_recorded_message_follows_the_recording_only() -> None:
    from dashboard.mechanisms.handraise.chat import next_recorded

    recorded = ["first", "second"]
    assert next_recorded([], recorded) == "first" and next_recorded(["first"], recorded) == "second"
    assert next_recorded(["first", "second"], recorded) is None
    assert next_recorded(["my own"], recorded) is None  # off the recording: every later judgment would miss


def test_models_prompt_outside_the_recording_is_a_notice_not_an_error(demo_env: None) -> None:  # noqa: F811
    at = open_page("models", "models")
    at.text_area(key=wkey(at, "models.prompt")).set_value("Tell me a story about the sea.").run()
    at.button(key="models.send").click().run()
    rerun_until(at, lambda: any("not in the demo recording" in i.value for i in at.info), 60, "no notice")
    assert not at.exception and not at.error, [e.value for e in at.error]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_replayed_models_answer_reads_without_its_scaffold_and_says_replayed(demo_env: None) -> None:  # noqa: F811
    """The recorded prompt in demo mode: the answer shown has no "### Answer:" the base model echoed, and a
    replayed call shows "replayed", not a latency of 0.00 s and thousands of tokens per second."""
    at = open_page("models", "models")
    at.button(key="models.send").click().run()
    rerun_until(at, lambda: any(m.label == "Latency" for m in at.metric), 60, "no answer")
    assert not at.exception and not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Latency"] == "replayed" and metrics["Tokens / s"] == "—", metrics
    # the page opens on the instruction-tuned model: its answer is read as written, with no base-model warning
    assert at.selectbox(key=wkey(at, "models.model")).value == "smollm2-135m"
    (answer,) = [t.value for t in at.text if "Welcome" in t.value]  # the default prompt asks for a welcome
    assert "###" not in answer and not any("base model" in c.value for c in at.caption)


def test_the_output_picked_brings_its_own_default_prompt_and_keeps_a_written_one(demo_env: None) -> None:  # noqa: F811
    from models.probe import FREE_MESSAGES, PROBE_MESSAGES

    at = open_page("models", "models")
    assert at.text_area(key=wkey(at, "models.prompt")).value == FREE_MESSAGES[1].content
    at.radio(key=wkey(at, "models.output")).set_value("ProbeJudgment").run()
    assert at.text_area(key=wkey(at, "models.prompt")).value == PROBE_MESSAGES[1].content
    assert at.text_area(key=wkey(at, "models.system")).value == PROBE_MESSAGES[0].content
    at.radio(key=wkey(at, "models.output")).set_value("Free text").run()
    assert at.text_area(key=wkey(at, "models.prompt")).value == FREE_MESSAGES[1].content
    at.text_area(key=wkey(at, "models.prompt")).set_value("Tell me a story about the sea.").run()
    at.radio(key=wkey(at, "models.output")).set_value("ProbeJudgment").run()
    assert at.text_area(key=wkey(at, "models.prompt")).value == "Tell me a story about the sea."  # written: kept
    assert not at.exception and not at.error


def test_the_judge_reading_is_said_only_for_a_calibrated_probability() -> None:
    from dashboard.mechanisms.confidence.live_result import judge_reading

    read = judge_reading(
        [
            {"name": "llm_self_confidence", "value": 0.92, "probability": 0.8, "flagged": False},
            {"name": "query_coverage", "value": 0.51, "flagged": False},
        ],
        0.6,
    )
    assert read.startswith("**The judge read p(supported) = 0.80** (likely right)") and "0.92" in read
    assert "0.6 + 0.4 × p" in read and "covers the question at 0.51" in read
    assert judge_reading([{"name": "llm_self_confidence", "value": 0.5, "probability": None}], 0.6) == ""
    fallback = {"name": "llm_self_confidence", "value": 0.5, "probability": 0.3, "flagged": True}
    assert judge_reading([fallback], 0.6) == ""


def _page(name: str) -> None:
    import importlib

    importlib.import_module(f"pages.{name}").render()


@pytest.mark.parametrize(
    ("page", "details"),
    [
        ("skip", "skip"),
        ("confidence", "confidence"),
        ("handraise", "handraise"),
        ("models", "models"),
        ("experiments", "experiments"),
        ("labels", "labels"),
    ],
)
def test_each_page_opens_with_one_sentence_and_a_details_toggle(page: str, details: str | None) -> None:
    at = AppTest.from_function(_page, args=(page,), default_timeout=60).run()
    assert not at.exception
    first = shown(at.caption[0].value)
    assert ". " not in first and first.endswith("."), first  # one sentence
    if details is not None:
        assert at.toggle(key=f"details.{details}.toggle").value is False
