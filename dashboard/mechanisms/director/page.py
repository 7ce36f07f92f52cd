"""The Director lab page (pages/director.py): its title, the characters it knows, and its three tabs — one line
through every rule (matches highlighted), a batch you can retune instantly, and a duo simulator where two characters
talk and every line goes through the director — each drawn by its own module, with the tab's export box."""

from __future__ import annotations

import streamlit as st

from dashboard.components import md
from dashboard.mechanisms.director.batch import render_batch
from dashboard.mechanisms.director.check import render_check
from dashboard.mechanisms.director.duo import render_duo
from dashboard.mechanisms.director.fields import BATCH_RUN, CHECK_RUN, DUO_RUN, init_state, restore_forms
from dashboard.mechanisms.director.runs import export_tab
from engine.config import ConfigError
from engine.director.config import list_characters, load_character


def render() -> None:
    """The Director lab: the title, the characters (an error when one cannot be read), the forms' first values
    (or a re-attached run's) and the three tabs, each with its run's export box."""
    st.title("🎬 Director lab")
    st.caption(
        "Hard rules, then an LLM rubric, decide PASS / WARN / RETRY for a character's line — or MODIFY, when the "
        "director can mend it itself (too long, a praise word said alone, a doubled ！). Rules are code (instant, no "
        "model); the rubric runs only when the rules do not already say RETRY."
    )
    try:
        characters = list_characters()
        profiles = {c: load_character(c) for c in characters}
    except ConfigError as exc:
        st.error(md(exc, inline=False))
        return
    init_state(profiles)
    restore_forms(profiles)
    check_tab, batch_tab, duo_tab = st.tabs(["Check a line", "Batch", "Duo simulator"])
    with check_tab:
        render_check(profiles)
        export_tab(CHECK_RUN, "check")
    with batch_tab:
        render_batch(profiles)
        export_tab(BATCH_RUN, "batch")
    with duo_tab:
        render_duo(profiles)
        export_tab(DUO_RUN, "duo")
