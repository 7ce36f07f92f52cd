"""The Hand raise page's live turn (AppTest): an approved card's answer starts at once and streams in its
own chat bubble below the conversation (never inside a card) while other cards still wait; the turn closes
when the last card is decided; "New conversation" clears the chat and closes the run. Answers come from a
scripted model with latency; the wills from the embedding judge (no model call)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from models.types import Request
from tests.dashboard.test_handraise_page import _page, settle
from tests.fakes.scripted import FnModel


class AnsweringHub:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.models: dict[str, FnModel] = {}

    def get(self, model_id: str, **_: Any) -> FnModel:
        if model_id not in self.models:

            def answer(request: Request) -> str:
                return f"Answer of {request.messages[0].content.split(',')[0][-30:]}"

            self.models[model_id] = FnModel(answer, model_id=model_id, delay_s=self.delay_s, call_log=state.get_store())
        return self.models[model_id]


@pytest.fixture
def slow_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnsweringHub]:
    hub = AnsweringHub(delay_s=1.5)
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    yield hub


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _order(at: AppTest) -> list[str]:
    """The page top to bottom: 'chat:<text>' for chat bubbles' texts, 'cards' for the cards' header."""
    out = []
    for node in _walk(at._tree):
        if getattr(node, "type", None) == "chat_message":
            texts = [getattr(n, "value", "") for n in _walk(node) if getattr(n, "type", None) == "text"]
            out.append("chat:" + " ".join(str(t) for t in texts))
        elif getattr(node, "type", None) == "markdown" and "Hands up" in str(getattr(node, "value", "")):
            out.append("cards")
    return out


@pytest.mark.model  # the packaged embedder
def test_an_approved_answer_streams_at_once_apart_from_the_cards(slow_answers: AnsweringHub) -> None:
    at = AppTest.from_function(_page, default_timeout=300).run()
    at.selectbox(key="conv.method").set_value("embedding")
    at.slider(key="conv.threshold").set_value(0.0).run()
    at.chat_input(key="conv.input").set_value("@all how should I name this function?").run()
    settle(at)
    approve = sorted(b.key for b in at.button if b.key and b.key.startswith("conv.approve."))
    assert len(approve) == 3
    at.button(key=approve[0]).click().run()
    # The answer has started while two cards still wait: its bubble is below the chat, above the cards.
    assert len([b for b in at.button if b.key and b.key.startswith("conv.approve.")]) == 2
    order = _order(at)
    assert order.index("cards") == len(order) - 1 and order[-2].startswith("chat:")
    deadline = time.monotonic() + 30
    while "Answer of" not in _order(at)[-2]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
        at.run()
    assert "cards" in _order(at)  # the others still wait, and the answer is already shown
    for key in sorted(b.key for b in at.button if b.key and b.key.startswith("conv.skip.")):
        at.button(key=key).click().run()
    settle(at)
    assert not at.exception and "cards" not in _order(at)
    run_id = at.session_state["conv.run_id"]
    types = [e.type for e in state.get_store().events(run_id)]
    assert types.count("answer_finished") == 1 and types.count("skip") == 2 and "turn_closed" in types
    assert types.index("answer_started") < max(i for i, t in enumerate(types) if t == "hand_decision")

    # New conversation: the old chat leaves the screen and its run is closed as finished.
    at.button(key="conv.new").click().run()
    assert not at.chat_message and at.session_state["conv.log"] == []
    assert state.get_store().get_run(run_id).status == "finished"  # type: ignore[union-attr]
