"""The Factors tab: the factor sliders and counts (each saying when it does not count) beside the score they give."""

from __future__ import annotations

import streamlit as st

from dashboard import formstate as form
from dashboard.mechanisms.confidence.fields import COUNTS, KEY, SLIDERS
from dashboard.mechanisms.confidence.score import not_counted, render_score
from engine.confidence.factors import FACTOR_FIELDS, ConfidenceFactors
from engine.confidence.settings import ConfidenceSettings


def _factors_from_state() -> ConfidenceFactors:
    values = {name: st.session_state[KEY + name] for name in FACTOR_FIELDS}
    for name in COUNTS:
        values[name] = int(values[name])
    values["is_search_step"] = bool(values["is_search_step"])
    return ConfidenceFactors(**values)


def render_factors(settings: ConfidenceSettings) -> None:
    """The Factors tab: the inputs beside the score they give under `settings`."""
    # The inputs and the score side by side at 1440 px; one under the other in a narrow window, where fixed
    # columns cut the labels ('Searc…', 'Tool executi ons') and the level ('NO…').
    row = st.container(horizontal=True, wrap=True, gap="medium")  # 300 + 620 + the gap: a 1440 px window's main
    inputs, results = row.container(width=300), row.container(width=620)
    with inputs:
        form.field(
            st.toggle,
            "Search step",
            KEY + "is_search_step",
            help="A search step's base is its search quality; other steps take a weighted mean.",
        )
        factors_now = _factors_from_state()
        for name, (label, help_text) in SLIDERS.items():
            form.field(st.slider, label, KEY + name, 0.0, 1.0, step=0.01, help=help_text)
            if name in ("search_avg_score", "search_max_score"):
                continue  # the three search sliders make one factor: said once, under the last of them
            if (why := not_counted(name, factors_now, settings)) is not None:
                st.caption(f"⊘ not counted: {why}")
        left, right = st.columns(2)
        form.field(left.number_input, COUNTS["search_result_count"], KEY + "search_result_count", 0, 1000)
        form.field(right.number_input, COUNTS["source_count"], KEY + "source_count", 0, 1000)
        form.field(left.number_input, COUNTS["tool_execution_count"], KEY + "tool_execution_count", 0, 1000)
        executed = int(st.session_state[KEY + "tool_execution_count"])
        if st.session_state[KEY + "tool_success_count"] > executed:
            form.put(KEY + "tool_success_count", executed)
        form.field(right.number_input, COUNTS["tool_success_count"], KEY + "tool_success_count", 0, max(executed, 0))
        st.button("Reset factors", key=KEY + "reset", on_click=handle_reset)
    with results:
        factors = _factors_from_state()
        render_score(factors, settings, key=KEY + "manual")


def handle_reset() -> None:
    defaults = ConfidenceFactors()
    form.restore({KEY + name: getattr(defaults, name) for name in FACTOR_FIELDS})
