"""Skip cache: a channel workload in simulated time, with and without the judgment skip cache; a per-scope
timeline; and the calls-saved vs. delay trade-off across thresholds, recomputed from recorded judgments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, demo, state
from dashboard import formstate as form
from dashboard.components import (
    breakable,
    calibration_note,
    details_on,
    duration,
    export_buttons,
    flow_columns,
    md,
    metric_row,
    money,
)
from dashboard.labelling import label_buttons
from dashboard.text import scope_words
from dashboard.watch import Collected, is_live, live_result, start_error, start_watched, watch_run, watched_run
from engine.config import get_settings
from engine.diagnostics import diagnosis_for
from engine.inputs import InputError, read_upload, shown_problems
from engine.labels import item_key
from engine.skip.config import FailurePolicy, JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.likelihood import SKIP
from engine.skip.messages import Message
from engine.skip.run import FileRef, SimulationConfig, run_simulation
from engine.skip.simulation import bound_text, delay_bound
from engine.skip.workload import WorkloadError, WorkloadSpec, parse_workload

KEY = "skip."
FORM = KEY.removesuffix(".")  # its form's marker: "skip.form_for" names the run the form shows
DETAILS = "skip-cache"
RUN = KEY + "run_id"  # the simulation shown: also in the URL (`?run=`), so a reload re-attaches
RECORDED = "Recorded Gemma judgments (default workload)"


def _recording() -> Path:
    return get_settings().data_dir / "recordings" / "skipcache-default.jsonl"


# The form's widgets: (min, max) and the default each starts at. Kept here, not in the widgets, so that a reload
# can put the attached run's settings in (`restore_form`) before they are drawn.
RANGES: dict[str, tuple[float, float]] = {
    "channels": (1, 500),
    "hours": (1.0, 72.0),
    "rate": (0.01, 5.0),
    "burst": (1.0, 20.0),
    "seed": (0, 10_000),
    "high": (0.5, 1.0),
    "high_s": (0, 172_800),
    "mid": (0.0, 1.0),
    "mid_s": (0, 172_800),
    "default_s": (0, 86_400),
    "interval": (10, 3600),
    "min_wait": (0, 7200),
}


def _defaults() -> dict[str, Any]:
    d, r = WorkloadSpec(), ResponseConfig()
    return {
        "channels": d.channels,
        "hours": d.hours,
        "rate": d.bursts_per_hour,
        "burst": d.mean_burst_messages,
        "seed": d.seed,
        "high": 0.9,
        "high_s": 43200,
        "mid": 0.7,
        "mid_s": 3600,
        "default_s": 600,
        "interval": r.check_interval_seconds,
        "min_wait": r.min_wait_seconds,
    }


def _init_state() -> None:
    for name, value in _defaults().items():
        form.default(KEY + name, value)


def _restore() -> None:
    """On first sight of the run in the URL (a reload, a shared link), the form takes its settings."""
    form.restore_from(FORM, watched_run("run", RUN), restore_form)


def restore_form(run_id: str) -> None:
    """Put a stored simulation's settings into the form (before its widgets are drawn): the generated workload,
    the thresholds, the checker and the judge, so the next Simulate runs the same simulation. A value the
    form cannot show (out of a widget's range, a model not available here) leaves that widget as it is; an
    uploaded workload is not kept (the upload box stays empty)."""
    run = state.get_store().get_run(run_id)
    if run is None or run.kind != "skip.simulate":
        return
    try:
        sim = SimulationConfig.model_validate(run.config)
    except ValueError:  # stored by an older version: the form keeps its own settings
        return
    response = sim.response
    values: dict[str, float] = {}
    if sim.workload is not None:
        w = sim.workload
        values |= {"channels": w.channels, "hours": w.hours, "rate": w.bursts_per_hour}
        values |= {"burst": w.mean_burst_messages, "seed": w.seed}
    levels = sorted(response.judgment_skip.thresholds, key=lambda t: -t.min_confidence)
    if len(levels) == 2:
        values |= {"high": levels[0].min_confidence, "high_s": levels[0].skip_seconds}
        values |= {"mid": levels[1].min_confidence, "mid_s": levels[1].skip_seconds}
    values |= {"default_s": response.judgment_skip.default_skip_seconds}
    values |= {"interval": response.check_interval_seconds, "min_wait": response.min_wait_seconds}
    shown: dict[str, Any] = {KEY + n: v for n, v in values.items() if RANGES[n][0] <= v <= RANGES[n][1]}
    shown |= {KEY + "policy": response.failure_policy.value, KEY + "method": sim.method}
    availability = state.get_availability().get(sim.model_id or "")
    if sim.model_id is None and sim.recording is not None:
        shown[KEY + "judge"] = RECORDED
    elif availability is not None and availability.available:
        shown[KEY + "judge"] = sim.model_id
    form.restore(shown)


def render() -> None:
    _init_state()
    _restore()
    st.title("⏱️ Skip cache")
    st.caption(
        "How many “should I reply?” judge calls a bot saves by trusting a confident judgment for a while, and how "
        "long a new message then waits for its first judgment."
    )
    details_on(DETAILS, help="Show the judge's fitted map, the thresholds' identifiers and the sweep's raw table.")
    with st.expander("How it works"):
        st.markdown(
            "A judgment's confidence sets how long its conversation is not judged again; a new message "
            "invalidates it. The workload runs in simulated time (24 hours in seconds), once without the cache "
            "and once with it."
        )
    spec, config, judge_choice = _render_controls()
    run_id = watched_run("run", RUN)
    live = is_live(run_id)
    if st.button(
        "Simulate",
        type="primary",
        key=KEY + "run",
        disabled=live,
        help="A simulation is going: watch it below, or cancel it" if live else None,
    ):
        if handle_simulate(spec, config, judge_choice):
            st.rerun()  # drawn again with Simulate off while the run goes
    start_error(RUN)
    if not run_id:
        st.info(
            "Set the workload and thresholds, then Simulate. The default workload comes with recorded "
            "judgments of the bundled Gemma, so it runs without a model."
        )
        return
    view = watch_run(run_id, Collected, _render_progress, key=KEY + "watch")
    result = _result(run_id, view)
    if result is None:
        return
    _render_summary(result)
    export_buttons(state.get_store(), run_id, key=KEY + "export")
    if "messages" not in result:
        st.info(
            "The per-conversation timeline and the trade-off sweep need the simulation's detail, which only the "
            "dashboard process that ran it holds: simulate again to see them."
        )
        return
    timeline_tab, tradeoff_tab = st.tabs(["Per-conversation timeline", "Calls saved vs. delay"])
    with timeline_tab:
        _render_timeline(result)
    with tradeoff_tab:
        _render_tradeoff(result)


def _render_progress(view: Collected, live: bool) -> None:
    if live:
        st.caption(
            "Simulating: the checks of the run without the cache, then with it, then the trade-off sweep (each "
            "setting re-runs the checks with the recorded judgments)."
        )


def _result(run_id: str, view: Collected | None) -> dict[str, Any] | None:
    """What the page shows of a finished simulation: the full report when this process ran it (the registry
    holds its return value), else the comparison stored as the run's result."""
    run = state.get_store().get_run(run_id)
    if run is None or view is None or view.result is None:
        return None
    response = ResponseConfig.model_validate(run.config.get("response") or {})
    report = live_result(run_id)
    if report is None:
        comparison = view.result
        return {
            "run_id": run_id,
            "comparison": comparison,
            "sweep": (run.summary or {}).get("sweep") or [],
            "config": response,
            "misses": comparison["with_cache"]["failures"],
        }
    workload = run.config.get("workload")
    return {
        "run_id": run_id,
        "comparison": report.comparison,
        "timeline": report.detail.timeline,
        "judgments": [j.__dict__ for j in report.detail.judgments],
        "messages": [m.__dict__ for m in report.messages],
        "records": report.records,
        "sweep": report.sweep,
        "config": response,
        "hours": run.config.get("hours") or (workload or {}).get("hours"),
        "misses": report.comparison["with_cache"]["failures"],
    }


Workload = WorkloadSpec | tuple[list[Message], FileRef]  # generated, or an uploaded file's messages


def _render_controls() -> tuple[Workload, ResponseConfig, str]:
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
    with st.expander("Thresholds and checker", expanded=True):
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
        options = [RECORDED] + [m for m, a in state.get_availability().items() if a.available]
        c3 = flow_columns(2, width=390)  # side by side where they fit; 300 px cut the recorded judge's name
        judge_choice = form.choice(
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


POLICY_WORDS = {
    FailurePolicy.RETRY_NEXT_CHECK.value: "retry at the next check",
    FailurePolicy.BACKOFF.value: "back off, then retry",
}


def saved_interval_text(comparison: dict[str, Any]) -> str:
    """The calls saved with its 95 % interval over conversations (they are resampled: a conversation's calls
    hang together through its cache window), or why it has none."""
    ci = comparison.get("calls_saved_pct_ci")
    if "calls_saved_pct_ci" not in comparison:
        return f"{comparison['calls_saved_pct']}% of the judge calls saved (a run stored before intervals were kept)"
    if not isinstance(ci, list):
        return f"{comparison['calls_saved_pct']}% of the judge calls saved (one conversation: no interval)"
    conversations = comparison.get("conversations")
    over = f"{conversations} conversations" if isinstance(conversations, int) else "the conversations"
    wide = (
        " — few conversations, so a wide interval: simulate more channels or hours to narrow it"
        if (ci[1] - ci[0] > 20)
        else ""
    )
    return (
        f"{comparison['calls_saved_pct']:.0f}% of the judge calls saved ({ci[0]:.0f}–{ci[1]:.0f}% with 95 % "
        f"confidence, resampling the {over}){wide}"
    )


def _judge_caption(judge_choice: str, method: str) -> str:
    """What judges the simulation: the recording, or the live model with its method and, for likelihood,
    the fitted map in use."""

    if judge_choice == RECORDED:
        return f"Judged by the recorded judgments in {_recording().name} (no model runs)." + _signal(RECORDING_JUDGE)
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


def handle_simulate(workload: Workload, config: ResponseConfig, judge_choice: str) -> str | None:
    """One `skip.simulate` run through `engine.skip.run_simulation`, the entry point the CLI calls too, started
    in the registry (an identical simulation still going is attached to); the page watches it."""
    recorded = judge_choice == RECORDED
    if recorded and not _recording().is_file():
        st.session_state[RUN + ".error"] = f"no recorded judgments at {_recording()}"
        return None
    spec, (messages, file_ref) = (workload, (None, None)) if isinstance(workload, WorkloadSpec) else (None, workload)
    sim = SimulationConfig(
        workload=spec,
        workload_file=file_ref,
        response=config,
        model_id=None if recorded else judge_choice,
        method=st.session_state.get(KEY + "method", "likelihood"),
        recording=str(_recording()) if recorded else None,
    )
    hub, store = state.get_hub(), state.get_store()
    run_id = start_watched(
        "skip.simulate",
        sim.model_dump(mode="json"),
        lambda: run_simulation(sim, hub.get, store, messages=messages),
        param="run",
        key=RUN,
    )
    if run_id:  # the form already holds this run's settings: nothing to restore on the next rerun
        form.shown(FORM, run_id)
    return run_id


def _render_summary(result: dict[str, Any]) -> None:
    comparison = result["comparison"]
    a, b = comparison["without_cache"], comparison["with_cache"]
    bound, met = delay_bound(b, result["config"])
    st.caption(f"recorded as run `{result['run_id']}` · {a['messages']} messages")
    st.caption(md(checks_words(a, b, result["config"])))
    if result["misses"]:
        st.warning(
            f"{result['misses']} judgments failed (states not in the recording, or model errors); "
            "nothing was cached for them. Choose a model as judge to judge new states."
        )
    if b.get("flagged_judgments"):
        st.warning(
            f"{b['flagged_judgments']} judgments had a failed confidence (missing, out of range, cut off "
            "or unparseable): they decided with confidence 0.0 and were never cached."
        )
    metric_row(
        [
            ("Judge calls without cache", f"{a['judge_calls']:,}"),
            {
                "label": "With cache",
                "value": f"{b['judge_calls']:,}",
                "help": saved_interval_text(comparison),
            },
            ("Calls saved", f"{comparison['calls_saved_pct']:.0f}%"),
            ("Tokens saved", f"{comparison['tokens_saved']:,}"),
            *cost_metrics(comparison),
            {
                "label": "Judge errors (never cached)",
                "value": b["failures"],
                "help": f"policy: {result['config'].failure_policy.value}",
            },
        ]
    )
    st.caption(md(saved_interval_text(comparison)) + ".")
    metric_row(
        [
            ("First judgment: median", duration(b["delay_median_s"])),
            ("p95", duration(b["delay_p95_s"])),
            {
                "label": "max",
                "value": duration(b["delay_max_s"]),
                "delta": bound_text(met),
                "delta_color": "off",
            },
            ("Bound (min wait + interval)", duration(bound)),
            {
                "label": "Staleness p95",
                "value": duration(b["staleness_p95_s"]),
                "help": "how old the cached judgment was whenever a check skipped a waiting conversation",
            },
        ]
    )


def checks_words(without: dict[str, Any], with_cache: dict[str, Any], config: ResponseConfig) -> str:
    """Checks and judge calls are counted apart, and look alike ('121 checks' next to '119 calls'): say what
    each is. A check is one pass of the checker over every conversation, every interval; it calls the judge once
    for each conversation with a message waiting (none when all are answered, several when several wait)."""
    every = duration(config.check_interval_seconds)
    return (
        f"The checker looked at every conversation every {every}: {without['checks']:,} checks. Each check calls "
        "the judge once per conversation with a message waiting for an answer (none when nothing waits, several "
        f"when several do): {without['judge_calls']:,} judge calls without the cache, {with_cache['judge_calls']:,} "
        "with it, where a recent confident judgment is trusted instead."
    )


def api_prices() -> list[tuple[str, float]]:
    """The catalog's priced (API) models and their price per 1k input tokens, cheapest first."""
    catalog = state.get_catalog()
    return sorted(((s.id, s.price_in_per_1k) for s in catalog.models if s.price_in_per_1k > 0), key=lambda p: p[1])


def cost_metrics(comparison: dict[str, Any], prices: list[tuple[str, float]] | None = None) -> list[dict[str, Any]]:
    """What the cache saved in money: the run's own figure, and — when its judge was free (a local model or a
    recording) — what the saved tokens would have cost on the catalog's API models, so "$0" is not the story."""
    saved = float(comparison.get("cost_saved") or 0.0)
    tokens = int(comparison.get("tokens_saved") or 0)
    out: list[dict[str, Any]] = [
        {
            "label": "Cost saved",
            "value": money(saved) if saved else "$0 (free judge)",
            "help": "What the judge calls the cache avoided cost. A local model or a recording costs nothing.",
        }
    ]
    prices = api_prices() if prices is None else prices
    if not saved and tokens and prices:
        (cheap, low), (dear, high) = prices[0], prices[-1]
        out.append(
            {
                "label": "…on an API judge",
                "value": f"{rough_money(tokens * low / 1000)} – {rough_money(tokens * high / 1000)}",
                "help": f"The {tokens:,} tokens saved at input prices: {cheap} (cheapest in the catalog) to "
                f"{dear} (dearest).",
            }
        )
    return out


def rough_money(value: float) -> str:
    """An estimate's end in two significant digits ('$0.060', '$0.50'): the range is a guess at prices, and four
    digits on one end and three on the other read as precision it does not have."""
    if not value or value < 0.0001:
        return money(value)
    return f"${value:,.0f}" if value >= 10 else f"${value:#.2g}"


def _render_timeline(result: dict[str, Any]) -> None:
    messages = pd.DataFrame(result["messages"])
    if messages.empty:
        return
    messages["scope"] = messages["channel_id"] + ":" + messages["thread_ts"].fillna("top")
    counts = messages["scope"].value_counts()
    scope = st.selectbox(
        "Conversation",
        counts.index.tolist(),
        key=KEY + "scope",
        format_func=lambda s: f"{scope_words(s)} ({counts[s]} messages)",
    )
    st.plotly_chart(charts.skip_scope_timeline(scope, result["messages"], result["judgments"], result["timeline"]))
    _render_reply_label(result, scope)


def _render_reply_label(result: dict[str, Any], scope: str) -> None:
    """Your label of one message of the conversation shown, "should have replied / should not", which the Labels
    page compares with what the judge decided for it (when it judged that message)."""
    messages = [m for m in result["messages"] if f"{m['channel_id']}:{m['thread_ts'] or 'top'}" == scope]
    if not messages:
        return
    with st.expander("Your label: should the bot have replied?", expanded=False):
        index = st.selectbox(
            "Message",
            range(len(messages)),
            key=KEY + "label_message." + scope,
            format_func=lambda i: f"{i + 1}. {messages[i]['author']}: {str(messages[i]['text'])[:80]}",
        )
        message = messages[index]
        st.text(str(message["text"]))
        judged = next((j for j in result.get("judgments") or [] if j.get("target") == message["id"]), None)
        context: dict[str, Any] = {"judge": "skip.simulate", "author": message.get("author")}
        if judged is not None:  # the judge looked at this message: what it decided, so the agreement view counts it
            context |= {
                "predicted": "reply" if judged.get("should_respond") else "no_reply",
                "confidence": judged.get("confidence"),
            }
            said = "reply" if judged.get("should_respond") else "stay silent"
            st.caption(f"The judge decided: {said} (confidence {float(judged.get('confidence') or 0):.2f}).")
        else:
            st.caption("The judge did not judge this message itself (it judged a later one of the conversation).")
        label_buttons(
            "skip",
            item_key("skip", scope=scope, message=message["id"]),
            run_id=result["run_id"],
            key=KEY + "label." + scope,
            context=context,
            prompt="Should the bot have replied to this message?",
        )


def few_points_note(rows: list[dict[str, Any]], messages: int) -> str | None:
    """Why the trade-off chart has few points, when the swept settings give fewer than three outcomes."""
    outcomes = {(r["judge calls"], r["staleness p95 s"]) for r in rows}
    if len(outcomes) >= 3:
        return None
    return (
        f"The {len(rows)} skip settings give only {len(outcomes)} different outcome(s): with {messages} messages, "
        "conversations rarely go quiet long enough for the skip window to matter. Simulate more hours or channels "
        "to spread the points."
    )


def _render_tradeoff(result: dict[str, Any]) -> None:
    st.caption(
        "Each point re-runs the workload under other skip seconds with the judgments this run recorded "
        "(no new model calls). A new message always invalidates the cache, so first-judgment delay stays "
        "within min wait + one interval; what long skip windows cost is staleness: how old the judgment "
        "was whenever a waiting conversation was skipped. Fewer calls and less staleness are both better: "
        "the line is the Pareto front."
    )
    rows = result.get("sweep") or []
    if not rows:  # a run stored before the simulation swept its own grid: the page computes nothing itself
        st.info("This run was stored without its trade-off sweep: simulate again to see it.")
        return
    frame = pd.DataFrame(rows)
    if (note := few_points_note(rows, len(result["messages"]))) is not None:
        st.info(note)
    st.plotly_chart(charts.skip_tradeoff(rows))
    if st.session_state.get(f"details.{DETAILS}", False):
        st.dataframe(frame, hide_index=True, width="stretch")


if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
