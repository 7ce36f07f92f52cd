"""Confidence lab: factors → score → level, and why; live evaluation; multi-step plans; calibration."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from dashboard import charts, demo, state
from dashboard import formstate as form
from dashboard.components import (
    GLOSSARY,
    breakable,
    calibration_note,
    details_on,
    export_buttons,
    flow_columns,
    md,
    metric_row,
)
from dashboard.labelling import label_buttons, run_item
from dashboard.watch import Collected, is_live, start_error, start_watched, watch_run, watched_run
from engine.confidence.aggregation import ConfidenceAggregator
from engine.confidence.calibration import (
    CalibrationConfig,
    LabelError,
    LabelledItem,
    calibrate_labels,
    calibration_report,
    parse_labels,
)
from engine.confidence.demo import CONFIDENCE_EXAMPLES, CONFIDENCE_INPUT
from engine.confidence.evaluation import EvaluationConfig, answer_judged, evaluate, generate_answer
from engine.confidence.factors import FACTOR_FIELDS, ConfidenceFactors, FactorError, parse_factors
from engine.confidence.levels import LEVEL_NAMES, decide_action, decide_level
from engine.confidence.likelihood import CONFIDENCE
from engine.confidence.score import calculate, search_quality
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings, LevelThresholds
from engine.confidence.signals import EMBEDDER, READER, SIGNALS, SIGNALS_ID
from engine.config import get_settings
from engine.diagnostics import diagnosis_for
from engine.inputs import InputError, MissingFile, read_text, read_upload, shown_problems
from engine.runctx import RunControl, controlled
from engine.stats import fmt, wilson
from models.errors import ModelError, ReplayMiss

KEY = "confidence."
DETAILS = "confidence"
# The runs shown live in the URL under these names, so a reload or a second tab re-attaches.
EVAL_PARAM, CALIB_PARAM = "eval", "calib"
EVAL_RUN, CALIB_RUN = KEY + "eval_run", KEY + "calib_run"
LABELS_FILE = "benchmarks/confidence.jsonl"
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


def _init_state() -> None:
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


def render() -> None:
    _init_state()
    _restore_forms()
    st.title("🎚️ Confidence lab")
    st.caption(
        "How sure an agent should be before it acts on its own: evidence becomes a score, and the score decides "
        "whether it proceeds silently, notifies, asks to confirm or escalates.",
        help=GLOSSARY["GRACE"],
    )
    details_on(DETAILS, help="Show the score's formula, the factors as JSON and the self-evaluation's fitted map.")
    settings = _render_settings()
    factors_tab, live_tab, plan_tab, calib_tab = st.tabs(["Factors", "Live", "Multi-step plan", "Calibration"])
    with factors_tab:
        _render_factors(settings)
    with live_tab:
        _render_live(settings)
    with plan_tab:
        _render_plan(settings)
    with calib_tab:
        _render_calibration(settings)


THRESHOLDS = ("silent", "notify", "confirm")  # highest first: each must be ≥ the next


def _restore_forms() -> None:
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


def _render_settings() -> ConfidenceSettings:
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


def _factors_from_state() -> ConfidenceFactors:
    values = {name: st.session_state[KEY + name] for name in FACTOR_FIELDS}
    for name in COUNTS:
        values[name] = int(values[name])
    values["is_search_step"] = bool(values["is_search_step"])
    return ConfidenceFactors(**values)


def _render_factors(settings: ConfidenceSettings) -> None:
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
        _render_score(factors, settings, key=KEY + "manual")


def not_counted(name: str, factors: ConfidenceFactors, settings: ConfidenceSettings) -> str | None:
    """Why a slider's factor does not count in the score now (None when it counts): the spec's inclusion rules
    (`engine.confidence.calculate`), in words, for the caption next to the slider."""

    search = name.startswith("search_")
    if factors.is_search_step and not search and name != "tool_success_rate":
        return "a search step's score is its search quality (and tool success)"
    if search:
        if factors.is_search_step:
            return None
        quality = search_quality(factors, settings)
        if quality > settings.include_search_quality_above:
            return None
        return (
            f"the search quality these give ({quality:.2f}) counts only above {settings.include_search_quality_above:g}"
        )
    if name == "source_agreement" and factors.source_count < settings.include_agreement_min_sources:
        return f"needs {settings.include_agreement_min_sources} or more sources (now {factors.source_count})"
    if name == "llm_self_confidence" and factors.llm_self_confidence <= settings.include_self_confidence_above:
        return f"the model's own rating counts only above {settings.include_self_confidence_above:g}"
    if name == "query_coverage" and factors.query_coverage <= settings.include_query_coverage_above:
        return f"coverage counts only above {settings.include_query_coverage_above:g}"
    if name == "tool_success_rate" and factors.tool_execution_count:
        return "the tool counts below decide it (successes / executions)"
    return None


ANSWER_JUDGES = {"llm_self_confidence": "self-confidence", "query_coverage": "query coverage"}  # in words
FACTOR_WORDS = charts.FACTOR_WORDS


def live_trust(factors: ConfidenceFactors, settings: ConfidenceSettings, flagged: Sequence[str]) -> tuple[bool, str]:
    """Whether a live result can be trusted, and the sentence that says so: which factors fell back or did not
    count, and what the score stands on. The factors that judge the answer itself (self-confidence, coverage)
    are the key ones: when none of them counts, the score rests on evidence that says nothing about whether the
    answer is right (source agreement, a tool success of 1 when no tool ran), and the result is not trustworthy."""
    score = calculate(factors, settings)
    used = {n: c for n, c in score.breakdown.items() if c.included}
    missing = []
    for name, words in ANSWER_JUDGES.items():
        if name in flagged:
            missing.append(f"its {words} could not be measured")
        elif name not in used:
            missing.append(f"its {words} did not count ({not_counted(name, factors, settings)})")

    def shown(name: str) -> str:
        if name == "tool_success" and not factors.tool_execution_count:
            return f"{FACTOR_WORDS[name]} {used[name].value:.2f}, a full mark only because no tool was used"
        return f"{FACTOR_WORDS.get(name, name)} {used[name].value:.2f}"

    rest = "; ".join(shown(n) for n in used) or "nothing"
    trusted = answer_judged(factors, settings, flagged)  # the engine's rule: the run stores the same
    if not missing:
        judged = " and ".join(ANSWER_JUDGES.values())
        return True, f"The answer was judged ({judged} both counted): the score {score.score:.3f} stands on {rest}."
    said = "; ".join(missing)
    if trusted:
        return True, f"{said[0].upper()}{said[1:]}. The score {score.score:.3f} stands on the rest: {rest}."
    level = decide_level(score.score, settings.thresholds).value
    return False, (
        f"Not trustworthy, so a person checks it (ESCALATE, not {level}): nothing judged the answer itself — "
        f"{said}. The score {score.score:.3f} rests only on {rest}. These cannot tell a right answer from a "
        "wrong one."
    )


ACTION_WORDS = {  # the engine's suggested actions ('proceed with status'), as a stakeholder reads them
    "SILENT": "go ahead without asking",
    "NOTIFY": "go ahead, and tell the user what it did",
    "CONFIRM": "ask the user to confirm before acting",
    "ESCALATE": "stop and ask the user to clarify",
}


def shown_level(trusted: bool, level: str) -> str:
    """The level the page shows: the score's, unless the result is not trustworthy — then ESCALATE (a person
    checks it), never a SILENT that reads as "fine, go ahead" next to "not trustworthy"."""
    return level if trusted else "ESCALATE"


def _render_score(
    factors: ConfidenceFactors,
    settings: ConfidenceSettings,
    failed: list[str] | None = None,
    *,
    key: str,
    flagged: Sequence[str] | None = None,
) -> None:
    """The score of `factors`: gauge, level, penalties and breakdown. `key` tells the figures of the manual tab
    from the live result's (the same factors give the same figures, which Streamlit would refuse twice). A live
    result (`flagged`: its fallen-back factors) says first whether it can be trusted (`live_trust`)."""
    score = calculate(factors, settings)
    decision = decide_action(score, settings)
    thresholds = settings.thresholds.model_dump()
    trusted, sentence = live_trust(factors, settings, flagged) if flagged is not None else (True, "")
    if sentence:
        (st.success if trusted and not failed else st.warning)(md(sentence), icon="✅" if trusted else "⚠️")
    level = shown_level(trusted, decision.level.value)
    # The gauge and the figures side by side where they fit, one under the other in a narrow window (in fixed
    # columns the level was cut to 'NO…' at 900 px).
    row = st.container(horizontal=True, wrap=True, gap="medium")  # 340 + 240 + the gap fit the 620 px results
    dial, figures = row.container(width=340), row.container(width=240)
    dial.plotly_chart(
        charts.confidence_gauge(
            score.score, thresholds, level, title=None if trusted else f"ESCALATE (score says {decision.level.value})"
        ),
        key=key + ".gauge",
    )
    with figures:
        st.metric("Score", f"{score.score:.3f}", help="clamped to [0, 1], rounded to 3 decimals")
        if trusted:
            st.metric("Level", level)
            st.markdown(f"**Suggested action:** {ACTION_WORDS.get(level, decision.suggested_action)}")
            st.caption(decision.reason)
        else:
            st.metric(
                "Level",
                level,
                delta=f"the score alone: {decision.level.value}",
                delta_color="off",
                delta_arrow="off",
                help="Nothing judged the answer itself, so the score cannot say it is right: a person checks it.",
            )
            st.markdown("**Suggested action:** check the answer yourself before the agent acts on it")
    if failed:  # full width: in the gauge's column the sentences wrapped a few words a line
        st.caption("Fallbacks:  \n" + "  \n".join(md(f) for f in failed))
    if st.session_state.get(f"details.{DETAILS}", False):
        st.info(score.reason)
    st.plotly_chart(
        charts.penalty_waterfall(
            score.base,
            [p.model_dump() for p in score.penalties],
            score.score,
            {k: v.model_dump() for k, v in score.breakdown.items()},
        ),
        key=key + ".penalties",
    )
    st.plotly_chart(
        charts.breakdown_bars({k: v.model_dump() for k, v in score.breakdown.items()}), key=key + ".breakdown"
    )
    if st.session_state.get(f"details.{DETAILS}", False):
        with st.expander("Factors as JSON (for `judgelab confidence score --factors …`)"):
            st.code(json.dumps(factors.model_dump(), ensure_ascii=False), language="json")


def _render_live(settings: ConfidenceSettings) -> None:
    availability = state.get_availability()
    usable = [mid for mid, a in availability.items() if a.available]
    if not usable:
        st.warning("No model is available for the LLM factors.")
        return
    catalog = state.get_catalog()
    model_id = form.choice(
        st.selectbox,
        "Evaluating model",
        usable,
        KEY + "live_model",
        format_func=lambda m: f"{catalog.get(m).profile.icon} {catalog.get(m).profile.name}",
    )
    _take_generated()
    examples = st.container(horizontal=True, gap="small")
    for name, words in (("right", "Example: right answer"), ("wrong", "Example: wrong answer")):
        examples.button(
            words,
            key=KEY + "example_" + name,
            on_click=handle_example,
            args=(name,),
            help="Put this example's query, answer and sources in the boxes below (both are in the demo recording)",
        )
    form.field(st.text_input, "Query", KEY + "live_query")
    form.field(st.text_area, "Answer", KEY + "live_answer", height=90)
    generating = st.session_state[KEY + "generating"]
    st.button(
        "Generate the answer with the model",
        key=KEY + "live_generate",
        on_click=handle_generate,
        args=(model_id,),
        disabled=generating is not None,
    )
    if generating is not None:
        _watch_generation(generating)
    form.field(st.text_area, "Sources (one per line)", KEY + "live_sources", height=90)
    form.field(
        st.slider, "Sampling consistency: answers to sample when there are no sources (0 = off)", KEY + "live_k", 0, 5
    )
    self_eval = form.choice(
        st.selectbox,
        "Self-evaluation by",
        ["signals", "generate", "likelihood"],
        KEY + "live_self_eval",
        help="signals (default): SmolLM2's and the multilingual embedder's readings of the answer — against the "
        "sources when there are any, against what SmolLM2 knows when not — through maps fitted on labelled "
        "answers: the self-confidence and the query coverage; generate: the model writes its accuracy, relevance "
        "and style as JSON; likelihood (no usable signal on the bundled model): p(supported) from the PMI of "
        "'The answer is correct / supported' against 'wrong / made up', through the fitted map in data/calibration/",
    )
    if self_eval in ("likelihood", "signals"):
        judge, judge_model = (SIGNALS, SIGNALS_ID) if self_eval == "signals" else (CONFIDENCE, model_id)
        diagnosis = diagnosis_for(judge, judge_model)
        if diagnosis is not None:
            who = (
                f"{READER} reads the answer and {EMBEDDER} compares it, whichever model is picked above"
                if self_eval == "signals"
                else model_id
            )
            st.caption(md(f"Self-evaluation judge ({who}): {diagnosis.label} — {diagnosis.text}"))
    if st.session_state.get(f"details.{DETAILS}", False):
        st.caption(md(breakable(_self_eval_caption(model_id, self_eval))))
    run_id = watched_run(EVAL_PARAM, EVAL_RUN)
    live = is_live(run_id)
    if st.button(
        "Evaluate",
        type="primary",
        key=KEY + "live_run",
        disabled=live,
        help="An evaluation is going: watch it below, or cancel it" if live else None,
    ):
        if handle_evaluate(model_id, settings):
            st.rerun()  # drawn again with Evaluate off while the run goes
    start_error(EVAL_RUN)
    if st.session_state[KEY + "live_error"]:
        st.error(md(st.session_state[KEY + "live_error"], inline=False))
    if st.session_state.pop(KEY + "live_miss", False):
        demo.miss_notice("confidence", key=KEY + "use_recorded", on_use=handle_reset_live)
    if not run_id:
        return
    st.markdown(f"Recorded as run `{run_id}` (Runs page).")
    stale = stale_inputs(state.get_store().get_run(run_id))
    if stale:
        st.warning(f"This result is for an earlier {stale}: press Evaluate for the ones above.", icon="⚠️")
    view = watch_run(run_id, Collected, _render_factor_rows, key=KEY + "eval_watch")
    result = view.result if view is not None else None
    if not isinstance(result, dict):
        return
    export_buttons(state.get_store(), run_id, key=KEY + "export")
    run = state.get_store().get_run(run_id)
    self_eval = str((run.config if run is not None else {}).get("self_eval", "generate"))  # stored before: generate
    failed = [_fallback_detail(r, self_eval) for r in result["results"] if r["flagged"]]
    flagged = [str(r["name"]) for r in result["results"] if r["flagged"]]
    used = (run.config if run is not None else {}).get("settings") or {}  # the settings the run scored under
    floor = float(used.get("include_self_confidence_above", DEFAULT_SETTINGS.include_self_confidence_above))
    exempt = float(used.get("no_sources_exempt_self_confidence", DEFAULT_SETTINGS.no_sources_exempt_self_confidence))
    sourceless = not ConfidenceFactors(**result["factors"]).source_count
    reading = judge_reading(result["results"], floor, sourceless=sourceless, exempt=exempt)
    if reading:
        st.markdown(reading)  # numbers and fixed words only: nothing untrusted to escape
    _render_score(ConfidenceFactors(**result["factors"]), settings, failed, key=KEY + "live", flagged=flagged)
    _render_answer_label(run_id)
    if result.get("samples"):
        with st.expander("Sampled answers"):
            for sample in result["samples"]:
                st.text(sample)


def _render_answer_label(run_id: str) -> None:
    """Under the Live result, "the answer was right / wrong": your label of the evaluated answer, which the Labels
    page compares with what the score decided (a silent level trusts the answer: "right")."""
    item = run_item(run_id)
    if item is None:
        return
    st.markdown("**Was the answer right?**")
    label_buttons(
        "confidence",
        item.key,
        run_id=run_id,
        key=KEY + "live_label",
        context=item.context,
        prompt="Your judgment of the answer",
    )


def _render_factor_rows(view: Collected, live: bool) -> None:
    """The factors as they arrive (one `confidence_factor` event each), final once the run has ended."""
    rows = [
        {"factor": r["name"], "value": round(r["value"], 3), "fallback": r["flagged"], "detail": r["detail"]}
        for r in view.of("confidence_factor")
    ]
    if rows and not st.session_state.get(f"details.{DETAILS}", False):
        return  # the per-factor table (values, flags, the model's raw text) is research detail
    if rows:
        st.dataframe(
            pd.DataFrame(rows),
            hide_index=True,
            width="stretch",
            column_config={  # the factor pinned; the detail (why it fell back) takes the rest
                "factor": st.column_config.TextColumn("factor", pinned=True, width=150),
                "value": st.column_config.NumberColumn("value", width=60),
                "fallback": st.column_config.CheckboxColumn("fallback", width=70),
                "detail": st.column_config.TextColumn("detail", width="large"),
            },
        )
    elif live:
        st.caption("Computing the LLM and embedding factors…")


def _default_plan() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": "search docs",
                "is_search_step": True,
                "search_result_count": 5,
                "search_avg_score": 0.62,
                "search_max_score": 0.78,
                "search_score_variance": 0.05,
                "source_count": 5,
                "source_agreement": 0.0,
                "llm_self_confidence": 0.5,
                "tool_success_rate": 1.0,
                "query_coverage": 0.0,
            },
            {
                "step": "call API",
                "is_search_step": False,
                "search_result_count": 0,
                "search_avg_score": 0.0,
                "search_max_score": 0.0,
                "search_score_variance": 1.0,
                "source_count": 1,
                "source_agreement": 0.0,
                "llm_self_confidence": 0.7,
                "tool_success_rate": 0.75,
                "query_coverage": 0.0,
            },
            {
                "step": "write answer",
                "is_search_step": False,
                "search_result_count": 0,
                "search_avg_score": 0.0,
                "search_max_score": 0.0,
                "search_score_variance": 1.0,
                "source_count": 3,
                "source_agreement": 0.82,
                "llm_self_confidence": 0.85,
                "tool_success_rate": 1.0,
                "query_coverage": 0.8,
            },
        ]
    )


PLAN_COLUMNS: dict[str, Any] = {
    "step": st.column_config.TextColumn("step", pinned=True),
    "is_search_step": st.column_config.CheckboxColumn("search step"),
    **{name: st.column_config.NumberColumn(label.lower()) for name, (label, _) in SLIDERS.items()},
    **{name: st.column_config.NumberColumn(label.lower()) for name, label in COUNTS.items()},
}


def _render_plan(settings: ConfidenceSettings) -> None:
    st.caption("Edit the steps; each row is scored, then the plan is aggregated by every method side by side.")
    plan = st.data_editor(
        _default_plan(),
        num_rows="dynamic",
        key=KEY + "plan",
        width="stretch",
        column_config=PLAN_COLUMNS,  # the factors' names in words, not their identifiers
    )
    critical = form.field(st.toggle, "Critical-step check (any step < 0.3 → mean × 0.7)", KEY + "critical")
    if plan.empty:
        st.info("Add a step.")
        return
    rows, problems = [], []
    for i, row in plan.iterrows():
        values = {k: row[k] for k in plan.columns if k in FACTOR_FIELDS and pd.notna(row[k])}
        for name in COUNTS:
            if name in values:
                values[name] = int(values[name])
        if "is_search_step" in values:
            values["is_search_step"] = bool(values["is_search_step"])
        try:
            rows.append((str(row.get("step") or f"step {i + 1}"), parse_factors(values)))
        except FactorError as exc:  # names the field
            problems.append(f"row {i + 1}: {exc}")
    for problem in problems:
        st.error(md(problem))
    if not rows:
        return
    scores = [calculate(f, settings) for _, f in rows]
    levels = [decide_level(s.score, settings.thresholds).value for s in scores]
    aggregator = ConfidenceAggregator(critical_check=critical)
    aggregates = {m: aggregator.aggregate(scores, m) for m in ConfidenceAggregator.METHODS}
    metric_row(
        [
            {
                "label": method,
                "value": f"{value:.3f}",
                "delta": decide_level(value, settings.thresholds).value,
                "delta_color": "off",
            }
            for method, value in aggregates.items()
        ]
    )
    st.plotly_chart(charts.step_scores([n for n, _ in rows], [s.score for s in scores], levels, aggregates))
    details = st.session_state.get(f"details.{DETAILS}", False)  # the formula names the factors' identifiers
    st.dataframe(
        pd.DataFrame(
            [
                {"step": n, "score": s.score, "level": lv} | ({"formula": s.reason} if details else {})
                for (n, _), s, lv in zip(rows, scores, levels, strict=True)
            ]
        ),
        hide_index=True,
        width="stretch",
    )


def _labels_path() -> Path:
    return get_settings().data_dir / LABELS_FILE


@st.cache_data(show_spinner=False)
def _load_labels(text: str, source: str) -> tuple[list[LabelledItem], list[str]]:
    """`engine.confidence.parse_labels`, cached per text: the items, or the problems of every bad row."""
    try:
        return parse_labels(text, source), []
    except LabelError as exc:
        return [], exc.problems  # at most `Problems.KEEP` of them, and their count


def _render_calibration(settings: ConfidenceSettings) -> None:
    upload = st.file_uploader("Labelled set (JSONL of {factors, correct})", type=["jsonl"], key=KEY + "upload")
    if upload is not None:
        try:
            text, source = read_upload(upload.name, upload.getvalue()), upload.name
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return
    else:
        path = _labels_path()
        try:
            text, source = read_text(path), path.name
        except MissingFile:
            text, source = "", path.name
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return
    items, problems = _load_labels(text, source)
    if problems:
        st.error(md("bad rows, nothing imported — " + "; ".join(shown_problems(problems))))
        return
    if not items:
        st.info("No labelled items.")
        return
    report = calibration_report(items, settings)

    def spread(key: str) -> str:
        ci = report.get(f"{key}_ci")
        return f" ({ci[0]:.2f}–{ci[1]:.2f})" if isinstance(ci, list) else ""

    metric_row(
        [
            ("Items", report["n"]),
            {
                "label": "Accuracy",
                "value": f"{report['accuracy']:.2f}{spread('accuracy')}",
                "help": "the share of right answers, with its 95 % interval",
            },
            {
                "label": "ECE",
                "value": f"{report['ece']:.3f}{spread('ece')}",
                "help": "expected calibration error over 10 bins (lower is better), with its 95 % bootstrap interval",
            },
            {
                "label": "AUC",
                "value": "—" if report.get("auc") is None else f"{report['auc']:.2f}{spread('auc')}",
                "help": "do right answers score higher than wrong ones? 0.5 is a coin flip",
            },
            {
                "label": "AURC",
                "value": f"{report['aurc']:.3f}{spread('aurc')}",
                "help": "area under the risk–coverage curve (lower is better), with its 95 % bootstrap interval",
            },
        ]
    )
    st.caption(
        f"{report['n']} labelled items: one item moves a rate by {100 / max(report['n'], 1):.0f} points — the "
        "intervals say how far the figures could move on another set of this size."
    )
    st.caption(f"Source: {md(source)}. Move the thresholds in the sidebar: shares and markers move at once.")
    run_id = watched_run(CALIB_PARAM, CALIB_RUN)
    live = is_live(run_id)
    if st.button("Record this calibration as a run", key=KEY + "calib_record", disabled=live):
        run_id = handle_calibrate(source, items, settings) or run_id
    start_error(CALIB_RUN)
    if run_id:
        watch_run(run_id, Collected, _render_calibrated, key=KEY + "calib_watch")
    st.plotly_chart(charts.level_shares(report["level_shares"]))
    left, right = flow_columns(2, width=400)  # one under the other in a narrow window (legends overlapped)
    left.plotly_chart(charts.reliability_diagram(report["bins"], report["ece"]))
    right.plotly_chart(charts.risk_coverage_curve(report["risk_coverage"], report["thresholds"]))
    st.dataframe(
        pd.DataFrame(
            {
                "level": list(LEVEL_NAMES),
                "count": [report["level_counts"][lv] for lv in LEVEL_NAMES],
                "answers right (95 % interval)": [
                    level_accuracy_text(report["accuracy_by_level"][lv], report["level_counts"][lv])
                    for lv in LEVEL_NAMES
                ],
            }
        ).set_index("level"),
        width="stretch",
    )
    with st.expander("Items"):
        st.dataframe(
            pd.DataFrame(report["items"])[["id", "query", "correct", "score", "level"]],
            hide_index=True,
            width="stretch",
        )


def level_accuracy_text(accuracy: float | None, count: int) -> str:
    """'0.80 (0.49–0.94)': the share of right answers at a level with its Wilson interval — at 7–13 items a
    level, one item moves it by 8–14 points."""
    if accuracy is None or not count:
        return "—"
    interval = wilson(round(accuracy * count), count)
    return fmt(accuracy, interval)


def _render_calibrated(view: Collected, live: bool) -> None:
    if not live and view.summary is not None:
        run_id = st.session_state.get(CALIB_RUN)
        st.caption(f"Recorded as run {md(run_id)} (Runs page): ECE {view.summary.get('ece', 0):.3f}.")


def handle_calibrate(source: str, items: list[LabelledItem], settings: ConfidenceSettings) -> str | None:
    """`confidence.calibrate_labels` (no model call) started in the registry; the page watches it."""
    config = CalibrationConfig(labels=source, items=items, settings=settings)
    store = state.get_store()
    return start_watched(
        "confidence.calibrate",
        config.model_dump(mode="json"),
        lambda: calibrate_labels(config, None, store),
        param=CALIB_PARAM,
        key=CALIB_RUN,
    )


def handle_reset() -> None:
    defaults = ConfidenceFactors()
    form.restore({KEY + name: getattr(defaults, name) for name in FACTOR_FIELDS})


def handle_generate(model_id: str) -> None:
    """Generate an answer on the background loop (one model call, recorded); the page watches it (with a Cancel
    that stops a local generation at its next token) and puts the answer into the Answer box once it is in."""
    st.session_state[KEY + "live_error"] = None
    model = state.get_hub().get(model_id)
    control = RunControl()
    st.session_state[KEY + "generate_control"] = control
    query = st.session_state[KEY + "live_query"]

    async def generate() -> str:
        with controlled(control):
            return await generate_answer(model, query)

    st.session_state[KEY + "generating"] = state.get_loop().submit(generate())


def _watch_generation(pending: Any) -> None:
    control = st.session_state.get(KEY + "generate_control")

    @st.fragment(run_every=0.3)
    def generating() -> None:
        if not pending.done():
            left, right = st.columns([5, 1])
            left.caption("⏳ generating the answer…")
            if isinstance(control, RunControl):
                right.button("Cancel", key=KEY + "generate_cancel", on_click=control.cancel)
            return
        st.rerun()  # the answer box takes it before it is drawn (`_take_generated`)

    generating()


def stale_inputs(run: Any) -> str:
    """'' when the shown result was evaluated on the query, answer and sources now in the boxes, else which of
    them changed since (an example picked, a box edited): the result is not theirs."""
    config = run.config if run is not None else {}
    now = {
        "query": st.session_state.get(KEY + "live_query", ""),
        "answer": st.session_state.get(KEY + "live_answer", ""),
        "sources": [s for s in str(st.session_state.get(KEY + "live_sources", "")).splitlines() if s.strip()],
    }
    then = {
        "query": config.get("query", ""),
        "answer": config.get("answer", ""),
        "sources": [s for s in config.get("sources") or [] if str(s).strip()],
    }
    changed = [name for name in now if now[name] != then[name]]
    return " and ".join([", ".join(changed[:-1]), changed[-1]] if len(changed) > 1 else changed)


def judge_reading(
    results: Sequence[dict[str, Any]], floor: float, *, sourceless: bool = False, exempt: float | None = None
) -> str:
    """What the judge read of the answer, in one sentence: p(supported) beside the self-confidence it became on
    the seed's scale (only where the self-evaluation gave a calibrated probability, not a fallback)."""
    by_name = {str(r.get("name")): r for r in results}
    self_conf = by_name.get("llm_self_confidence") or {}
    p = self_conf.get("probability")
    if p is None or self_conf.get("flagged"):
        return ""
    value = float(self_conf.get("value") or 0.0)
    words = "as likely right as wrong" if 0.4 <= p <= 0.6 else ("likely right" if p > 0.6 else "likely wrong")
    coverage = by_name.get("query_coverage") or {}
    covers = (
        f"; it covers the question at {float(coverage.get('value') or 0.0):.2f}"
        if coverage and not coverage.get("flagged")
        else ""
    )
    sentence = (
        f"**The judge read p(supported) = {float(p):.2f}** ({words}), which is a self-confidence of {value:.2f} "
        f"on the seed's scale ({floor:g} + {1 - floor:g} × p){covers}."
    )
    if sourceless and exempt is not None:
        sentence += (
            f" Without sources that clears the seed's bar of {exempt:g} for going on the answer alone, so no "
            "no-sources penalty."
            if value >= exempt
            else f" Without sources the seed asks {exempt:g} to go on the answer alone: under it, the no-sources "
            "penalty applies."
        )
    return sentence


def handle_example(name: str) -> None:
    """An example button: its query, answer and sources in the Live tab's boxes."""
    st.session_state[KEY + "live_error"] = None
    form.restore({KEY + "live_" + field: value for field, value in CONFIDENCE_EXAMPLES[name].items()})


def handle_reset_live() -> None:
    """The demo notice's button: the Live tab's recorded query, answer and sources back in their boxes."""

    form.restore({KEY + "live_" + name: value for name, value in CONFIDENCE_INPUT.items()})


def _take_generated() -> None:
    """A generated answer that is in goes into the Answer box (before the box is drawn); a failure is shown."""
    pending = st.session_state[KEY + "generating"]
    if pending is None or not pending.done():
        return
    st.session_state[KEY + "generating"] = None
    if pending.cancelled():
        st.session_state[KEY + "live_error"] = "Generation cancelled: the Answer box is as it was."
        return
    try:
        form.put(KEY + "live_answer", pending.result())
    except (ModelError, ReplayMiss) as exc:  # demo mode's miss is shown here, not by the app
        if demo.enabled() and demo.is_miss(exc):  # a notice with the recorded input, not an error
            st.session_state[KEY + "live_miss"] = True
            return
        st.session_state[KEY + "live_error"] = str(exc)
    except Exception as exc:  # e.g. a cancelled future: said, never a traceback
        st.session_state[KEY + "live_error"] = f"The answer could not be generated: {type(exc).__name__}: {exc}"


FALLBACK_TO = {  # factor → what it falls back to, in words
    "llm_self_confidence": "fell back to {value:g} (neutral)",
    "query_coverage": "fell back to {value:g} and is left out of the weighted mean",
    "sampling_consistency": "is not used (source agreement keeps its value)",
}


def _fallback_detail(result: dict[str, Any], self_eval: str = "generate") -> str:
    """A flagged factor in plain words: which factor, how it was judged, what it fell back to and why (from
    its flags and detail, `engine.confidence`'s FactorResult). Plain text: the page escapes it (`md`), as the
    reason can quote a model's or a server's message."""
    name = str(result.get("name", ""))
    label = SLIDERS.get(name, (name.replace("_", " ").capitalize(), ""))[0]
    if name == "llm_self_confidence":
        how = {"likelihood": "by likelihood", "signals": "read from SmolLM2's and the embedder's signals"}.get(
            self_eval, "written as JSON by the model"
        )
    elif name == "query_coverage":
        how = "read from the answer–question cosine" if self_eval == "signals" else "generated by the JSON judge"
    elif name == "sampling_consistency":
        how = "from sampled answers"
    else:
        how = ""
    flags = [str(f) for f in result.get("flags") or []]
    detail = str(result.get("detail") or "")
    fields = [f.removeprefix("invalid:") for f in flags if f.startswith("invalid:")]
    if "invalid:likelihood_features" in flags:
        why = "the likelihood features were not finite numbers (an option got no probability) — no usable signal"
    elif "truncated" in flags:
        why = "the model's answer was cut off at its token limit"
    elif fields:
        why = "the model's answer had no valid " + ", ".join(fields)
    elif name == "sampling_consistency":
        why = detail or "too few answers could be sampled"
    elif detail.startswith("fallback"):
        why = "the model call failed: " + detail.split(": ", 1)[-1]
    else:
        why = detail or "no reason recorded"
    what = FALLBACK_TO.get(name, "fell back to {value:g}").format(value=float(result.get("value") or 0.0))
    return f"{label}" + (f" ({how})" if how else "") + f" {what} — {why}"


def _self_eval_caption(model_id: str, self_eval: str) -> str:
    """The self-evaluation method in use and, by likelihood, its fitted map."""

    if self_eval == "signals":
        return f"Self-evaluation and query coverage by signals · {calibration_note(SIGNALS, SIGNALS_ID)}"
    if self_eval != "likelihood":
        return f"Self-evaluation: {model_id} writes it (JSON, validated field by field)."
    diagnosis = diagnosis_for(CONFIDENCE, model_id)  # the engine decides whether the map carries signal
    return f"Self-evaluation by likelihood · {calibration_note(CONFIDENCE, model_id)}" + (
        f" — {diagnosis.label}: {diagnosis.text} (generate is the default)"
        if diagnosis is not None and diagnosis.mark == "no_signal"
        else ""
    )


def handle_evaluate(model_id: str, settings: ConfidenceSettings) -> str | None:
    """One `confidence.evaluate` run through `engine.confidence.evaluate`, the entry point the CLI calls too,
    started in the registry (an identical one still going is attached to); the page watches it."""
    st.session_state[KEY + "live_error"] = None
    try:
        config = EvaluationConfig(
            model_id=model_id,
            query=st.session_state[KEY + "live_query"],
            answer=st.session_state[KEY + "live_answer"],
            sources=st.session_state[KEY + "live_sources"].splitlines(),
            sampling_k=int(st.session_state[KEY + "live_k"]),
            self_eval=st.session_state.get(KEY + "live_self_eval", "signals"),
            settings=settings,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        st.session_state[KEY + "live_error"] = f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
        return None
    hub, store = state.get_hub(), state.get_store()
    return start_watched(
        "confidence.evaluate",
        config.model_dump(mode="json"),
        lambda: evaluate(config, hub.get, store),
        param=EVAL_PARAM,
        key=EVAL_RUN,
    )


if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
