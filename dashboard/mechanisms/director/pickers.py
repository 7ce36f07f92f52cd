"""The pickers every tab that calls a model draws: the model, and how its LLM rubric is judged with what the scorecard
measured of that choice."""

from __future__ import annotations

import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.components import md
from dashboard.mechanisms.director.fields import RUBRIC_JUDGES
from engine.director.scorecard import rubric_diagnoses
from engine.director.signals import default_rubric_judge
from models.errors import ModelError


def model_picker(key: str) -> str | None:
    """The model among those available (None, with a warning, when none is)."""
    availability = state.get_availability()
    usable = [m for m, a in availability.items() if a.available]
    if not usable:
        st.warning("No model is available.")
        return None
    catalog = state.get_catalog()
    return form.choice(
        st.selectbox,
        "Model",
        usable,
        key,
        format_func=lambda m: f"{catalog.get(m).profile.icon} {catalog.get(m).profile.name}",
    )


def rubric_judge_picker(key: str, model_id: str | None) -> str:
    """How the LLM rubric is judged (`DirectorConfig.rubric_judge`), wherever a rubric model is picked; under
    it, what the scorecard measured of that model and method (no measurable signal, flat scale), so nobody
    picks a rubric that cannot tell lines apart without being told."""
    default = _default_judge(model_id)
    if st.session_state.get(key + ".default_for") != model_id:  # a new model: its default, unless the user chose
        if key not in st.session_state or st.session_state[key] == st.session_state.get(key + ".default"):
            form.put(key, default)
        st.session_state[key + ".default_for"], st.session_state[key + ".default"] = model_id, default
    method = str(
        form.choice(
            st.selectbox,
            "Rubric judged by",
            RUBRIC_JUDGES,
            key,
            help="signals (the default for the bundled Gemma): each criterion from a signal the model and the "
            "multilingual embedder carry — her voice against her sister's, the partner's line, the topic, length — "
            "through maps fitted on labelled lines; generate: the model writes the five criteria's scores as "
            "JSON; likelihood: each criterion is the expected value over 1-5 of the calibrated likelihood of the "
            "digits (models that can score)",
        )
    )
    if model_id is not None:
        for diagnosis in rubric_diagnoses(state.get_store(), model_id, method):
            if diagnosis.mark in ("no_signal", "flat_scale", "signal"):
                st.caption(md(f"Rubric on {model_id} by {method}: {diagnosis.label} — {diagnosis.text}"))
    return method


def _default_judge(model_id: str | None) -> str:
    """The rubric judge with measured signal on this model (`engine.director.signals.default_rubric_judge`)."""
    try:  # the model that will run (a page under test runs a stand-in under the catalog's id)
        backend = state.get_hub().get(model_id).spec.backend if model_id else None
    except (KeyError, ModelError):
        backend = None
    return default_rubric_judge(model_id, backend)
