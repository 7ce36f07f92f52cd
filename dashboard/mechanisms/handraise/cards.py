"""The Hand raise cards: one card per hand up (icon, name, will, the reason in words) with Speak and Skip, the
batch buttons under them, and the countdown of the card timeout."""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from dashboard.components import breakable, md
from dashboard.mechanisms.handraise.answers import start_approved
from dashboard.mechanisms.handraise.lines import unread_note
from dashboard.mechanisms.handraise.session import KEY, details, still_open
from engine.handraise.conversation import Conversation, TurnState
from engine.handraise.decisions import failure_flags
from engine.handraise.reasons import reason_sentence


def render_cards(conv: Conversation, turn: TurnState) -> None:
    """The cards of the hands still waiting, the batch buttons, and the countdown when a card timeout is set."""
    deadline = st.session_state[KEY + "deadline"]
    st.markdown("**Hands up** — approve who speaks")
    if (note := unread_note(turn)) is not None:
        st.caption(note)
    for hand in turn.waiting:
        p = conv.participants[hand.model]
        with st.container(border=True):
            # Text above, buttons in a row that wraps: side by side in columns, a 900 px window cut them to "S…".
            left = st.container()
            said = reason_sentence(hand.reason, turn.text)
            left.markdown(
                f"🙋 {md(p.icon)} **{md(p.name)}** wants to speak (will **{hand.will:.2f}**)"
                + (f" — {md(said)}" if said else "")
            )
            if failure_flags(hand.flags):
                left.caption("⚠ The judgment of this hand failed, so it counts as 0 (see Details).")
            if details():
                left.caption(
                    md(breakable(f"judge: {hand.reason or '—'} · flags: {', '.join(hand.flags) or '—'}"))
                    + (
                        f" · raw {hand.raw_will:.2f}, cooldown {hand.cooldown_delta:+.2f}, "
                        f"over-raise ×{hand.over_raise_factor:g}"
                        if hand.cooldown_delta or hand.over_raise_factor != 1
                        else ""
                    )
                )
            row = st.container(horizontal=True, wrap=True)
            row.button(
                "Speak",
                key=f"{KEY}approve.{turn.turn_id}.{hand.model}",
                type="primary",
                on_click=_decide,
                args=(conv, turn, "act", hand.model, "approve"),
            )
            row.button(
                "Skip",
                key=f"{KEY}skip.{turn.turn_id}.{hand.model}",
                on_click=_decide,
                args=(conv, turn, "act", hand.model, "skip"),
            )
    batch = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    batch.button(
        "Approve all", key=f"{KEY}all.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "approve_all", None)
    )
    batch.button(
        "Skip all", key=f"{KEY}none.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "skip_all", None)
    )
    at = batch.number_input("Auto-approve will ≥", 0.0, 1.0, 0.8, 0.05, key=f"{KEY}at.{turn.turn_id}", width=180)
    batch.button(
        "Apply ≥ X", key=f"{KEY}atgo.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "auto_at", at)
    )
    if deadline is not None:
        _countdown(conv, turn, deadline)


def _decide(conv: Conversation, turn: TurnState, how: str, what: str, arg: Any) -> None:
    """A card callback: record the decision, and let every newly approved participant start answering."""
    if turn.answered or not still_open():
        return
    if how == "act":
        if what not in {h.model for h in turn.waiting}:
            return  # a second click on a card already decided
        conv.act(turn, what, arg)
    else:
        conv.batch(turn, what, arg)
    start_approved(conv, turn)


def _countdown(conv: Conversation, turn: TurnState, deadline: float) -> None:
    @st.fragment(run_every=1.0)
    def countdown() -> None:
        left = deadline - time.monotonic()
        if left > 0:
            st.caption(f"⏳ {left:.0f} s left, then every waiting card is {conv.config.timeout_action}ped")
            return
        if turn.waiting:
            conv.timeout(turn)
            start_approved(conv, turn)
        st.session_state[KEY + "deadline"] = None
        st.rerun()

    countdown()
