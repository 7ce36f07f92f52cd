"""The Hand raise page's session: its key prefix and Details toggle, what a browser session keeps (the open
conversation run, the chat log, the card deadline…), a stored conversation reopened from `?run=ID`, and the
conversation runs the page opens, watches and closes. It draws only the notes these leave."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from dashboard import state
from dashboard.mechanisms.handraise.lines import turn_lines
from engine.handraise.cast import Participant
from engine.handraise.conversation import (
    ConversationConfig,
    ConversationSession,
    close_conversation,
    open_conversation,
    restore_conversation,
)
from engine.handraise.decisions import HandRaiseConfig
from engine.runctx import RunControl, controlled
from models.recording import call_context

KEY = "conv."
DETAILS = "handraise"  # the page's Details toggle (dashboard.components.details_on)


def init_state() -> None:
    """The session's keys at their start values, and the stored conversation of `?run=ID` reopened."""
    st.session_state.setdefault(KEY + "session", None)  # the open conversation run (ConversationSession)
    st.session_state.setdefault(KEY + "conv", None)
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "log", [])  # what the chat shows: user lines, answers, skip lines
    st.session_state.setdefault(KEY + "deadline", None)
    st.session_state.setdefault(KEY + "error", None)
    st.session_state.setdefault(KEY + "reopened", False)
    st.session_state.setdefault(KEY + "miss", False)  # demo mode: a message outside the recording
    wanted = st.query_params.get("run")
    if wanted and wanted != st.session_state[KEY + "run_id"]:
        _reopen(wanted)


def _reopen(run_id: str) -> None:
    """A stored conversation (`?run=ID`, linked from the Runs page), rebuilt from its events: its chat, charts,
    telemetry and What-if, read only — a new message starts a new conversation."""
    store = state.get_store()
    run = store.get_run(run_id)
    st.session_state[KEY + "run_id"] = run_id  # tried once per id, whatever the outcome
    try:
        if run is None or run.kind != "handraise.conversation":
            raise ValueError(f"no stored conversation {run_id}")
        conv = restore_conversation(
            run.config, [(e.type, e.payload) for e in store.events(run_id)], state.get_hub().get
        )
    except ValueError as exc:
        st.session_state.update(
            {
                KEY + "conv": None,
                KEY + "run_id": None,
                KEY + "log": [],
                KEY + "reopened": False,
                KEY + "error": f"Cannot reopen run {run_id}: {exc}",
            }
        )
        return
    log: list[dict[str, Any]] = []
    for turn in conv.states:
        log.append({"kind": "user", "text": turn.text})
        if turn.answered:
            log.extend(turn_lines(turn))
    st.session_state.update(
        {KEY + "conv": conv, KEY + "session": None, KEY + "log": log, KEY + "reopened": True, KEY + "error": None}
    )


def details() -> bool:
    """Whether the page's Details toggle is on (research detail shown)."""
    return bool(st.session_state.get(f"details.{DETAILS}", False))


def new_conversation(cast: list[Participant], config: HandRaiseConfig) -> ConversationSession:
    """`handraise.open_conversation` (the run the CLI's `handraise chat` opens too), watched by the registry:
    closed as interrupted once this browser session is gone or idle too long."""
    session = open_conversation(
        ConversationConfig(participants=cast, config=config), state.get_hub().get, state.get_store()
    )
    state.get_registry().track(session.run_id, alive=_session_alive())
    st.session_state[KEY + "session"] = session
    st.session_state[KEY + "run_id"] = session.run_id
    st.session_state[KEY + "log"] = []
    st.session_state[KEY + "conv"] = session.conversation
    state.clear_reads()
    return session


def _session_alive() -> Any:
    """A check that this browser session still exists (None outside a Streamlit server, e.g. AppTest)."""
    try:
        ctx = get_script_run_ctx()
        runtime = Runtime.instance()
    except RuntimeError:
        return None
    if ctx is None:
        return None
    session_id = ctx.session_id
    return lambda: runtime.is_active_session(session_id)


def _reset_chat() -> None:
    """Every key of the chat back to its start value, and `?run=` out of the URL."""
    for name, value in (
        ("session", None),
        ("conv", None),
        ("run_id", None),
        ("log", []),
        ("deadline", None),
        ("error", None),
        ("pending", None),
        ("streams", {}),
        ("answering", {}),
        ("reopened", False),
        ("miss", False),
    ):
        st.session_state[KEY + name] = value
    st.query_params.pop("run", None)


def handle_new_conversation() -> None:
    """Close this conversation (finished, with its figures: `handraise.close_conversation`) and clear the chat.
    A reopened stored conversation is only left."""
    session: ConversationSession | None = st.session_state[KEY + "session"]
    if session is not None:
        close_conversation(session)
        state.get_registry().release(session.run_id)
    _reset_chat()
    state.clear_reads()


def still_open() -> bool:
    """False (and a note) when the registry closed this conversation after the session went idle."""
    run_id = st.session_state[KEY + "run_id"]
    if not run_id or state.get_registry().touch(run_id):
        return True
    reason = state.get_registry().closed_reason(run_id) or "it was closed"
    _reset_chat()
    st.session_state[KEY + "error"] = f"The previous conversation was closed ({reason}); this message starts a new one."
    return False


def turn_control() -> RunControl:
    """The run control of the turn under way (Cancel stops its judgment and its answers, not the conversation)."""
    control = st.session_state.get(KEY + "turn_control")
    if not isinstance(control, RunControl):
        control = RunControl()
        st.session_state[KEY + "turn_control"] = control
    return control


def submit(coro: Any, purpose: str) -> Any:
    """`coro` on the background loop, under the turn's control, its calls attributed to this run and `purpose`."""
    run_id = st.session_state[KEY + "run_id"]
    control = turn_control()

    async def attributed() -> Any:
        with controlled(control), call_context(run_id=run_id, purpose=purpose):
            return await coro

    return state.get_loop().submit(attributed())
