"""What a participant says: its own answering model, a prompt that asks it the user's question, and the answer
tidied — no loop, no other speaker's line, never cut mid-word or mid-URL (`engine/handraise/answers.py`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.handraise.answers import (
    DEFAULT_ANSWER_MODEL,
    answer_faults,
    answer_messages,
    readable_text,
    speaker_names,
    tidy_answer,
)
from engine.handraise.cast import DEFAULT_CAST, Turn, default_cast
from engine.handraise.conversation import Conversation
from engine.handraise.decisions import HandRaiseConfig
from models.types import RawResult
from tests.fakes.scripted import FnModel

WHO = speaker_names(DEFAULT_CAST)


@pytest.mark.parametrize(
    ("raw", "text", "cuts"),
    [
        # another speaker's line ends the answer
        (
            "I'm sorry for your loss. I'll see you next time!\nUser: thank everyone, that's all for today!",
            "I'm sorry for your loss. I'll see you next time!",
            ["speaker"],
        ),
        # one written before any text of its own is dropped; its own name in front is removed
        (
            "User: This is a very common question.\nCoder: Yes. You should also consider an index.",
            "Yes. You should also consider an index.",
            ["speaker"],
        ),
        ("**Designer:** use a bigger button.", "", ["speaker"]),
        # a code block left open ends it, then it ends at a sentence
        (
            "Use a Pythonic way of handling data. Check the body first:\n```python\ndef f():\n    return 0",
            "Use a Pythonic way of handling data.",
            ["open_code", "sentence"],
        ),
        # a closed code block is kept whole
        ("Try this:\n```python\nprint(1)\n```", "Try this:\n```python\nprint(1)\n```", []),
        # a layout header is dropped, a cut-off URL too
        (
            "### Answer: I can only debug the database. See https://developer",
            "I can only debug the database.",
            ["sentence"],
        ),
        ("See the docs at https://developer", "See the docs at…", ["sentence"]),
        ("Use effect sizes. Use effect sizes. Use effect sizes.", "Use effect sizes.", ["repeat"]),
        ("Check the logs.\nCheck the logs.\nThen the config.", "Check the logs.", ["repeat"]),
        (
            "30人では少ないです。信頼区間を出しましょう。信頼区間を出しましょう。",
            "30人では少ないです。信頼区間を出しましょう。",
            ["repeat"],
        ),
        ("Check the logs first.", "Check the logs first.", []),
        ("The button needs more contr", "The button needs more…", ["sentence"]),
        # a list cut off after its next number: the number goes
        ("Two steps:\n\n1. Open the terminal.\n2.", "Two steps:\n\n1. Open the terminal.", ["sentence"]),
        ("1. Open the terminal.\n2. Use the debugger on an", "1. Open the terminal.", ["sentence"]),
    ],
)
def test_tidy_answer_cuts_what_a_reader_would_trip_on(raw: str, text: str, cuts: list[str]) -> None:
    tidy = tidy_answer(raw, "coder", WHO)
    assert (tidy.text, tidy.cuts) == (text, cuts)
    if tidy.text:
        assert answer_faults(tidy.text, "coder", WHO) == set()


def test_an_answer_the_model_ended_itself_is_not_cut() -> None:
    assert tidy_answer("Check the logs", "coder", WHO, cut_off=False).text == "Check the logs"
    assert tidy_answer("Check the logs", "coder", WHO).text == "Check the…"  # stopped by the budget: mid-word?


MARKDOWN = (
    "### Steps\n**First**, read the *traceback*.\n- Print `config.keys()` to see what is there.\n"
    "* See [the docs](https://docs.python.org/3/library/exceptions.html).\n---\n> Then fix the key.\n"
    "```python\n# **kept** as written\nprint(config['db'])\n```"
)


def test_an_answer_shows_no_markdown_symbols_but_keeps_code_as_written() -> None:
    """Shown as text (never rendered), so markup is read out: no `**`, `###`, `- ` or backticks left in the
    prose; a list keeps a bullet, a link its address, a code block every character."""
    tidy = tidy_answer(MARKDOWN, "coder", WHO, cut_off=False)
    assert tidy.text == (
        "Steps\nFirst, read the traceback.\n• Print config.keys() to see what is there.\n"
        "• See the docs (https://docs.python.org/3/library/exceptions.html).\n\nThen fix the key.\n"
        "```python\n# **kept** as written\nprint(config['db'])\n```"
    )
    assert tidy.cuts == []
    prose = tidy.text.split("```")[0]
    assert not any(mark in prose for mark in ("**", "##", "\n- ", "`", "](", "\n>"))
    # arithmetic and identifiers are not emphasis
    assert tidy_answer("Use 2*3*4 and my_db_name.", "coder", WHO).text == "Use 2*3*4 and my_db_name."


def test_readable_text_drops_the_answer_header_a_base_model_echoes() -> None:
    """The Models page shows a model's free text read out: "### Answer:" is the prompt layout echoed."""
    assert readable_text("### Answer: **Yes**, reply.\n\n\n\n### Response: it is a question.") == (
        "Yes, reply.\n\nit is a question."
    )
    assert readable_text("Answer with care: fine.") == "Answer with care: fine."  # not a header


def test_answer_faults_name_each_fault() -> None:
    assert answer_faults("Use x. Use x again. Use x.", "coder", WHO) == set()  # "use x" is under 8 characters
    assert answer_faults("Use effect sizes. Use effect sizes.", "coder", WHO) == {"repeated_line"}
    assert answer_faults("Fine.\nDesigner: and colours.", "coder", WHO) == {"invented_speaker"}
    assert answer_faults("See https://developer", "coder", WHO) == {"cut_off"}
    assert answer_faults("  ", "coder", WHO) == {"empty"}
    assert answer_faults("Python: use a dict.", "coder", WHO) == set()  # not a speaker


def test_the_prompt_asks_the_users_question_with_the_chat_as_background() -> None:
    coder = DEFAULT_CAST[0]
    turns = [Turn("user", "Hi"), Turn("designer", "Hello!"), Turn("user", "Why does my Flask app return 500?")]
    names = {"user": "User", "designer": "Designer"}
    system, user = answer_messages(coder, turns, names, context_turns=3)
    assert user == {"role": "user", "content": "Why does my Flask app return 500?"}
    assert (
        "You are Coder, who writes and fixes code (expertise: Python, debugging, APIs, databases)" in system["content"]
    )
    assert system["content"].endswith("The chat so far:\nUser: Hi\nDesigner: Hello!")
    assert "chat so far" not in answer_messages(coder, turns, names, context_turns=1)[0]["content"]


def test_the_default_cast_answers_with_smollm2_where_the_catalog_has_it() -> None:
    assert {p.answering_model() for p in DEFAULT_CAST} == {DEFAULT_ANSWER_MODEL}
    assert {p.model_id for p in DEFAULT_CAST} == {"gemma3-270m"}  # the judge's side is unchanged
    assert {p.answering_model() for p in default_cast(["gemma3-270m"])} == {"gemma3-270m"}


def _conversation(lookup: dict[str, Any]) -> tuple[Conversation, list[tuple[str, dict[str, Any]]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    conv = Conversation(
        DEFAULT_CAST, lookup, HandRaiseConfig(judge_method="judge"), emit=lambda t, **p: events.append((t, p))
    )
    return conv, events


def _judge(request: Any) -> Any:
    scores = {"coder": (0.9, 0.9, 0.9), "designer": (0.1, 0.1, 0.1), "researcher": (0.1, 0.1, 0.1)}
    return {p: {"relevance": r, "novelty": n, "confidence": c, "reason": "r"} for p, (r, n, c) in scores.items()}


def test_the_answering_model_answers_and_its_cuts_are_stored() -> None:
    looping = "Look at the request parser. Look at the request parser.\nUser: thanks"
    judge = FnModel(_judge, model_id="gemma3-270m")
    answerer = FnModel(lambda r: RawResult(text=looping, finish_reason="length"), model_id=DEFAULT_ANSWER_MODEL)
    conv, events = _conversation({"gemma3-270m": judge, DEFAULT_ANSWER_MODEL: answerer})
    state = asyncio.run(conv.user_message("My Flask app returns 500, where should I look?"))
    conv.act(state, "coder", "approve")
    asyncio.run(conv.answer(state))
    assert state.answers == {"coder": "Look at the request parser."}
    assert len(answerer.requests) == 1 and len(judge.requests) == 1  # the judge judged, the answerer answered
    assert answerer.requests[0].messages[-1].content == "My Flask app returns 500, where should I look?"
    (finished,) = [p for t, p in events if t == "answer_finished"]
    assert finished["model"] == DEFAULT_ANSWER_MODEL and finished["cuts"] == ["repeat"]
    assert finished["raw"] == looping and finished["fallback"] is None
    assert conv.turns[-1] == Turn("coder", "Look at the request parser.")


def test_without_its_answering_model_a_participant_answers_with_its_own_and_says_so() -> None:
    model = FnModel(lambda r: _judge(r) if r.schema_name else "Check the body parser.", model_id="gemma3-270m")
    conv, events = _conversation({"gemma3-270m": model})
    state = asyncio.run(conv.user_message("500 on empty JSON?"))
    conv.act(state, "coder", "approve")
    asyncio.run(conv.answer(state))
    (finished,) = [p for t, p in events if t == "answer_finished"]
    assert finished["model"] == "gemma3-270m" and state.answers["coder"] == "Check the body parser."
    assert finished["fallback"] == "answering model smollm2-135m is not in the catalog: gemma3-270m answered"
