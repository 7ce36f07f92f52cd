"""The Confidence lab's form: its session-state keys and the URL names of its runs, the factors, counts and weights in
words, the widgets' first values, and the settings a run re-attached from the URL puts back."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.watch import watched_run
from engine.confidence.demo import CONFIDENCE_INPUT
from engine.confidence.evaluation import EvaluationConfig
from engine.confidence.factors import FACTOR_FIELDS, ConfidenceFactors
from engine.confidence.settings import ConfidenceSettings, LevelThresholds

KEY = "confidence."
DETAILS = "confidence"
# The runs shown live in the URL under these names, so a reload or a second tab re-attaches.
EVAL_PARAM, CALIB_PARAM = "eval", "calib"
EVAL_RUN, CALIB_RUN = KEY + "eval_run", KEY + "calib_run"
SLIDERS = {  # name → (label, help)
    "search_avg_score": ("Search avg score", "mean relevance score of the retrieved results"),
    "search_max_score": ("Search max score", "best result's score; ≥ 0.6 makes it the search quality"),
    "search_score_variance": ("Search score variance", "spread of the scores; penalises quality up to 0.15"),
    "source_agreement": ("Source agreement", "mean pairwise similarity of the sources (counts from 2 sources)"),
    "llm_self_confidence": ("LLM self-confidence", "the model's own rating (counts above 0.6)"),
    "tool_success_rate": ("Tool success rate", "used when no executions are counted; < 1 is penalised"),
    "query_coverage": ("Query coverage", "share of the question answered (counts above 0.1)"),
}


COUNTS = {
    "search_result_count": "Search results",
    "source_count": "Sources",
    "tool_execution_count": "Tool executions",
    "tool_success_count": "Tool successes",
}

WEIGHTS = {  # ConfidenceSettings field → the factor it weighs, in words
    "weight_search_quality": "search quality",
    "weight_tool_success": "tool success",
    "weight_source_agreement": "source agreement",
    "weight_self_confidence": "self-confidence",
    "weight_query_coverage": "query coverage",
}
LIVE_DEFAULTS: dict[str, Any] = {
    **CONFIDENCE_INPUT,  # the right example (the demo's first recording)
    "k": 0,
    "self_eval": "signals",
}


THRESHOLDS = ("silent", "notify", "confirm")  # highest first: each must be ≥ the next


def init_state() -> None:
    defaults = ConfidenceFactors()
    for name in FACTOR_FIELDS:
        form.default(KEY + name, getattr(defaults, name))
    t = LevelThresholds()
    for name in ("silent", "notify", "confirm"):
        form.default(KEY + "t_" + name, getattr(t, name))
    st.session_state.setdefault(KEY + "live_error", None)
    st.session_state.setdefault(KEY + "generating", None)
    d = ConfidenceSettings()
    for name in WEIGHTS:
        form.default(KEY + name, getattr(d, name))
    for name, value in LIVE_DEFAULTS.items():  # here, not in the widgets: a reload may put a run's values in
        form.default(KEY + "live_" + name, value)
    form.default(KEY + "critical", False)


def restore_forms() -> None:
    """The runs this page shows come from the URL after a reload: on first sight of each, the form takes its
    settings (before any widget is drawn), so the page shows the run it re-attached to and the next click runs
    the same evaluation, not the defaults."""
    for param, key in ((EVAL_PARAM, EVAL_RUN), (CALIB_PARAM, CALIB_RUN)):
        form.restore_from(key, watched_run(param, key), form_values)


def form_values(run_id: str) -> dict[str, Any] | None:
    """A stored run's settings as the form holds them: thresholds and weights (an evaluation or a calibration),
    and an evaluation's model, query, answer, sources, sampling and self-evaluation. None for a run stored by an
    older version, or one this page did not make (the form stays as it is)."""
    run = state.get_store().get_run(run_id)
    if run is None or not run.kind.startswith("confidence."):
        return None
    try:
        settings = ConfidenceSettings(**(run.config.get("settings") or {}))
        evaluation = EvaluationConfig(**run.config) if run.kind == "confidence.evaluate" else None
    except (TypeError, ValueError):
        return None
    values: dict[str, Any] = {KEY + "t_" + name: getattr(settings.thresholds, name) for name in THRESHOLDS}
    values |= {KEY + "t_note": None} | {KEY + name: getattr(settings, name) for name in WEIGHTS}
    if evaluation is None:
        return values
    availability = state.get_availability().get(evaluation.model_id)
    if availability is not None and availability.available:  # else the picker keeps a model that can run
        values[KEY + "live_model"] = evaluation.model_id
    return values | {
        KEY + "live_query": evaluation.query,
        KEY + "live_answer": evaluation.answer,
        KEY + "live_sources": "\n".join(evaluation.sources),
        KEY + "live_k": min(evaluation.sampling_k, 5),  # the slider's range
        KEY + "live_self_eval": evaluation.self_eval,
    }
