"""The Jury page (pages/jury.py): choose jurors (model + role), the final method, rounds and threshold; pick or paste
a case; watch phase 1, the continuous discussion and the final verdict arrive live. Everything shown is a fold of the
run's events (`JuryView`), which is also what the Replay page folds, so both pages show the same. The panel
(`panel`) and the case picker (`case`) are drawn by their own modules; this one draws the title, the Run button and
the watched run, and puts a re-attached run's settings back into the form."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.components import details_on, export_buttons, md, run_usage
from dashboard.labelling import jury_label
from dashboard.live_runs import RegistryError
from dashboard.mechanisms.jury.case import render_case, restore_case
from dashboard.mechanisms.jury.fields import (
    AUTO,
    FORM,
    KEY,
    RUN_PANEL,
    THRESHOLDS,
    init_state,
    seat_models,
    selective_label,
)
from dashboard.mechanisms.jury.panel import render_panel
from dashboard.mechanisms.jury.view import render_jury_whatif, render_view
from dashboard.watch import set_url_run, url_run, watch_run
from engine.jury.config import JuryCase, JuryConfig
from engine.jury.decisions import JurorSeat
from engine.jury.runner import Jury, run_case
from engine.jury.view import JuryView


def render() -> None:
    init_state()
    st.title("⚖️ Jury")
    st.caption(
        "A panel of AI jurors judges whether an agent's conversation is safe: each gives a verdict, they discuss, "
        "and a final judgment decides."
    )
    details = details_on(
        "jury",
        help="Show how each juror model judges and the fitted map it reads, and behind each verdict its score, "
        "confidence, axes and a likelihood juror's distribution, features and map.",
    )
    run_id = _watched_run()
    # Once a run is attached, the settings and the case picker fold away: its progress and verdict show at the
    # top of a 1440×900 window, not under an open panel.
    seats, config = render_panel(expanded=run_id is None)
    with st.container() if run_id is None else st.expander("Case", expanded=False):
        case = render_case()
    live = run_id is not None and state.get_registry().is_live(run_id)
    busy = seats is None or config is None or case is None or live
    if st.button(
        "Run the jury",
        type="primary",
        key=KEY + "run",
        disabled=busy,
        help="A run is going: watch it below, or cancel it" if live else None,
    ):
        assert seats is not None and config is not None and case is not None
        if handle_run(seats, config, case):
            st.rerun()  # drawn again with Run disabled while the run goes
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    if run_id:
        st.divider()
        st.caption(f"Run `{run_id}` — [open in Runs](/runs?run={run_id}) · replay it on the Replay page")
        watch_run(run_id, JuryView, lambda view, live: _render_watched(view, live, run_id, details), key=KEY + "watch")
        if not live:
            stored = state.get_store().get_run(run_id)
            if stored is not None and stored.status == "finished":
                jury_label(stored, key=KEY + "label")
            export_buttons(state.get_store(), run_id, key=KEY + "export")
            if stored is not None and stored.status == "finished":
                render_jury_whatif(stored, key=KEY + "whatif")


def _watched_run() -> str | None:
    """The run this page shows: the URL's (a reload, a shared link, a second tab), else this session's
    last one (a return visit from another page), which is put back into the URL."""
    run_id = url_run() or st.session_state[KEY + "run_id"]
    if run_id:
        st.session_state[KEY + "run_id"] = run_id
        set_url_run(run_id)
        form.restore_from(FORM, run_id, restore_form)  # first sight of this run: the form shows its settings
    return run_id


def restore_form(run_id: str) -> None:
    """Put the settings of a stored run into the form (before its widgets are drawn), so that after a reload
    the form shows the run it re-attached to and the next click runs that case, not the default one."""
    run = state.get_store().get_run(run_id)
    if run is None or not run.kind.startswith("jury"):
        return
    config = run.config
    try:
        jury = JuryConfig(**(config.get("jury") or {}))
        case = JuryCase(**(config.get("case") or {}))
        seats = [JurorSeat(**s) for s in config.get("jurors") or []]
    except (TypeError, ValueError):  # a run stored by an older version: the form keeps its own settings
        return
    values: dict[str, Any] = {
        "method": jury.final_judgment_method,
        "collaborative": jury.use_collaborative,
        "rounds": jury.max_discussion_rounds,
        "stagnation": jury.stagnation_rounds,
        "tie": jury.tie_policy,
        "parallel": jury.parallel,
        "judge": jury.judge,
        "max_tokens": jury.max_tokens,
        "veto": jury.minority_veto,
        "veto_at": jury.veto_at,
        "selective": selective_label(jury.selective_error),
    }
    if jury.final_judge_model in state.get_catalog().ids:
        values["judge_model"] = jury.final_judge_model
    label = next((k for k, v in THRESHOLDS.items() if v == jury.consensus_threshold), None)
    if label:
        values["threshold"] = label
    form.restore({KEY + name: value for name, value in values.items()})
    rows = [
        {"model": s.model_id, "role_name": s.role_name, "role_focus": s.role_focus, "judge": s.judge or AUTO}
        for s in seats
    ]
    presets = {
        name: [p.model_dump() for p in panel]
        for name, panel in state.get_catalog().panels.items()
        if len(panel) == len(rows)
    }
    matched = next((n for n, p in presets.items() if p == rows), None)
    if matched or all(r["model"] in seat_models() for r in rows):  # else: seats this page cannot run
        form.put(KEY + "preset", matched or RUN_PANEL)
        st.session_state[KEY + "run_panel"] = None if matched else rows
    restore_case(case)


def _render_watched(view: JuryView, live: bool, run_id: str, details: bool = False) -> None:
    if view.case.get("content"):
        with st.expander(f"Case text: {md(view.case.get('title') or view.case.get('id'))}", expanded=False):
            st.text(str(view.case["content"]))
    # While the run goes, the rounds stay open and the charts wait for the end (they change with every event).
    render_view(
        view,
        key=KEY + ("live" if live else "view"),
        charts_too=not live,
        show_rounds=False if live else None,
        usage=run_usage(state.get_store(), run_id) if view.finished else None,  # shown with the finished line only
        details=details,  # the page's one Details toggle, not a second one in the view
    )


# -- running live ---------------------------------------------------------------------------------------


def handle_run(seats: list[JurorSeat], config: JuryConfig, case: JuryCase) -> str | None:
    """Start the run in the registry (or attach to the identical one already going) and return its id at
    once; the page then watches it. Nothing here waits on a model."""
    store = state.get_store()
    hub = state.get_hub()
    jury = Jury(seats, hub.get, config)
    settings = {
        "case": case.model_dump(),
        "jurors": [s.model_dump() for s in jury.seats],
        "jury": jury.config.model_dump(),
    }
    st.session_state[KEY + "error"] = None
    try:
        run_id = state.get_registry().start("jury.run", settings, lambda: run_case(store, jury, case))
    except RegistryError as exc:  # e.g. the database refused the run: say why, nothing was lost
        st.session_state[KEY + "error"] = f"The jury run could not start: {exc}"
        return None
    st.session_state[KEY + "run_id"] = run_id
    form.shown(FORM, run_id)  # the form already shows its settings
    set_url_run(run_id)
    state.clear_reads()
    return run_id
