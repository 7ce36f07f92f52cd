"""Replay: any stored jury run, step by step (step / play / pause / speed), rendered by the very view the
live Jury page uses; and two runs side by side (two final methods, a local vs. an API panel, …)."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import export_buttons, md
from engine.events import incomplete_note
from engine.jury import JuryView
from pages.jury import render_view

KEY = "replay."
SPEEDS = {"0.5×": 2.0, "1×": 1.0, "2×": 0.5, "4×": 0.25, "16×": 0.0625}


def jury_runs() -> list[dict[str, Any]]:
    return [r for r in state.list_runs(limit=500) if r["kind"].startswith("jury.") and r["kind"] != "jury.eval"]


def stored_events(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in state.get_store().events(run_id)
            if e.type not in ("run_started", "run_finished")]


def _label(run: dict[str, Any]) -> str:
    return f"{run['run']} · {run['kind']} · {run['status']}"


def render() -> None:
    st.title("⏯️ Replay")
    st.caption("A stored jury run, event by event, exactly as the Jury page showed it live. No model is called.")
    runs = jury_runs()
    if not runs:
        st.info("No jury runs stored yet: run one on the Jury page or with `judgelab jury run`.")
        return
    wanted = st.query_params.get("run")
    ids = [r["run"] for r in runs]
    index = ids.index(wanted) if wanted in ids else 0
    single, compare = st.tabs(["Step through a run", "Compare two runs"])
    with single:
        run = st.selectbox("Run", runs, index=index, format_func=_label, key=KEY + "run")
        _render_incomplete(run)
        export_buttons(state.get_store(), run["run"], key=KEY + "export")
        _render_player(run["run"])
    with compare:
        _render_compare(runs)


def _render_incomplete(run: dict[str, Any]) -> None:
    """A run that did not finish says so, and after which event (st.text: the error is untrusted text)."""
    note = incomplete_note(run["status"], state.get_store().events(run["run"]), run.get("error"))
    if note:
        with st.container(border=True):
            st.text(f"⚠ {note}")


def _render_player(run_id: str) -> None:
    events = stored_events(run_id)
    total = len(events)
    step_key = KEY + "step." + run_id
    st.session_state.setdefault(step_key, total)
    st.session_state.setdefault(KEY + "playing", False)
    advance = st.session_state.pop(KEY + "advance", None)  # set by the previous run while playing
    if advance is not None:
        st.session_state[step_key] = min(total, advance)
    c1, c2, c3, c4, c5 = st.columns([1, 1, 1, 1, 2])

    def move(to: int) -> None:
        st.session_state[step_key] = max(0, min(total, to))

    def toggle_play() -> None:
        playing = not st.session_state[KEY + "playing"]
        if playing and st.session_state[step_key] >= total:
            st.session_state[step_key] = 0
        st.session_state[KEY + "playing"] = playing

    current = st.session_state[step_key]
    c1.button("⏮ Start", key=KEY + "first", on_click=move, args=(0,))
    c2.button("◀ Step", key=KEY + "back", on_click=move, args=(current - 1,))
    c3.button("Step ▶", key=KEY + "forward", on_click=move, args=(current + 1,))
    playing = st.session_state[KEY + "playing"]
    c4.button("⏸ Pause" if playing else "▶ Play", key=KEY + "play", on_click=toggle_play)
    speed = c5.select_slider("Speed", list(SPEEDS), value="2×", key=KEY + "speed")
    step = st.slider("Event", 0, max(total, 1), key=step_key, disabled=total == 0)
    shown = events[:step]
    st.caption(f"Event {step} of {total}" + (f": {md(shown[-1][0])}" if shown else ""))
    render_view(JuryView.fold(shown), key=KEY + "view")
    if playing:
        if step < total:
            time.sleep(SPEEDS[speed])
            st.session_state[KEY + "advance"] = step + 1
            st.rerun()
        st.session_state[KEY + "playing"] = False


def _render_compare(runs: list[dict[str, Any]]) -> None:
    left, right = st.columns(2)
    a = left.selectbox("Left run", runs, index=0, format_func=_label, key=KEY + "left")
    b = right.selectbox("Right run", runs, index=min(1, len(runs) - 1), format_func=_label, key=KEY + "right")
    views = {side: JuryView.fold(stored_events(run["run"])) for side, run in (("left", a), ("right", b))}
    st.dataframe(pd.DataFrame([summary_row(a["run"], views["left"]), summary_row(b["run"], views["right"])]),
                 hide_index=True, width="stretch")
    with left:
        render_view(views["left"], key=KEY + "left.view", show_rounds=True)
    with right:
        render_view(views["right"], key=KEY + "right.view", show_rounds=True)


def summary_row(run_id: str, view: JuryView) -> dict[str, Any]:
    done = view.finished or {}
    return {
        "run": run_id, "case": view.case.get("id"), "panel": ", ".join(j["model_id"] for j in view.jurors),
        "method": (view.final or {}).get("method"), "verdict": (view.final or {}).get("verdict"),
        "score": (view.final or {}).get("score"), "gold": view.case.get("gold"), "rounds": done.get("totalRounds"),
        "ended": done.get("terminationReason"),
        "position changes": sum(s["positionChanged"] for s in view.statements()),
        "tokens": (done.get("promptTokens") or 0) + (done.get("completionTokens") or 0), "wall s": done.get("wallS"),
    }
