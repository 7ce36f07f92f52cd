"""Hand raise: a multi-party chat where every participant's will to speak is judged before anyone answers. Hands
at or above the threshold appear as cards (icon, name, will, one-line reason) to approve or skip, one by one or in
batches, with a countdown when a timeout is set; approved participants answer in parallel, streamed; skips show as
a compact line. Charts, a what-if that re-decides the whole conversation from the recorded components without
calling a model, and tokens against the "everyone answers" baseline. This module draws the page's frame: the
title, the settings, and its five tabs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import details_on, export_buttons
from dashboard.mechanisms.handraise.benchmark_tab import render as render_benchmark
from dashboard.mechanisms.handraise.charts_tab import render_charts
from dashboard.mechanisms.handraise.chat import render_chat
from dashboard.mechanisms.handraise.session import DETAILS, KEY, init_state
from dashboard.mechanisms.handraise.settings import render_settings
from dashboard.mechanisms.handraise.whatif import render_whatif
from engine.handraise.conversation import Conversation


def render() -> None:
    """The page: the title, the Details toggle, the settings, and the Chat, Charts, What-if, Telemetry and Judge
    benchmark tabs."""
    init_state()
    st.title("🙋 Hand raise")
    st.caption(
        "A group chat in which each participant raises a hand only when your message is theirs to answer, and "
        "you choose who speaks."
    )
    details_on(DETAILS, help="Show the judge's machine detail: fitted maps, PMI scores, flags, raw wills.")
    cast, config = render_settings()
    conv: Conversation | None = st.session_state[KEY + "conv"]
    reopened = st.session_state[KEY + "reopened"]  # read only: the chat says so, and what a new one runs with
    if (
        conv is not None
        and not reopened
        and (
            conv.config != config
            or [p.model_dump() for p in conv.participants.values()] != [p.model_dump() for p in cast]
        )
    ):
        st.info("Settings changed: they apply from the next conversation (the What-if tab re-decides this one).")
    chat, charts_tab, whatif_tab, telemetry_tab, bench_tab = st.tabs(
        ["Chat", "Charts", "What-if", "Telemetry", "Judge benchmark"]
    )
    with chat:
        render_chat(cast, config)
    conv = st.session_state[KEY + "conv"]
    with charts_tab:
        if conv is None or not conv.telemetry:
            st.info("Charts appear after the first answered turn.")
        else:
            render_charts(conv)
    with whatif_tab:
        if conv is None or not conv.records:
            st.info("The what-if needs at least one finished turn.")
        else:
            render_whatif(conv)
    with telemetry_tab:
        if conv is None or not conv.telemetry:
            st.info("One row per hand per turn, once a turn is finished.")
        else:
            st.dataframe(pd.DataFrame(conv.telemetry), hide_index=True, width="stretch")
            if st.session_state[KEY + "run_id"]:
                st.caption(f"Events and calls: run `{st.session_state[KEY + 'run_id']}` on the Runs page.")
            export_buttons(state.get_store(), st.session_state[KEY + "run_id"], key=KEY + "export")
    with bench_tab:
        render_benchmark(cast, config)
