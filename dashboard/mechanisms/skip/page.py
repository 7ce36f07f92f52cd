"""The Skip cache page (pages/skip.py): a channel workload in simulated time, with and without the judgment skip
cache; a per-scope timeline; and the calls-saved vs. delay trade-off across thresholds, recomputed from recorded
judgments. This module draws the title, the Simulate button and the watched simulation; the controls
(`controls`), the summary (`summary`) and the two tabs (`tabs`) are drawn by their own modules."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.components import details_on, export_buttons
from dashboard.mechanisms.skip.controls import Workload, render_controls
from dashboard.mechanisms.skip.fields import DETAILS, FORM, KEY, RECORDED, RUN, init_state, recording, restore
from dashboard.mechanisms.skip.summary import render_summary
from dashboard.mechanisms.skip.tabs import render_timeline, render_tradeoff
from dashboard.watch import Collected, is_live, live_result, start_error, start_watched, watch_run, watched_run
from engine.skip.config import ResponseConfig
from engine.skip.run import SimulationConfig, run_simulation
from engine.skip.workload import WorkloadSpec


def render() -> None:
    init_state()
    restore()
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
    spec, config, judge_choice = render_controls()
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
    render_summary(result)
    export_buttons(state.get_store(), run_id, key=KEY + "export")
    if "messages" not in result:
        st.info(
            "The per-conversation timeline and the trade-off sweep need the simulation's detail, which only the "
            "dashboard process that ran it holds: simulate again to see them."
        )
        return
    timeline_tab, tradeoff_tab = st.tabs(["Per-conversation timeline", "Calls saved vs. delay"])
    with timeline_tab:
        render_timeline(result)
    with tradeoff_tab:
        render_tradeoff(result)


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
    if run is None or view is None or view.result is None or state.get_registry().is_live(run_id):
        return None  # (its end stored, its report not yet returned: the watch looks again in a moment)
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


def handle_simulate(workload: Workload, config: ResponseConfig, judge_choice: str) -> str | None:
    """One `skip.simulate` run through `engine.skip.run_simulation`, the entry point the CLI calls too, started
    in the registry (an identical simulation still going is attached to); the page watches it."""
    recorded = judge_choice == RECORDED
    if recorded and not recording().is_file():
        st.session_state[RUN + ".error"] = f"no recorded judgments at {recording()}"
        return None
    spec, (messages, file_ref) = (workload, (None, None)) if isinstance(workload, WorkloadSpec) else (None, workload)
    sim = SimulationConfig(
        workload=spec,
        workload_file=file_ref,
        response=config,
        model_id=None if recorded else judge_choice,
        method=st.session_state.get(KEY + "method", "likelihood"),
        recording=str(recording()) if recorded else None,
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
