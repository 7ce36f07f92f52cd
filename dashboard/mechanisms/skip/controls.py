"""The Skip cache page's controls: the workload (an uploaded JSONL, or a generated one's channels, hours, bursts and
seed) and the "Thresholds and checker" expander — the skip windows by confidence, the checker's interval, minimum
wait and error policy, and the judge (the recorded judgments or a live model and its method), with a line saying
what judges and its fitted map's signal."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import demo, state
from dashboard import formstate as form
from dashboard.components import breakable, calibration_note, duration, flow_columns, md
from dashboard.mechanisms.skip.fields import DETAILS, KEY, RECORDED, recording
from engine.diagnostics import diagnosis_for
from engine.inputs import InputError, read_upload, shown_problems
from engine.skip.config import FailurePolicy, JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.likelihood import SKIP
from engine.skip.messages import Message
from engine.skip.run import FileRef
from engine.skip.workload import WorkloadError, WorkloadSpec, parse_workload

Workload = WorkloadSpec | tuple[list[Message], FileRef]  # generated, or an uploaded file's messages


def render_controls() -> tuple[Workload, ResponseConfig, str]:
    spec = _render_workload()
    with st.expander("Thresholds and checker", expanded=True):
        high, high_s, mid, mid_s, default_s = _render_windows()
        interval, min_wait, policy = _render_checker()
        judge_choice = _render_judge()
    config = ResponseConfig(
        check_interval_seconds=int(interval),
        min_wait_seconds=int(min_wait),
        failure_policy=FailurePolicy(policy),
        judgment_skip=JudgmentSkipConfig(
            thresholds=[
                JudgmentSkipThreshold(min_confidence=float(high), skip_seconds=int(high_s)),
                JudgmentSkipThreshold(min_confidence=float(mid), skip_seconds=int(mid_s)),
            ],
            default_skip_seconds=int(default_s),
        ),
    )
    return spec, config, judge_choice


def _render_workload() -> Workload:
    """The workload: an uploaded file's messages if one is given (and reads), else the generated one's spec (the
    default where the options ask for more messages than a simulation may hold)."""
    d = WorkloadSpec()
    with st.expander("Workload", expanded=False):
        upload = st.file_uploader(
            "Workload JSONL ({t, channel, thread, id, author, text} a line) — or generate one below",
            type=["jsonl"],
            key=KEY + "upload",
        )
        c = flow_columns(5, width=150)
        channels = form.field(c[0].number_input, "Channels", KEY + "channels", 1, 500)
        hours = form.field(c[1].number_input, "Hours", KEY + "hours", 1.0, 72.0, step=1.0)
        rate = form.field(c[2].number_input, "Bursts / channel / hour", KEY + "rate", 0.01, 5.0, step=0.05)
        burst = form.field(c[3].number_input, "Messages per burst", KEY + "burst", 1.0, 20.0, step=0.5)
        seed = form.field(c[4].number_input, "Seed", KEY + "seed", 0, 10_000)
    try:
        spec: Workload = WorkloadSpec(
            channels=int(channels),
            hours=float(hours),
            bursts_per_hour=float(rate),
            mean_burst_messages=float(burst),
            seed=int(seed),
        )
    except ValueError as exc:  # more messages than a simulation may hold: say so, simulate the default
        st.error(f"Workload: {str(exc).splitlines()[-1]} — simulating the default workload instead.")
        spec = d
    if upload is not None:
        try:
            content = read_upload(upload.name, upload.getvalue())
            messages = parse_workload(content, upload.name)
            spec = (messages, FileRef.of(upload.name, content, len(messages)))
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
        except WorkloadError as exc:
            st.error(
                "Nothing imported — fix these rows:\n\n" + "\n".join(f"- {md(p)}" for p in shown_problems(exc.problems))
            )
    return spec


def _render_windows() -> tuple[Any, Any, Any, Any, Any]:
    """The skip windows: how long a judgment at high, at mid and at lower confidence is trusted, in words below."""
    c = flow_columns(5, width=150)
    high = form.field(c[0].slider, "High confidence ≥", KEY + "high", 0.5, 1.0, step=0.05)
    high_s = form.field(c[1].number_input, "…skip seconds", KEY + "high_s", 0, 172800, step=600)
    mid = form.field(c[2].slider, "Mid confidence ≥", KEY + "mid", 0.0, 1.0, step=0.05)
    mid_s = form.field(c[3].number_input, "…skip seconds ", KEY + "mid_s", 0, 172800, step=300)
    default_s = form.field(c[4].number_input, "Otherwise skip seconds", KEY + "default_s", 0, 86400, step=60)
    st.caption(  # the seconds in words: 43200 reads as 12 h
        f"A judgment at confidence ≥ {high:g} is trusted for {duration(high_s)}, at ≥ {mid:g} for "
        f"{duration(mid_s)}, otherwise for {duration(default_s)} — unless a new message arrives first."
    )
    return high, high_s, mid, mid_s, default_s


def _render_checker() -> tuple[Any, Any, str]:
    """The checker: its interval, the minimum wait before a message is judged, and what a judge error does."""
    c2 = flow_columns(3, width=185)  # the policy's words need the room ('retry_next_c…' at 900 px)
    interval = form.field(c2[0].number_input, "Check interval (s)", KEY + "interval", 10, 3600, step=10)
    min_wait = form.field(c2[1].number_input, "Min wait (s)", KEY + "min_wait", 0, 7200, step=30)
    policy = form.choice(
        c2[2].selectbox,
        "On a judge error",
        [p.value for p in FailurePolicy],
        KEY + "policy",
        format_func=lambda v: POLICY_WORDS.get(v, v),
        help="A backend error is never cached as a judgment: the scope is judged again at the next check, "
        "or after a back-off.",
    )
    return interval, min_wait, policy


def _render_judge() -> str:
    """The judge (the recorded judgments or an available model) and a live one's method, with what judges."""
    options = [RECORDED] + [m for m, a in state.get_availability().items() if a.available]
    c3 = flow_columns(2, width=390)  # side by side where they fit; 300 px cut the recorded judge's name
    judge_choice: str = form.choice(
        c3[0].selectbox,
        "Judge",
        options,
        KEY + "judge",
        help="A live model judges each conversation state once; repeats reuse it.",
    )
    form.choice(
        c3[1].selectbox,
        "Live judge method",
        ["likelihood", "probability", "structured"],
        KEY + "method",
        help="likelihood: the calibrated PMI of 'this chat needs an answer' (fitted map in "
        "data/calibration/); probability: next-token p(true) of the seed's JSON; structured: the "
        "JSON the model writes. Not used with the recorded judgments.",
    )
    st.caption(md(breakable(_judge_caption(judge_choice, st.session_state.get(KEY + "method", "likelihood")))))
    return judge_choice


POLICY_WORDS = {
    FailurePolicy.RETRY_NEXT_CHECK.value: "retry at the next check",
    FailurePolicy.BACKOFF.value: "back off, then retry",
}


def _judge_caption(judge_choice: str, method: str) -> str:
    """What judges the simulation: the recording, or the live model with its method and, for likelihood,
    the fitted map in use."""

    if judge_choice == RECORDED:
        return f"Judged by the recorded judgments in {recording().name} (no model runs)." + _signal(RECORDING_JUDGE)
    if demo.enabled():  # the demo answers from its recording: no model runs, whatever the picker names
        return (
            f"Demo: {judge_choice}'s judgments ({method}) are replayed from the demo recording — no model runs; "
            "a setting outside the recording is refused with the ones to try." + _signal(judge_choice)
        )
    if method != "likelihood":
        return f"Judged live by {judge_choice} ({method}; no fitted map)."
    if not st.session_state.get(f"details.{DETAILS}", False):  # the fitted map is research detail
        return f"Judged live by {judge_choice} (likelihood)." + _signal(judge_choice)
    return f"Judged live by {judge_choice} (likelihood) · {calibration_note(SKIP, judge_choice)}" + _signal(
        judge_choice
    )


RECORDING_JUDGE = "gemma3-270m"  # who made data/recordings/skipcache-default.jsonl, by likelihood


def _signal(model_id: str) -> str:
    """' Judge: ✅ measurable signal — AUC 0.91 (0.86–0.96) on 160 items, above 0.5': the fitted map's diagnosis."""
    diagnosis = diagnosis_for("skip.likelihood", model_id)
    return "" if diagnosis is None else f" Judge: {diagnosis.label} — {diagnosis.text}."
