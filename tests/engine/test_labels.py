"""Labels as data on real databases (SQLite and PostgreSQL): the migration, validation naming the field, the
newest label of an item superseding older ones, and the hand raise's labels from use (Speak / Skip and
@mentions become labels unless JUDGELAB_AUTO_LABELS=0; timeouts and automatic decisions do not)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from engine.labels import LabelError, add_label, count_labels, delete_label, item_key, list_labels
from engine.store import MIGRATIONS, Store


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()


def test_the_labels_table_is_a_migration(store: Store) -> None:
    assert "labels" in inspect(store.engine).get_table_names()
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS) >= 5
    columns = {c["name"] for c in inspect(store.engine).get_columns("labels")}
    assert {"mechanism", "run_id", "item_key", "label", "note", "user_name", "source", "created_at"} <= columns


def test_migration_5_adds_labels_to_a_database_from_before(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store(url)
    with old.engine.begin() as conn:  # the database as version 4 left it
        conn.execute(text("DROP TABLE labels"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version = 5"))
    old.dispose()
    store = Store(url)
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    add_label(store, mechanism="director", item_key="line1", label="OK", user="ann")
    assert [lab.label for lab in list_labels(store)] == ["ok"]
    store.dispose()


def test_a_label_round_trips_and_a_newer_one_supersedes(store: Store) -> None:
    first = add_label(
        store,
        mechanism="handraise",
        run_id="r1",
        item_key=item_key("handraise", turn="t3", participant="coder"),
        label="speak",
        note="<b>not html</b> 日本語",
        source="approval",
        user="ann",
        context={"features": {"pmi_mean": 1.5}},
    )
    assert first.item_key == "t3/coder" and first.user == "ann" and first.context == {"features": {"pmi_mean": 1.5}}
    assert first.note == "<b>not html</b> 日本語" and first.created_at.tzinfo is not None
    add_label(store, mechanism="handraise", run_id="r1", item_key="t3/coder", label="skip", user="ann")
    add_label(store, mechanism="handraise", run_id="r1", item_key="t3/coder", label="speak", user="bob")
    latest = list_labels(store, mechanism="handraise")
    assert [(lab.user, lab.label) for lab in latest] == [("ann", "skip"), ("bob", "speak")]
    assert len(list_labels(store, latest=False)) == 3 and count_labels(store, mechanism="handraise") == 2
    assert count_labels(store, mechanism="jury") == 0
    delete_label(store, latest[0].id)
    assert [(lab.user, lab.label) for lab in list_labels(store, user="ann")] == [("ann", "speak")]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"mechanism": "vibes"}, "mechanism"),
        ({"label": "maybe"}, "label"),
        ({"label": ""}, "label"),
        ({"item_key": "  "}, "item_key"),
        ({"item_key": "x" * 201}, "item_key"),
        ({"source": "telepathy"}, "source"),
        ({"note": "a\x00b"}, "note"),
        ({"note": "n" * 2001}, "note"),
        ({"context": {"x": float("nan")}}, "context"),
        ({"context": ["a"]}, "context"),
    ],
)
def test_a_bad_label_names_its_field_and_writes_nothing(store: Store, fields: dict[str, Any], named: str) -> None:
    base: dict[str, Any] = {"mechanism": "handraise", "item_key": "t1/coder", "label": "speak"}
    with pytest.raises(LabelError, match=f"^{named}:"):
        add_label(store, **(base | fields))
    assert list_labels(store) == []


def test_keys_are_built_one_way() -> None:
    assert item_key("jury", case="pw-leak") == "pw-leak"
    assert item_key("director", line=4) == "line4" and item_key("director", row=4) == "row4"
    assert item_key("confidence", query="What is 2+2?") == item_key("confidence", query="What is 2+2?")
    assert item_key("confidence", query="What is 2+2?").startswith("q:")
    assert item_key("skip", scope="s1", message=7) == "s1#7"
    with pytest.raises(LabelError, match="item_key"):
        item_key("handraise", turn="t1")


def test_the_user_comes_from_settings(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_USER", "researcher-7")
    assert add_label(store, mechanism="skip", item_key="s1#2", label="no_reply").user == "researcher-7"


# -- labels from use --------------------------------------------------------------------------------------------


def _session(store: Store, scores: dict[str, tuple[float, float, float]], **config: Any) -> Any:
    from engine.handraise.cast import DEFAULT_CAST
    from engine.handraise.conversation import ConversationConfig, open_conversation
    from engine.handraise.decisions import HandRaiseConfig
    from tests.fakes.scripted import FnModel

    def reply(request: Any) -> Any:
        if request.schema_name == "HandRaiseJudgment":
            return {
                p: {"relevance": r, "novelty": n, "confidence": c, "reason": "r"} for p, (r, n, c) in scores.items()
            }
        return "an answer"

    model = FnModel(reply, model_id="gemma3-270m", call_log=store)
    cfg = ConversationConfig(participants=DEFAULT_CAST, config=HandRaiseConfig(judge_method="judge", **config))
    return open_conversation(cfg, lambda _id: model, store)


SCORES = {"coder": (0.9, 0.8, 0.9), "designer": (0.9, 0.9, 0.9), "researcher": (0.1, 0.1, 0.1)}


def test_speak_skip_and_mentions_become_labels(store: Store) -> None:
    from engine.handraise.conversation import conversation_turn

    session = _session(store, SCORES)
    conv = session.conversation
    state = asyncio.run(conversation_turn(session, "KeyError in my config loader, @researcher?", answer=False))
    conv.act(state, "coder", "approve")
    conv.act(state, "designer", "skip")
    labels = {lab.item_key: lab for lab in list_labels(store, mechanism="handraise")}
    assert {k: v.label for k, v in labels.items()} == {
        "t1/researcher": "speak",
        "t1/coder": "speak",
        "t1/designer": "skip",
    }
    coder = labels["t1/coder"]
    assert coder.run_id == session.run_id and coder.source == "approval" and coder.context["by"] == "user"
    assert coder.context["predicted"] == "speak" and coder.context["threshold"] == 0.6
    assert coder.context["will"] == pytest.approx(0.5 * 0.9 + 0.3 * 0.8 + 0.2 * 0.9)
    assert labels["t1/researcher"].context["by"] == "mention" and labels["t1/researcher"].context["predicted"] == "skip"


def test_timeouts_batches_and_automatic_decisions_are_not_labels(store: Store) -> None:
    from engine.handraise.conversation import conversation_turn

    session = _session(store, SCORES, card_timeout_s=5, auto_approve_at=0.88)
    conv = session.conversation
    state = asyncio.run(conversation_turn(session, "KeyError in my config loader?", answer=False))
    assert state.resolved["designer"].by == "auto_rule"  # will 0.9 ≥ 0.88
    conv.timeout(state)  # the coder's card times out
    assert state.resolved["coder"].by == "timeout"
    state2 = asyncio.run(conversation_turn(session, "And the tests?", answer=False))
    conv.batch(state2, "approve_all")
    assert list_labels(store) == []


def test_the_setting_turns_labels_from_use_off(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.handraise.conversation import conversation_turn

    monkeypatch.setenv("JUDGELAB_AUTO_LABELS", "0")
    session = _session(store, SCORES)
    state = asyncio.run(conversation_turn(session, "KeyError, @researcher?", answer=False))
    session.conversation.act(state, "coder", "approve")
    assert count_labels(store) == 0


def test_labels_outlive_their_run(store: Store) -> None:
    from engine.events import run_context

    with run_context(store, "director.check", {"text": "hi"}) as run:
        pass
    add_label(store, mechanism="director", run_id=run.run_id, item_key="line1", label="retry", user="ann")
    store.delete_run(run.run_id)
    assert [lab.run_id for lab in list_labels(store)] == [run.run_id]
