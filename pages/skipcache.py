"""Skip cache: a channel workload in simulated time, with and without the judgment skip cache; a per-scope
timeline; and the calls-saved vs. delay trade-off across thresholds, recomputed from recorded judgments."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import state
from dashboard.components import export_buttons, md, plot_text
from engine.config import get_settings
from engine.events import async_run_context
from engine.inputs import InputError, read_upload
from engine.skipcache import (
    FailurePolicy,
    JudgmentSkipConfig,
    JudgmentSkipThreshold,
    LikelihoodJudge,
    ModelJudge,
    ProbabilityJudge,
    ResponseConfig,
)
from engine.skipsim import (
    EPOCH,
    RecordedJudge,
    WorkloadError,
    WorkloadSpec,
    bound_text,
    compare,
    delay_bound,
    generate_workload,
    pareto_front,
    parse_workload,
    simulate,
)

KEY = "skip."
RECORDED = "Recorded Gemma judgments (default workload)"


def _recording() -> Path:
    return get_settings().data_dir / "recordings" / "skipcache-default.jsonl"


def _init_state() -> None:
    st.session_state.setdefault(KEY + "result", None)


def render() -> None:
    _init_state()
    st.title("⏱️ Skip cache")
    st.caption(
        "A should-I-respond judgment's confidence sets how long its conversation scope is not judged again; a "
        "new message invalidates it. Simulated time: 24 hours run in seconds. Compare judge calls with and without "
        "the cache, and the delay from a message's arrival to its first judgment."
    )
    spec, config, judge_choice = _render_controls()
    if st.button("Simulate", type="primary", key=KEY + "run"):
        handle_simulate(spec, config, judge_choice)
    result = st.session_state[KEY + "result"]
    if result is None:
        st.info("Set the workload and thresholds, then Simulate. The default workload comes with recorded "
                "judgments of the bundled Gemma, so it runs without a model.")
        return
    if "error" in result:
        st.error(md(result["error"], inline=False))
        return
    _render_summary(result)
    export_buttons(state.get_store(), result["run_id"], key=KEY + "export")
    timeline_tab, tradeoff_tab = st.tabs(["Per-scope timeline", "Calls saved vs. delay"])
    with timeline_tab:
        _render_timeline(result)
    with tradeoff_tab:
        _render_tradeoff(result)


def _render_controls() -> tuple[WorkloadSpec | list[Any], ResponseConfig, str]:
    d = WorkloadSpec()
    with st.expander("Workload", expanded=False):
        upload = st.file_uploader("Workload JSONL ({t, channel, thread, id, author, text} a line) — or generate one "
                                  "below", type=["jsonl"], key=KEY + "upload")
        c = st.columns(5)
        channels = c[0].number_input("Channels", 1, 500, d.channels, key=KEY + "channels")
        hours = c[1].number_input("Hours", 1.0, 72.0, d.hours, 1.0, key=KEY + "hours")
        rate = c[2].number_input("Bursts / channel / hour", 0.01, 5.0, d.bursts_per_hour, 0.05, key=KEY + "rate")
        burst = c[3].number_input("Messages per burst", 1.0, 20.0, d.mean_burst_messages, 0.5, key=KEY + "burst")
        seed = c[4].number_input("Seed", 0, 10_000, d.seed, key=KEY + "seed")
    try:
        spec: WorkloadSpec | list[Any] = WorkloadSpec(channels=int(channels), hours=float(hours),
                                                      bursts_per_hour=float(rate), mean_burst_messages=float(burst),
                                                      seed=int(seed))
    except ValueError as exc:  # more messages than a simulation may hold: say so, simulate the default
        st.error(f"Workload: {str(exc).splitlines()[-1]} — simulating the default workload instead.")
        spec = d
    if upload is not None:
        try:
            spec = parse_workload(read_upload(upload.name, upload.getvalue()), upload.name)
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
        except WorkloadError as exc:
            st.error("Nothing imported — fix these rows:\n\n" + "\n".join(f"- {md(p)}" for p in exc.problems))
    defaults = ResponseConfig()
    with st.expander("Thresholds and checker", expanded=True):
        c = st.columns(5)
        high = c[0].slider("High confidence ≥", 0.5, 1.0, 0.9, 0.05, key=KEY + "high")
        high_s = c[1].number_input("…skip seconds", 0, 172800, 43200, 600, key=KEY + "high_s")
        mid = c[2].slider("Mid confidence ≥", 0.0, 1.0, 0.7, 0.05, key=KEY + "mid")
        mid_s = c[3].number_input("…skip seconds ", 0, 172800, 3600, 300, key=KEY + "mid_s")
        default_s = c[4].number_input("Otherwise skip seconds", 0, 86400, 600, 60, key=KEY + "default_s")
        c2 = st.columns(4)
        interval = c2[0].number_input("Check interval (s)", 10, 3600, defaults.check_interval_seconds, 10,
                                      key=KEY + "interval")
        min_wait = c2[1].number_input("Min wait (s)", 0, 7200, defaults.min_wait_seconds, 30, key=KEY + "min_wait")
        options = [RECORDED] + [m for m, a in state.get_availability().items() if a.available]
        judge_choice = c2[2].selectbox("Judge", options, key=KEY + "judge",
                                       help="A live model judges each conversation state once; repeats reuse it.")
        st.selectbox("Live judge method", ["likelihood", "probability", "structured"], key=KEY + "method",
                     help="likelihood: the calibrated PMI of 'this chat needs an answer' (fitted map in "
                          "data/calibration/); probability: next-token p(true) of the seed's JSON; structured: the "
                          "JSON the model writes")
        policy = c2[3].selectbox(
            "On a judge error", [p.value for p in FailurePolicy], key=KEY + "policy",
            help="A backend error is never cached as a judgment: the scope is judged again at the next check, "
                 "or after a back-off.")
    config = ResponseConfig(
        check_interval_seconds=int(interval), min_wait_seconds=int(min_wait), failure_policy=FailurePolicy(policy),
        judgment_skip=JudgmentSkipConfig(thresholds=[
            JudgmentSkipThreshold(min_confidence=float(high), skip_seconds=int(high_s)),
            JudgmentSkipThreshold(min_confidence=float(mid), skip_seconds=int(mid_s)),
        ], default_skip_seconds=int(default_s)),
    )
    return spec, config, judge_choice


def handle_simulate(spec: WorkloadSpec | list[Any], config: ResponseConfig, judge_choice: str) -> None:
    messages = generate_workload(spec) if isinstance(spec, WorkloadSpec) else spec
    hours = spec.hours if isinstance(spec, WorkloadSpec) else None
    if judge_choice == RECORDED:
        if not _recording().is_file():
            st.session_state[KEY + "result"] = {"error": f"no recorded judgments at {_recording()}"}
            return
        judge = RecordedJudge.load(_recording())
    else:
        model = state.get_hub().get(judge_choice)
        judges = {"likelihood": LikelihoodJudge, "probability": ProbabilityJudge, "structured": ModelJudge}
        live = judges[st.session_state.get(KEY + "method", "likelihood")](model)
        judge = RecordedJudge({}, live)
    store = state.get_store()

    async def go() -> dict[str, Any]:
        workload = spec.model_dump() if isinstance(spec, WorkloadSpec) else {"uploaded": len(messages)}
        run_config = {"workload": workload, "judge": judge_choice, "config": config.model_dump()}
        async with async_run_context(store, "skip.simulate", run_config) as run:
            comparison = await compare(messages, judge, config, hours=hours)
            detailed = await simulate(messages, judge, config, with_cache=True, hours=hours, keep_timeline=True)
            run.summary = {"calls_saved_pct": comparison["calls_saved_pct"]}
        return {"run_id": run.run_id, "comparison": comparison, "timeline": detailed.timeline,
                "judgments": [j.__dict__ for j in detailed.judgments],
                "messages": [m.__dict__ for m in messages], "records": judge.records,
                "config": config, "hours": hours, "misses": comparison["with_cache"]["failures"]}

    with st.spinner("Simulating…"):
        result = state.get_loop().run(go(), timeout=3600)
    st.session_state[KEY + "result"] = result
    state.clear_reads()


def _render_summary(result: dict[str, Any]) -> None:
    comparison = result["comparison"]
    a, b = comparison["without_cache"], comparison["with_cache"]
    bound, met = delay_bound(b, result["config"])
    st.caption(f"recorded as run `{result['run_id']}` · {a['messages']} messages · {a['checks']} checks")
    if result["misses"]:
        st.warning(f"{result['misses']} judgments failed (states not in the recording, or model errors); "
                   "nothing was cached for them. Choose a model as judge to judge new states.")
    if b.get("flagged_judgments"):
        st.warning(f"{b['flagged_judgments']} judgments had a failed confidence (missing, out of range, cut off "
                   "or unparseable): they decided with confidence 0.0 and were never cached.")
    c = st.columns(5)
    c[0].metric("Judge calls without cache", f"{a['judge_calls']:,}")
    c[1].metric("With cache", f"{b['judge_calls']:,}", f"-{comparison['calls_saved_pct']}%", delta_color="inverse")
    c[2].metric("Tokens saved", f"{comparison['tokens_saved']:,}")
    c[3].metric("Cost saved", f"${comparison['cost_saved']:.4f}")
    c[4].metric("Judge errors (never cached)", b["failures"], help=f"policy: {result['config'].failure_policy.value}")
    d = st.columns(5)
    d[0].metric("First judgment: median", f"{b['delay_median_s']:.0f} s" if b["delay_median_s"] is not None else "—")
    d[1].metric("p95", f"{b['delay_p95_s']:.0f} s" if b["delay_p95_s"] is not None else "—")
    d[2].metric("max", f"{b['delay_max_s']:.0f} s" if b["delay_max_s"] is not None else "—",
                bound_text(met), delta_color="off")
    d[3].metric("Bound (min wait + interval)", f"{bound} s")
    d[4].metric("Staleness p95", f"{b['staleness_p95_s']:.0f} s",
                help="how old the cached judgment was whenever a check skipped a waiting conversation")


def _render_timeline(result: dict[str, Any]) -> None:
    messages = pd.DataFrame(result["messages"])
    if messages.empty:
        return
    messages["scope"] = messages["channel_id"] + ":" + messages["thread_ts"].fillna("top")
    counts = messages["scope"].value_counts()
    scope = st.selectbox("Scope", counts.index.tolist(), key=KEY + "scope",
                         format_func=lambda s: f"{s} ({counts[s]} messages)")
    st.plotly_chart(scope_timeline(scope, result))


def scope_timeline(scope: str, result: dict[str, Any]) -> go.Figure:
    """Messages, judgments (colour: respond or not), cache hits and skip windows of one scope."""
    fig = go.Figure()
    msgs = [m for m in result["messages"] if f"{m['channel_id']}:{m['thread_ts'] or 'top'}" == scope]
    fig.add_trace(go.Scatter(x=[m["at"] for m in msgs], y=["messages"] * len(msgs), mode="markers", name="message",
                             marker={"symbol": "circle", "size": 10, "color": "#7570B3"},
                             text=[plot_text(f"{m['author']}: {m['text']}") for m in msgs], hoverinfo="text+x"))
    judged = [j for j in result["judgments"] if j["scope"] == scope]
    for j in judged:
        if j["skip_seconds"]:
            end = j["at"] + timedelta(seconds=j["skip_seconds"])
            fig.add_trace(go.Scatter(x=[j["at"], end], y=["skip window"] * 2, mode="lines", showlegend=False,
                                     line={"color": "#B8C4BE", "width": 8},
                                     hovertext=f"confidence {j['confidence']:.2f} → skip {j['skip_seconds']} s"))
    fig.add_trace(go.Scatter(
        x=[j["at"] for j in judged], y=["judgments"] * len(judged), mode="markers", name="judgment",
        marker={"symbol": "diamond", "size": 12, "color": ["#D95F02" if j["should_respond"] else "#1B9E77"
                                                           for j in judged]},
        text=[f"{'respond' if j['should_respond'] else 'stay silent'} · confidence {j['confidence']:.2f}"
              + (f" ⚠ {', '.join(j['flags'])} (not cached)" if j.get("flags") else "") for j in judged],
        hoverinfo="text+x"))
    hits = [e for e in result["timeline"] if e["type"] == "cache_hit" and e["scope"] == scope]
    fig.add_trace(go.Scatter(x=[EPOCH + timedelta(seconds=e["t"]) for e in hits], y=["cache hits"] * len(hits),
                             mode="markers", name="cache hit", marker={"symbol": "line-ns-open", "size": 8,
                                                                       "color": "#1B6E5A"}))
    replies = [e for e in result["timeline"] if e["type"] == "reply" and e["scope"] == scope]
    fig.add_trace(go.Scatter(x=[EPOCH + timedelta(seconds=e["t"]) for e in replies], y=["replies"] * len(replies),
                             mode="markers", name="bot reply", marker={"symbol": "star", "size": 12,
                                                                       "color": "#E7298A"}))
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"categoryorder": "array",
                             "categoryarray": ["replies", "cache hits", "skip window", "judgments", "messages"]})
    return fig


SWEEP_HIGH_SKIP = (3600, 21600, 43200)
SWEEP_DEFAULT_SKIP = (120, 600, 1800)


@st.cache_data(show_spinner="Sweeping thresholds over the recorded judgments…", max_entries=8)
def _sweep(run_id: str, _result: dict[str, Any]) -> pd.DataFrame:
    """Every grid configuration re-simulated with the judgments recorded in the run: no model call."""
    messages = [_message(m) for m in _result["messages"]]
    base: ResponseConfig = _result["config"]
    rows = []
    for high_s in SWEEP_HIGH_SKIP:
        for default_s in SWEEP_DEFAULT_SKIP:
            cfg = base.model_copy(deep=True)
            cfg.judgment_skip = JudgmentSkipConfig(thresholds=[
                JudgmentSkipThreshold(min_confidence=t.min_confidence,
                                      skip_seconds=high_s if i == 0 else min(t.skip_seconds, high_s))
                for i, t in enumerate(sorted(base.judgment_skip.thresholds, key=lambda t: -t.min_confidence))
            ], default_skip_seconds=default_s)
            judge = RecordedJudge(dict(_result["records"]))
            out = asyncio.run(simulate(messages, judge, cfg, with_cache=True, hours=_result["hours"])).summary()
            rows.append({"high skip s": high_s, "default skip s": default_s, "judge calls": out["judge_calls"],
                         "staleness p95 s": out["staleness_p95_s"], "first-judgment delay p95 s": out["delay_p95_s"],
                         "first-judgment delay max s": out["delay_max_s"], "misses": out["failures"]})
    frame = pd.DataFrame(rows)
    front = pareto_front(list(zip(frame["judge calls"], frame["staleness p95 s"], strict=True)))
    frame["pareto"] = [i in front for i in range(len(frame))]
    return frame


def _message(m: dict[str, Any]) -> Any:
    from engine.skipcache import Message

    return Message(**m)


def _render_tradeoff(result: dict[str, Any]) -> None:
    st.caption("Each point re-runs the workload under other skip seconds with the judgments this run recorded "
               "(no new model calls). A new message always invalidates the cache, so first-judgment delay stays "
               "within min wait + one interval; what long skip windows cost is staleness: how old the judgment "
               "was whenever a waiting conversation was skipped. Fewer calls and less staleness are both better: "
               "the line is the Pareto front.")
    frame = _sweep(result["run_id"], result)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=frame["judge calls"], y=frame["staleness p95 s"], mode="markers", name="configuration",
                             marker={"size": 11, "color": ["#D95F02" if p else "#B8C4BE" for p in frame["pareto"]]},
                             text=[f"high skip {h}s · default skip {d}s" for h, d in
                                   zip(frame["high skip s"], frame["default skip s"], strict=True)]))
    front = frame[frame["pareto"]].sort_values("judge calls")
    fig.add_trace(go.Scatter(x=front["judge calls"], y=front["staleness p95 s"], mode="lines", name="Pareto front",
                             line={"color": "#D95F02", "dash": "dot"}))
    fig.update_layout(height=360, xaxis_title="judge calls (with cache)", yaxis_title="staleness p95 (s)",
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    st.plotly_chart(fig)
    st.dataframe(frame, hide_index=True, width="stretch")

