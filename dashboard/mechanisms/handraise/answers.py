"""The answers of a Hand raise turn: every approved participant answers at once on the background loop, its
answer streamed into its own chat bubble, and the turn closes into the chat log once every card is decided and
every answer is in."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import state
from dashboard.components import md, safe_avatar
from dashboard.mechanisms.handraise.lines import turn_lines
from dashboard.mechanisms.handraise.session import KEY, submit
from engine.handraise.conversation import Conversation, TurnState


def start_approved(conv: Conversation, turn: TurnState) -> None:
    """Every approved participant starts answering now, whether or not other cards still wait."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    streams: dict[str, str] = st.session_state[KEY + "streams"]
    for pid, r in turn.resolved.items():
        if not r.approved or pid in answering or pid in turn.answers:  # (a cancelled turn's unstarted answers)
            continue
        streams[pid] = ""

        def on_chunk(who: str, text: str) -> None:  # on the loop's thread: a plain dict update
            streams[who] = streams.get(who, "") + text

        answering[pid] = submit(conv.answer_one(turn, pid, on_chunk=on_chunk), "handraise.answer")


def watch_answers(conv: Conversation, turn: TurnState) -> None:
    """The answers of this turn stream into their own chat bubbles, below the conversation and apart from
    the cards; once every card is decided and every answer is in, the turn closes."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    streams: dict[str, str] = st.session_state[KEY + "streams"]
    running = any(not f.done() for f in answering.values())

    @st.fragment(run_every=0.3 if running else None)
    def answers() -> None:
        for pid, future in list(answering.items()):
            p = conv.participants[pid]
            with st.chat_message("assistant", avatar=safe_avatar(p.icon)):
                st.markdown(f"**{md(p.name)}**")
                # streamed as text: an answer's markdown is not rendered
                st.text((streams.get(pid, "") + ("" if future.done() else "▌")) or "…")
        if not turn.waiting and all(f.done() for f in answering.values()):
            _close_turn(conv, turn)
            st.rerun()
        elif running and all(f.done() for f in answering.values()):
            st.rerun()  # the answers are in: stop refreshing

    answers()


def _close_turn(conv: Conversation, turn: TurnState) -> None:
    """Every card decided and every approved answer in: close the turn and write it into the chat log."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    for pid, future in answering.items():
        exc = future.exception() if not future.cancelled() else None
        if exc is not None or future.cancelled():  # a failure that is no model error (e.g. a replay miss)
            turn.answers.setdefault(pid, st.session_state[KEY + "streams"].get(pid, "").strip())
            turn.answer_errors.setdefault(pid, f"{type(exc).__name__}: {exc}" if exc else "cancelled")
    try:
        conv.close_answers(turn)
    except ValueError as exc:
        st.session_state[KEY + "error"] = f"Answering failed: {exc}"
        return
    st.session_state[KEY + "log"].extend(turn_lines(turn))
    st.session_state[KEY + "deadline"] = None
    st.session_state[KEY + "answering"] = {}
    st.session_state[KEY + "streams"] = {}
    state.clear_reads()
