"""The Hand raise page's Chat tab: the conversation so far (user lines, answers, skip lines, notes), a message
sent and its will judgment watched on the background loop, Cancel for the turn under way, and in demo mode the
next recorded message one click away."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import streamlit as st

from dashboard import demo, state
from dashboard.components import breakable, md, safe_avatar
from dashboard.mechanisms.handraise.answers import start_approved, watch_answers
from dashboard.mechanisms.handraise.cards import render_cards
from dashboard.mechanisms.handraise.lines import turn_lines
from dashboard.mechanisms.handraise.session import (
    KEY,
    details,
    handle_new_conversation,
    new_conversation,
    still_open,
    turn_control,
)
from dashboard.mechanisms.handraise.settings import judged_by
from dashboard.mechanisms.handraise.your_labels import render_your_labels
from engine.handraise.cast import Participant
from engine.handraise.conversation import Conversation, TurnState, conversation_turn
from engine.handraise.decisions import HandRaiseConfig
from engine.runctx import RunControl, controlled


def render_chat(cast: list[Participant], config: HandRaiseConfig) -> None:
    """The Chat tab: New conversation, what judges this one, the labels line, the chat so far, the turn under way
    (its judgment watched, its answers streaming, its cards) and the message box."""
    for name, value in (("pending", None), ("streams", {}), ("answering", {})):
        st.session_state.setdefault(KEY + name, value)
    conv: Conversation | None = st.session_state[KEY + "conv"]
    reopened = st.session_state[KEY + "reopened"]
    # Not in a narrow column: there the label was cut to "New conver…" in a window 1200 px wide.
    st.button("New conversation", key=KEY + "new", disabled=conv is None, on_click=handle_new_conversation)
    if reopened:
        st.info(
            f"Reopened from run {md(st.session_state[KEY + 'run_id'])} (read only): the What-if re-decides it; "
            "New conversation starts a fresh one."
        )
    if conv is not None:  # the settings expander is folded once a conversation runs: what judges it, in one line
        st.caption(md(breakable(judged_by(conv))))
    render_your_labels(config)
    _render_log(list(conv.participants.values()) if conv else cast)
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    if st.session_state[KEY + "miss"]:
        sent = [i["text"] for i in st.session_state[KEY + "log"] if i["kind"] == "user"]
        demo.miss_notice(DEMO_PAGE, key=KEY + "use_recorded", on_use=_use_recorded, sent=sent[-1] if sent else None)
    if (text := st.session_state.pop(KEY + "send", None)) is not None:
        handle_message(text, cast, config)
        st.rerun()
    pending = st.session_state[KEY + "pending"]
    if pending is not None:
        _watch_judgment(pending)
    current: TurnState | None = conv.states[-1] if conv and conv.states and not conv.states[-1].answered else None
    if (pending is not None or current is not None) and not reopened:
        _render_cancel(current)
    if current is not None and not reopened:
        assert conv is not None
        watch_answers(conv, current)
        if current.waiting:
            render_cards(conv, current)
    if demo.enabled() and current is None and pending is None and not reopened:
        _render_recorded_next()
    prompt = st.chat_input(
        "Read only: New conversation starts a fresh one" if reopened else "Message the group (try @all or @coder)",
        key=KEY + "input",
        disabled=current is not None or pending is not None or reopened,
    )
    if prompt:
        handle_message(prompt, cast, config)
        st.rerun()


def _render_log(participants: list[Participant]) -> None:
    """The chat so far: user lines, answers in their participants' bubbles, notes and skip lines."""
    icons = {p.id: p.icon for p in participants}
    names = {p.id: p.name for p in participants}
    # Messages, answers, names, icons and reasons are all untrusted: text, or escaped inside trusted markdown.
    for item in st.session_state[KEY + "log"]:
        if item["kind"] == "user":
            st.chat_message("user").text(item["text"])
        elif item["kind"] == "answer":
            _render_answer(item, icons.get(item["pid"]), names.get(item["pid"], item["pid"]))
        elif item["kind"] == "note":
            st.caption(md(item["text"]))
        else:
            st.caption(md(f"{icons.get(item['pid'], '')} {names.get(item['pid'], item['pid'])} — {item['text']}"))
            if details() and item.get("machine"):
                st.caption(md(breakable(item["machine"])))


def _render_answer(item: dict[str, Any], icon: str | None, name: str) -> None:
    """One answer of the log in its participant's bubble, with its note and its error (a demo miss is said once,
    below the chat, with the recorded input)."""
    with st.chat_message("assistant", avatar=safe_avatar(icon)):
        st.markdown(f"**{md(name)}**")
        empty = "(no usable answer: see the note below)" if item.get("note") else "(no answer)"
        st.text(item["text"] or empty)
        if item.get("note"):
            st.caption(md(item["note"]))
        if item.get("error") and demo.enabled() and demo.is_miss(item["error"]):
            st.session_state[KEY + "miss"] = True  # said once, below, with the recorded input
        elif item.get("error"):
            st.error(md(item["error"], inline=False))


def _render_cancel(current: TurnState | None) -> None:
    """Cancel this turn, while its judgment or its answers are under way ("Cancelling…" once asked)."""
    stopping = bool(current is not None and current.cancelled) or turn_control().cancelled
    st.button(
        "Cancel this turn" if not stopping else "Cancelling…",
        key=KEY + "cancel_turn",
        disabled=stopping,
        on_click=handle_cancel_turn,
        help="Stop the judgment or the answers under way: what was said is kept and the conversation goes on.",
    )


DEMO_PAGE = "handraise"  # its recorded messages in data/demo/manifest.json


def _recorded_messages() -> list[str]:
    page = demo.page_demo(DEMO_PAGE)
    return list(page.inputs) if page is not None else []


def next_recorded(sent: Sequence[str], recorded: Sequence[str]) -> str | None:
    """The recorded message to send next: the one after those sent, while the chat has followed the recording
    (a message of its own makes every later judgment a miss, so none is offered then)."""
    if list(sent) != list(recorded[: len(sent)]) or len(sent) >= len(recorded):
        return None
    return recorded[len(sent)]


def _render_recorded_next() -> None:
    """Demo mode: the next recorded message, one click to send (the chat box cannot be prefilled)."""
    sent = [i["text"] for i in st.session_state[KEY + "log"] if i["kind"] == "user"]
    text = next_recorded(sent, _recorded_messages())
    if text is None:
        return
    st.button(
        f"Send the recorded message: “{text}”",
        key=KEY + "send_recorded",
        type="primary",
        on_click=lambda: st.session_state.update({KEY + "send": text}),
    )


def _use_recorded() -> None:
    """The miss notice's button: a new conversation that starts with the first recorded message (the message
    outside the recording is in this one's context, so every later judgment would miss too)."""
    handle_new_conversation()
    recorded = _recorded_messages()
    if recorded:
        st.session_state[KEY + "send"] = recorded[0]


def handle_message(text: str, cast: list[Participant], config: HandRaiseConfig) -> None:
    """Judge the wills on the background loop; the page watches the judgment (it never waits on it)."""
    still_open()
    session = st.session_state[KEY + "session"] or new_conversation(cast, config)
    st.session_state[KEY + "error"] = None
    st.session_state[KEY + "log"].append({"kind": "user", "text": text})
    # `conversation_turn` judges and decides what decides itself (attributed to the run); cards and answers follow.
    # The turn has its own run control: Cancel stops its judgment and its answers, not the conversation.
    control = RunControl()
    st.session_state[KEY + "turn_control"] = control

    async def turn() -> Any:
        with controlled(control):
            return await conversation_turn(session, text, answer=False)

    st.session_state[KEY + "pending"] = state.get_loop().submit(turn())


def handle_cancel_turn() -> None:
    """Cancel the running turn: its judgment stops before its next call (a local generation at its next
    token), its answers keep what they streamed, the cards still waiting are skipped; the turn is stored with
    a `turn_cancelled` event and every event it completed, and the conversation goes on."""
    reason = "cancelled by the user"
    turn_control().cancel(reason)
    conv: Conversation | None = st.session_state[KEY + "conv"]
    current = conv.states[-1] if conv and conv.states and not conv.states[-1].answered else None
    if conv is not None and current is not None and st.session_state[KEY + "pending"] is None:
        conv.cancel_turn(current, reason)
        st.session_state[KEY + "deadline"] = None


def _watch_judgment(pending: Any) -> None:
    @st.fragment(run_every=0.3)
    def judging() -> None:
        if not pending.done():
            st.caption("⏳ judging who wants to speak…")
            return
        st.session_state[KEY + "pending"] = None
        conv: Conversation = st.session_state[KEY + "conv"]
        if pending.cancelled():  # Cancel during the judgment: the turn ended there (stored `turn_cancelled`)
            if conv.states and conv.states[-1].cancelled == "judging":
                st.session_state[KEY + "log"].extend(turn_lines(conv.states[-1]))
            state.clear_reads()
            st.rerun()
        try:
            turn = pending.result()
        except Exception as exc:  # the message stays in the log; the failure is shown, nothing recorded is lost
            if demo.enabled() and demo.is_miss(exc):
                st.session_state[KEY + "miss"] = True  # a notice with the recorded input, not an error
            else:
                st.session_state[KEY + "error"] = f"The will judgment failed: {exc}"
        else:
            if turn_control().cancelled:  # cancelled as the judgment came in: no card waits, no answer starts
                conv.cancel_turn(turn, turn_control().cancel_reason or "cancelled by the user")
            st.session_state[KEY + "deadline"] = (
                time.monotonic() + conv.config.card_timeout_s if conv.config.card_timeout_s and turn.waiting else None
            )
            start_approved(conv, turn)
        st.rerun()

    judging()
