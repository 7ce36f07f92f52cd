"""The Confidence lab page (pages/confidence.py): its title, the sidebar's settings and the four tabs — factors →
score → level, and why; live evaluation; multi-step plans; calibration — each drawn by its own module."""

from __future__ import annotations

import streamlit as st

from dashboard.components import GLOSSARY, details_on
from dashboard.mechanisms.confidence.calibration import render_calibration
from dashboard.mechanisms.confidence.factors import render_factors
from dashboard.mechanisms.confidence.fields import DETAILS, init_state, restore_forms
from dashboard.mechanisms.confidence.live import render_live
from dashboard.mechanisms.confidence.plan import render_plan
from dashboard.mechanisms.confidence.sidebar import render_settings


def render() -> None:
    """The Confidence lab: its form's first values (or a re-attached run's), the title, the sidebar's settings
    and the four tabs, each scoring under them."""
    init_state()
    restore_forms()
    st.title("🎚️ Confidence lab")
    st.caption(
        "How sure an agent should be before it acts on its own: evidence becomes a score, and the score decides "
        "whether it proceeds silently, notifies, asks to confirm or escalates.",
        help=GLOSSARY["GRACE"],
    )
    details_on(DETAILS, help="Show the score's formula, the factors as JSON and the self-evaluation's fitted map.")
    settings = render_settings()
    factors_tab, live_tab, plan_tab, calib_tab = st.tabs(["Factors", "Live", "Multi-step plan", "Calibration"])
    with factors_tab:
        render_factors(settings)
    with live_tab:
        render_live(settings)
    with plan_tab:
        render_plan(settings)
    with calib_tab:
        render_calibration(settings)
