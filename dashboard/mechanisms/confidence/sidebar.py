"""The Confidence lab's sidebar: the level thresholds (kept in order as one slider moves) and the factors' weights — the
settings every tab scores under."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from dashboard import formstate as form
from dashboard.mechanisms.confidence.fields import KEY, THRESHOLDS, WEIGHTS
from engine.confidence.settings import ConfidenceSettings, LevelThresholds


def handle_threshold(changed: str) -> None:
    """Keep SILENT ≥ NOTIFY ≥ CONFIRM as the user moves one slider: the others are pushed along (as the
    handles of a range slider), so every slider shows the threshold in use, and a note says what moved."""
    values = {name: float(st.session_state[KEY + "t_" + name]) for name in THRESHOLDS}
    before = dict(values)
    i = THRESHOLDS.index(changed)
    for j in range(i - 1, -1, -1):  # the thresholds above must not be lower
        values[THRESHOLDS[j]] = max(values[THRESHOLDS[j]], values[THRESHOLDS[j + 1]])
    for j in range(i + 1, len(THRESHOLDS)):  # the thresholds below must not be higher
        values[THRESHOLDS[j]] = min(values[THRESHOLDS[j]], values[THRESHOLDS[j - 1]])
    moved = [name for name in THRESHOLDS if values[name] != before[name]]
    for name in moved:
        form.put(KEY + "t_" + name, values[name])
    st.session_state[KEY + "t_note"] = (
        f"{', '.join(f'{n.upper()} moved to {values[n]:g}' for n in moved)} to keep SILENT ≥ NOTIFY ≥ CONFIRM "
        f"(you set {changed.upper()} to {values[changed]:g})."
        if moved
        else None
    )


def render_settings() -> ConfidenceSettings:
    """The sidebar's thresholds and weights, as the settings the tabs score under (the page stops, saying why,
    on thresholds out of order)."""
    with st.sidebar.expander("Level thresholds", expanded=True):
        values = {
            name: form.field(
                st.slider,
                f"{name.upper()} at ≥",
                KEY + "t_" + name,
                0.0,
                1.0,
                step=0.01,
                on_change=handle_threshold,
                change_args=(name,),
            )
            for name in THRESHOLDS
        }
        if st.session_state.get(KEY + "t_note"):
            st.warning(st.session_state[KEY + "t_note"], icon="↕️")
    try:
        thresholds = LevelThresholds(**values)
    except ValidationError:  # only reachable when the state was set from outside the sliders: say so everywhere
        message = (
            f"Invalid level thresholds (SILENT {values['silent']:g}, NOTIFY {values['notify']:g}, CONFIRM "
            f"{values['confirm']:g}): they must satisfy SILENT ≥ NOTIFY ≥ CONFIRM. Nothing below uses them — "
            "move a slider to fix them."
        )
        st.sidebar.error(message)
        st.error(message)
        st.stop()
    with st.sidebar.expander("Weights"):
        weights = {
            name: form.field(st.number_input, words, KEY + name, 0.0, 5.0, step=0.05) for name, words in WEIGHTS.items()
        }
    return ConfidenceSettings(thresholds=thresholds, **weights)
