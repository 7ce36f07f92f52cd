"""The hand-raise gate (issue 37, point 3): a message that asks nothing — a greeting, a thank-you, small talk — is
relevant to nobody, in English and Japanese; the offline judges multiply relevance by p(the message asks)."""

from __future__ import annotations

import asyncio

import pytest

from engine.embeddings import USE_ID, get_embedder
from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.decisions import Components, HandRaiseConfig, stored_config
from engine.handraise.gate import GATE, asks, gate_problem, gated, load_gate
from engine.handraise.judge import WillJudge
from engine.handraise.label_refit import will_under
from engine.judgemaps import load_calibration
from models.registry import ModelHub


def test_gated_relevance_drops_only_where_the_message_likely_asks_nothing() -> None:
    c = Components(model="coder", relevance=0.8, novelty=0.5, confidence=0.6, reason="my area: Python")
    [low] = gated([c], 0.1)
    assert low.relevance == 0.08 and low.features["needs_answer"] == 0.1
    assert "asks nothing" in low.reason and low.flags == ["gate:0.10"]
    [high] = gated([c], 0.9)  # a message that likely asks: relevance as the maps give it
    assert high.relevance == 0.8 and high.reason == "my area: Python" and high.features["needs_answer"] == 0.9


def test_the_setting_is_stored_for_the_offline_judges_only_and_old_runs_replay_ungated() -> None:
    assert HandRaiseConfig().gate is True
    assert HandRaiseConfig(judge_method="likelihood").model_dump(mode="json")["gate"] is True
    assert "gate" not in HandRaiseConfig(judge_method="judge").model_dump(mode="json")
    old = HandRaiseConfig(judge_method="likelihood").model_dump(mode="json")
    old.pop("gate")
    assert stored_config(old).gate is False  # recorded before the gate: its hands were judged without it


def test_a_label_refit_reads_the_gate_the_hand_was_judged_with() -> None:
    cal = load_calibration("handraise.embedding", "use-m3")
    assert cal is not None
    row = {
        "participant": "coder",
        "last_cos": 0.6,
        "last_rel": 0.2,
        "last_exp_cos": 0.6,
        "last_exp_rel": 0.2,
        "answer_cos": 0.0,
        "own_cos": 0.0,
    }
    config = HandRaiseConfig(judge_method="embedding")
    assert will_under(cal, row | {"needs_answer": 0.05}, config) < will_under(cal, row, config)


def test_the_shipped_gate_map_is_checked() -> None:
    cal = load_gate()
    assert cal is not None and gate_problem(cal) == "" and cal.metrics["diagnosis"]["mark"] == "signal"
    assert set(cal.metrics["by_language"]) == {"en", "ja"}
    short = cal.model_copy(update={"maps": {"asks": cal.maps["asks"].model_copy(update={"features": ["x"]})}})
    assert "512 dimensions" in gate_problem(short)
    assert GATE == cal.name


@pytest.mark.model  # the multilingual embedder
@pytest.mark.parametrize(
    ("message", "asks_something"),
    [
        ("おはようございます！今日も一日がんばりましょう", False),
        ("ありがとうございました、とても助かりました。", False),
        ("Morning all, what a lovely sunny day!", False),
        ("Cheers, that's everything I needed.", False),
        ("Pythonで辞書のキーが無いときのKeyErrorはどう防げばいいですか？", True),
        ("Does anyone know how to reset my password?", True),
    ],
)
def test_the_gate_reads_whether_a_message_asks(message: str, asks_something: bool) -> None:
    cal = load_gate()
    assert cal is not None
    p = asks(cal, get_embedder(USE_ID), message)
    assert (p >= 0.5) is asks_something, p


@pytest.mark.model
@pytest.mark.parametrize("greeting", ["こんにちは！今日はいい天気ですね", "Hi everyone, happy Friday!"])
def test_a_greeting_raises_no_hand_with_the_embedding_judge(greeting: str) -> None:
    config = HandRaiseConfig(judge_method="embedding")
    comps, _ = asyncio.run(WillJudge(DEFAULT_CAST, ModelHub().get, config).judge([Turn("user", greeting)]))
    assert comps and all(c.features["needs_answer"] < 0.5 for c in comps)
    from engine.handraise.decisions import will_from

    assert all(will_from(c.relevance, c.novelty, c.confidence) < config.threshold for c in comps)
    ungated, _ = asyncio.run(
        WillJudge(DEFAULT_CAST, ModelHub().get, config.model_copy(update={"gate": False})).judge(
            [Turn("user", greeting)]
        )
    )
    assert all("needs_answer" not in c.features for c in ungated)


@pytest.mark.parametrize("value", [float("nan"), -1.0, -1e6, 2.0, "0.1", None, True, [0.1]])
def test_a_damaged_stored_gate_reads_as_no_gate(value: object) -> None:
    from engine.handraise.gate import closed, gate_value

    assert gate_value(value) == 1.0 and closed(value) == 1.0


def test_a_stored_gate_closes_only_below_half() -> None:
    from engine.handraise.gate import closed

    assert closed(0.2) == 0.2 and closed(0.7) == 1.0


def test_a_config_that_is_not_an_object_is_a_clear_error() -> None:
    for data in (None, 5, [1]):
        with pytest.raises(ValueError, match="must be an object"):
            stored_config(data)  # type: ignore[arg-type]


def test_a_vector_of_the_wrong_size_leaves_the_hands_ungated_and_flagged() -> None:
    import numpy as np

    from engine.handraise.gate import gate_components

    class Short:
        def embed(self, texts):
            return np.zeros((len(texts), 511))

    c = Components(model="coder", relevance=0.8, novelty=0.5, confidence=0.6)
    [out] = gate_components([c], [Turn("user", "hello")], lambda: Short())  # type: ignore[arg-type, return-value]
    assert out.relevance == 0.8 and any(f.startswith("gate_failed:") and "511 dimensions" in f for f in out.flags)
