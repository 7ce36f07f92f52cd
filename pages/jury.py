"""Jury: choose jurors (model + role), the final method, rounds and threshold; pick or paste a case; watch
phase 1, the continuous discussion and the final verdict arrive live. Everything shown is a fold of the
run's events (`JuryView`), which is also what the Replay page folds, so both pages show the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, state
from dashboard.components import md
from engine.config import ConfigError, get_settings
from engine.events import QueueSink
from engine.jury import (
    CaseError,
    JurorSeat,
    Jury,
    JuryCase,
    JuryConfig,
    JuryView,
    failed_fields,
    load_cases,
    panel_seats,
    run_case,
)

KEY = "jury."
THRESHOLDS = {"2.0 — always discuss to the end": 2.0, "1.0 — only unanimity stops": 1.0,
              "0.67 — a 2-of-3 majority stops": 0.67, "0.5 — any strict majority stops": 0.5}
BADGE = {"safe_pass": "🟢", "needs_review": "🟡", "unsafe_fail": "🔴"}


def case_files() -> list[Path]:
    data = get_settings().data_dir
    return sorted((data / "scenarios" / "jury").glob("*.y*ml")) + sorted((data / "benchmarks").glob("jury*.jsonl"))


def _init_state() -> None:
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "error", None)


def render() -> None:
    _init_state()
    st.title("⚖️ Jury")
    st.caption("N jurors evaluate a case in parallel, then discuss in parallel rounds — each sees every earlier "
               "statement and may change its position — until consensus or the round limit; then a final judgment.")
    seats, config = _render_panel()
    case = _render_case()
    busy = seats is None or config is None or case is None
    if st.button("Run the jury", type="primary", key=KEY + "run", disabled=busy):
        assert seats is not None and config is not None and case is not None
        handle_run(seats, config, case)
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    run_id = st.session_state[KEY + "run_id"]
    if run_id:
        view = fold_run(run_id)
        st.divider()
        st.caption(f"Run `{run_id}` — [open in Runs](/runs?run={run_id}) · replay it on the Replay page")
        render_view(view, key=KEY + "view")


# -- controls ---------------------------------------------------------------------------------------


def _render_panel() -> tuple[list[JurorSeat] | None, JuryConfig | None]:
    catalog = state.get_catalog()
    availability = state.get_availability()
    with st.expander("Panel and settings", expanded=True):
        names = list(catalog.panels)
        preset = st.selectbox("Panel preset", names, key=KEY + "preset",
                              help="Panels are defined in models/catalog.yaml; edit the seats below.")
        rows = [{"model": s.model, "role_name": s.role_name, "role_focus": s.role_focus}
                for s in catalog.panels.get(preset, [])]
        edited = st.data_editor(
            pd.DataFrame(rows), num_rows="dynamic", width="stretch", key=KEY + "seats." + preset,
            column_config={
                "model": st.column_config.SelectboxColumn("Model", options=catalog.ids, required=True),
                "role_name": st.column_config.TextColumn("Role", required=True),
                "role_focus": st.column_config.TextColumn("Focus prompt", width="large"),
            })
        c1, c2, c3, c4 = st.columns(4)
        method = c1.selectbox("Final judgment", ["majority_vote", "weighted_average", "final_judge"], index=2,
                              key=KEY + "method")
        judge_model = c1.selectbox("Final judge model", catalog.ids, key=KEY + "judge_model",
                                   disabled=method != "final_judge")
        rounds = c2.number_input("Max discussion rounds", 0, 10, 3, key=KEY + "rounds")
        stagnation = c2.number_input("Stop after still rounds", 1, 10, 2, key=KEY + "stagnation",
                                     help="End the discussion when no juror changed position for this many rounds.")
        threshold = THRESHOLDS[c3.selectbox("Consensus threshold", list(THRESHOLDS), key=KEY + "threshold")]
        tie = c3.selectbox("Tie policy", ["severe", "lenient", "higher_score", "first"], key=KEY + "tie",
                           help="How a tied vote is broken (default: the more severe verdict).")
        parallel = c4.toggle("Parallel jurors", value=True, key=KEY + "parallel",
                             help="Off: jurors speak one after another (to compare wall time).")
        max_tokens = c4.number_input("Max tokens per answer", 32, 2048, 220, key=KEY + "max_tokens")
        judge = c4.selectbox("Jurors judge by", ["generate", "likelihood"], key=KEY + "judge",
                             help="generate: each juror writes its evaluation as JSON; likelihood: its verdict is "
                                  "the calibrated likelihood of the rubric's label words (models that can score)")
    try:
        records = [r for r in edited.to_dict("records") if isinstance(r.get("model"), str) and r.get("model")]
        seats = panel_seats([{k: ("" if pd.isna(v) else str(v)) for k, v in r.items()} for r in records])
        config = JuryConfig(max_discussion_rounds=int(rounds), consensus_threshold=threshold,
                            final_judgment_method=method, final_judge_model=judge_model,
                            stagnation_rounds=int(stagnation), tie_policy=tie, parallel=parallel,
                            max_tokens=int(max_tokens), judge=judge)
    except (ValueError, KeyError, ConfigError) as exc:
        st.error(f"Panel: {md(exc, inline=False)}")
        return None, None
    if not seats:
        st.warning("Add at least one juror.")
        return None, None
    needed = {s.model_id for s in seats} | ({judge_model} if method == "final_judge" else set())
    missing = [f"{m}: {availability[m].reason}" for m in sorted(needed) if m in availability
               and not availability[m].available]
    if missing:
        st.error("Unavailable: " + md("; ".join(missing)))
        return None, None
    shared_local = [m for m in needed if catalog.get(m).backend == "llamacpp"
                    and sum(s.model_id == m for s in seats) > 1]
    if shared_local and parallel:
        st.info(f"{md(', '.join(shared_local))} seats several jurors: one local model answers one call at a time, "
                "so their calls queue behind its lock (the timeline shows it). API jurors run truly in parallel.")
    return seats, config


def _render_case() -> JuryCase | None:
    source = st.radio("Case", ["From a file", "Paste one"], horizontal=True, key=KEY + "source")
    if source == "Paste one":
        title = st.text_input("Title", "My case", key=KEY + "paste_title")
        content = st.text_area("Agent card and conversation log (or any text to judge)", height=160,
                               key=KEY + "paste_content")
        if not content.strip():
            st.info("Paste the case to judge.")
            return None
        return JuryCase(id="pasted", title=title, content=content)
    files = case_files()
    if not files:
        st.warning("No case files under data/scenarios/jury or data/benchmarks.")
        return None
    path = st.selectbox("File", files, format_func=lambda p: p.name, key=KEY + "file")
    try:
        cases = load_cases(path)
    except CaseError as exc:
        st.error(md(exc, inline=False))
        return None
    chosen = st.selectbox("Case", cases, key=KEY + "case." + path.name,
                          format_func=lambda c: f"{c.id} — {c.title}" + (f" (gold: {c.gold})" if c.gold else ""))
    with st.expander("Case text"):
        st.text(chosen.content)
        if chosen.rubric is not None:
            rubric = chosen.rubric
            st.caption(f"Own rubric: verdicts {md(', '.join(rubric.verdicts))}; axes {md(', '.join(rubric.axes))}")
    return chosen


# -- running live ---------------------------------------------------------------------------------------


def handle_run(seats: list[JurorSeat], config: JuryConfig, case: JuryCase) -> None:
    """Run on the background loop and render each event as it arrives (the live view)."""
    store = state.get_store()
    hub = state.get_hub()
    sink = QueueSink()
    jury = Jury(seats, hub.get, config)
    future = state.get_loop().submit(run_case(store, jury, case, sinks=[sink]))
    st.session_state[KEY + "error"] = None
    view = JuryView()
    live = st.empty()
    ended = False
    while not ended:
        events, ended = sink.drain(timeout=0.25)
        for event in events:
            view.apply(event.type, event.payload)
        if events:
            with live.container():
                render_view(view, key=KEY + "live", charts_too=False, show_rounds=False)
        if future.done() and not events and not ended:
            break  # the run failed before closing the sink
    live.empty()
    run_id: str | None
    try:
        run_id, _ = future.result(timeout=30)
    except Exception as exc:  # the run is stored as failed; say why and keep what was recorded
        st.session_state[KEY + "error"] = f"The jury run failed: {exc}"
        run_id = next((r["run"] for r in state.list_runs(kind="jury.run", limit=1)), None)
    st.session_state[KEY + "run_id"] = run_id
    state.clear_reads()


def fold_run(run_id: str) -> JuryView:
    store = state.get_store()
    return JuryView.fold([(e.type, e.payload) for e in store.events(run_id)])


# -- the view (shared with the Replay page) -------------------------------------------------------


def render_view(view: JuryView, *, key: str, charts_too: bool = True, show_rounds: bool | None = None) -> None:
    """Every text of the run (case, roles, verdict labels, reasoning, statements, errors) is untrusted: it is
    shown with `st.text` or escaped by `md` inside trusted markdown, never as markdown or HTML of its own."""
    if view.failed:
        st.error(f"Run failed: {md(view.failed, inline=False)}")
    if not view.case:
        st.info("Waiting for the jury to start…")
        return
    labels = view.rubric.get("verdicts") or ["safe_pass", "needs_review", "unsafe_fail"]
    st.subheader(f"Case {md(view.case.get('id'))}: {md(view.case.get('title', ''))}")
    st.markdown("**Phase 1 — independent evaluations**")
    cols = st.columns(max(1, len(view.jurors)))
    by_juror = {e["juror"]: e for e in view.phase1}
    for col, juror in zip(cols, view.jurors, strict=False):
        with col.container(border=True):
            st.markdown(f"**{md(juror['role_name'])}**")
            st.caption(md(juror["model_id"]))
            e = by_juror.get(juror["juror_id"])
            if e is None:
                st.caption("thinking…")
                continue
            st.markdown(f"{_badge(e['verdict'])} **{md(e['verdict'])}** · score {e['score']:.0f} · "
                        f"confidence {e['confidence']:.2f}")
            if e.get("fallback"):
                st.warning(f"fallback (does not vote) — {md(e.get('fallbackReason'))}", icon="⚠️")
            if failed_fields(e.get("flags") or []):
                st.caption("⚠ failed fields: " + md(", ".join(failed_fields(e["flags"]))))
            st.text(e["reasoning"] or "(no reasoning)")
            if e.get("axes"):
                st.caption(" · ".join(f"{md(k)} {v:.0f}" for k, v in e["axes"].items()))
    if view.phase1_consensus:
        c = view.phase1_consensus
        st.caption(f"Consensus after phase 1: **{md(c['consensusStatus'])}** (agreement {c['agreementLevel']:.2f})"
                   + (f", {c['failedSeats']} failed seat(s) not voting" if c.get("failedSeats") else "")
                   + (" — reached, no discussion needed" if c["consensusReached"] else ""))

    if view.rounds:
        head, toggle = st.columns([4, 1])
        head.markdown("**Phase 2 — discussion**")
        rounds_on = show_rounds if show_rounds is not None else toggle.toggle(
            "Show rounds", value=False, key=key + ".rounds")
        for rnd in view.rounds:
            if rounds_on:
                st.caption(f"— round {rnd['round']} —")
            for stt in rnd["statements"]:
                render_statement(view, stt)
            if rounds_on and rnd["completed"]:
                c = rnd["completed"]
                st.caption(f"consensus: {md(c['consensusStatus'])} ({c['agreementLevel']:.2f})")
        flow = [r["completed"]["consensusStatus"] for r in view.rounds if r["completed"]]
        if flow:
            st.caption("Consensus per round: " + md(" → ".join(flow))
                       + (f" · ended: {md(view.ended['reason'])}" if view.ended else ""))

    if view.final:
        f = view.final
        st.markdown("**Phase 3 — final judgment**")
        if view.no_verdict:
            st.error(f"⛔ **No verdict** · {md(f['method'])} — too few jurors worked to decide")
        else:
            st.success(f"{_badge(f['verdict'])} **{md(f['verdict'])}** · score {f['score']:.1f} · {md(f['method'])}"
                       + ("  (tie broken)" if f.get("tie_broken") else ""))
        if f.get("reasoning"):
            st.text(f["reasoning"])
        if f.get("flags"):
            st.warning("Flags: " + md(", ".join(f["flags"])))
    if view.finished:
        d = view.finished
        st.caption(f"{d['totalRounds']} round(s), {md(d['terminationReason'])}, {d['wallS']:.1f} s, "
                   f"{d['promptTokens']}+{d['completionTokens']} tokens, ${d['cost']:.4f}"
                   + (f" · gold: {md(view.case['gold'])}" if view.case.get("gold") else ""))
    if charts_too and view.phase1:
        c1, c2, c3 = st.columns(3)
        c1.plotly_chart(charts.jury_trajectory(view.trajectory()), key=key + ".trajectory")
        timeline = view.timeline()
        if timeline:
            c2.plotly_chart(charts.jury_timeline(timeline), key=key + ".timeline")
        c3.plotly_chart(charts.jury_verdicts(view.verdicts(), [*labels, "failed"]), key=key + ".verdicts")


def render_statement(view: JuryView, stt: dict[str, Any]) -> None:
    """One juror statement as a card: trusted badges around the statement, which is shown as plain text."""
    badges = (" :blue-badge[立場変更 / position changed]" if stt["positionChanged"] else "") + (
        " :orange-badge[fallback]" if stt.get("evaluation", {}).get("fallback") else "")
    with st.container(border=True):
        st.markdown(f"**{md(view.role(stt['juror']))}**{badges}")
        st.text(stt["statement"])
        st.caption(f"{_badge(stt['newVerdict'])} {md(stt['newVerdict'])} · {stt['newScore']:.0f}")


def _badge(verdict: Any) -> str:
    return BADGE.get(verdict, "⚪") if isinstance(verdict, str) else "⚪"
