"""The Live tab's form: the evaluating model, the example buttons, the query, the answer (typed or generated), the
sources, sampling and the self-evaluation, and the Evaluate button; the result under it is `live_result`'s."""

from __future__ import annotations

from typing import Any

import streamlit as st
from pydantic import ValidationError

from dashboard import demo, state
from dashboard import formstate as form
from dashboard.components import breakable, calibration_note, md
from dashboard.mechanisms.confidence.fields import DETAILS, EVAL_PARAM, EVAL_RUN, KEY
from dashboard.mechanisms.confidence.live_result import render_live_result
from dashboard.watch import is_live, start_error, start_watched, watched_run
from engine.confidence.demo import CONFIDENCE_EXAMPLES, CONFIDENCE_INPUT
from engine.confidence.evaluation import EvaluationConfig, evaluate, generate_answer
from engine.confidence.likelihood import CONFIDENCE
from engine.confidence.settings import ConfidenceSettings
from engine.confidence.signals import EMBEDDER, READER, SIGNALS, SIGNALS_ID
from engine.diagnostics import diagnosis_for
from engine.runctx import RunControl, controlled
from models.errors import ModelError, ReplayMiss


def render_live(settings: ConfidenceSettings) -> None:
    """The Live tab: the form — the evaluating model, the answer to judge and how — the Evaluate button, and the
    evaluation it started (`render_live_result`)."""
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
    _render_answer_inputs(model_id)
    _render_self_eval(model_id)
    run_id = _render_evaluate(model_id, settings)
    if not run_id:
        return
    render_live_result(run_id, settings)


def _render_answer_inputs(model_id: str) -> None:
    """The example buttons, the query, the answer with its Generate button (and the generation going), the
    sources and the sampling slider."""
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


def _render_self_eval(model_id: str) -> None:
    """How the answer judges itself: the method's picker, what was measured of its judge, and (details on) the
    method with its fitted map."""
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


def _render_evaluate(model_id: str, settings: ConfidenceSettings) -> str | None:
    """The Evaluate button (off while an evaluation goes) and what stopped the last click — an error, or in demo
    mode a notice offering the recorded input: the run the tab shows, None before any."""
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
    return run_id


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
