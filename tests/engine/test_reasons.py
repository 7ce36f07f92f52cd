"""Issue 25, point 3: a raised hand's reason reads as a sentence built from the item it scored and the message;
the machine reason (PMIs) stays what the judge stores."""

from __future__ import annotations

from engine.handraise.reasons import expertise_reason, reason_sentence, scored_item

KEYERROR = "My Python API returns a KeyError when it reads the database config — how do I debug it?"


def test_the_machine_reason_is_kept_and_read_back() -> None:
    machine = expertise_reason("debugging", 5.27, 6.26)
    assert machine == "closest expertise: debugging (PMI +5.27, best +6.26)"
    assert scored_item(machine) == "debugging" and scored_item(expertise_reason("UI, CSS")) == "UI, CSS"
    assert scored_item("relevant: it knows databases") is None  # a judge's own words


def test_the_sentence_quotes_the_part_of_the_message_the_item_answers() -> None:
    said = reason_sentence(expertise_reason("debugging", 5.27, 6.26), KEYERROR)
    assert said == "asks “how do I debug it?” — my area: debugging"
    assert "PMI" not in said
    said = reason_sentence(expertise_reason("databases", 1.0, 2.0), KEYERROR)
    assert said.startswith("mentions “My Python API returns a KeyError") and said.endswith("my area: databases")
    ja = reason_sentence(expertise_reason("デバッグ"), "このエラーをデバッグする方法は？")
    assert ja == "asks “このエラーをデバッグする方法は？” — my area: デバッグ"


def test_long_messages_are_cut_at_a_word_and_judges_own_reasons_stay() -> None:
    long = "Please " + " ".join(f"word{i}" for i in range(40)) + " statistics?"
    said = reason_sentence(expertise_reason("statistics"), long)
    quoted = said.split("“", 1)[1].split("”", 1)[0]
    assert quoted.endswith("…") and len(quoted.split()) <= 13
    assert reason_sentence("knows the API well", KEYERROR) == "knows the API well"
    assert reason_sentence("", KEYERROR) == ""
    assert reason_sentence(expertise_reason("debugging"), "") == "my area: debugging"
