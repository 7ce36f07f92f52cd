"""Replay: any stored jury run, step by step (step / play / pause / speed), rendered by the very view the
live Jury page uses; and two runs side by side (two final methods, a local vs. an API panel, …)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import (
    STOP_WORDS,
    export_buttons,
    in_words,
    md,
    method_words,
    run_usage,
)
from dashboard.labelling import jury_label
from dashboard.mechanisms.jury.view import gold_check, render_jury_whatif, render_view
from engine.events import incomplete_note
from engine.jury.view import JuryView

KEY = "replay."
SPEEDS = {"0.5×": 2.0, "1×": 1.0, "2×": 0.5, "4×": 0.25, "16×": 0.0625}


def jury_runs() -> list[dict[str, Any]]:
    return [r for r in state.list_runs(limit=500) if r["kind"].startswith("jury.") and r["kind"] != "jury.eval"]


def stored_events(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, e.payload) for e in state.get_store().events(run_id) if e.type not in ("run_started", "run_finished")
    ]


# What each stored event of a jury run is, in words (the step caption under the event slider).
EVENT_WORDS = {
    "jury_started": "the jury started",
    "phase_started": "phase 1 started",
    "juror_evaluation": "a juror's verdict",
    "consensus_check": "consensus check",
    "discussion_skipped": "discussion skipped",
    "round_started": "a discussion round started",
    "juror_statement": "a juror's statement",
    "round_completed": "the round ended",
    "discussion_ended": "the discussion ended",
    "final_judgment": "the final judgment",
    "jury_finished": "the jury finished",
    "run_failed": "the run failed",
}


def _label(run: dict[str, Any]) -> str:
    """A run in the picker: its time of day and status first (a narrow picker cuts the end, and runs of one case
    share their name), then its name (the case) and its id (what Runs and the URL show)."""
    name = run.get("name") or run["kind"]
    started = str(run["run"]).split("-")[2] if str(run["run"]).count("-") >= 3 else ""
    when = f"{started[:2]}:{started[2:4]}:{started[4:6]} · " if len(started) == 6 and started.isdigit() else ""
    return f"{when}{run['status']} · {name} · {run['run']}"


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
        stored = state.get_store().get_run(run["run"])
        if stored is not None and stored.status == "finished":
            jury_label(stored, key=KEY + "label." + run["run"])
            render_jury_whatif(stored, key=KEY + "whatif")
    with compare:
        _render_compare(runs)


def _render_incomplete(run: dict[str, Any]) -> None:
    """A run that did not finish says so, and after which event (st.text: the error is untrusted text)."""
    note = incomplete_note(run["status"], state.get_store().events(run["run"]), run.get("error"))
    if note:
        with st.container(border=True):
            st.text(f"⚠ {note}")


def play_label(playing: bool, step: int, total: int) -> str:
    """What the play button does next: pause a playing replay, replay one that reached its last event, else play."""
    if playing:
        return "⏸ Pause"
    return "↺ Replay" if total and step >= total else "▶ Play"


def _render_player(run_id: str) -> None:
    events = stored_events(run_id)
    total = len(events)
    at_key = KEY + "at." + run_id  # the event shown: the page's own state, never the slider's (see `_show`)
    st.session_state.setdefault(at_key, total)
    st.session_state.setdefault(KEY + "playing", False)
    if st.session_state[KEY + "playing"] and st.session_state[at_key] >= total:
        st.session_state[KEY + "playing"] = False  # the last event is shown: the button offers a replay
    # The buttons keep their labels and wrap in a narrow window (in five columns they were cut to 'S…').
    row = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    c1 = c2 = c3 = c4 = row

    def move(to: int | None = None, by: int = 0) -> None:  # `by`: from the step shown now (a tick may have moved it)
        _show(at_key, max(0, min(total, st.session_state[at_key] + by if to is None else to)))

    def toggle_play() -> None:
        playing = not st.session_state[KEY + "playing"]
        if playing and st.session_state[at_key] >= total:
            _show(at_key, 0)
        st.session_state[KEY + "playing"] = playing

    current = st.session_state[at_key]
    c1.button("⏮ Start", key=KEY + "first", on_click=move, args=(0,))
    c2.button("◀ Step", key=KEY + "back", on_click=move, kwargs={"by": -1})
    c3.button("Step ▶", key=KEY + "forward", on_click=move, kwargs={"by": 1})
    playing = st.session_state[KEY + "playing"]
    c4.button(play_label(playing, current, total), key=KEY + "play", on_click=toggle_play)
    speed = row.container(width=200).select_slider("Speed", list(SPEEDS), value="2×", key=KEY + "speed")
    # Playing is a fragment on a timer: each tick shows one more event and reruns only the player, never
    # the page (no sleep in the script); at the last event it reruns the page once, so the button offers a replay.
    player = st.fragment(_player, run_every=SPEEDS[speed] if playing and current < total else None)
    player(events, at_key, playing, run_id)


def _show(at_key: str, step: int) -> None:
    """Move the replay to `step`. The slider is then drawn anew under a fresh key, its value taken from the page's
    state: a value the browser sends late for an older slider (a timer tick that left before the last event
    arrived, on a loaded machine) can never move the replay back, and the slider and its caption always agree."""
    st.session_state[at_key] = step
    st.session_state[at_key + ".moves"] = st.session_state.get(at_key + ".moves", 0) + 1


def _player(events: list[tuple[str, dict[str, Any]]], at_key: str, playing: bool, run_id: str) -> None:
    total = len(events)
    if playing and st.session_state[KEY + "playing"] and st.session_state[at_key] < total:
        _show(at_key, st.session_state[at_key] + 1)
    slider_key = f"{at_key}.slider.{st.session_state.get(at_key + '.moves', 0)}"

    def dragged() -> None:  # the reader moved the slider: the page follows it
        st.session_state[at_key] = st.session_state[slider_key]

    step = st.slider(
        "Event",
        0,
        max(total, 1),
        value=min(st.session_state[at_key], max(total, 1)),
        key=slider_key,
        on_change=dragged,
        disabled=total == 0,
    )
    shown = events[:step]
    st.caption(f"Event {step} of {total}" + (f": {md(in_words(shown[-1][0], EVENT_WORDS))}" if shown else ""))
    view = JuryView.fold(shown)
    render_view(view, key=KEY + "view", usage=run_usage(state.get_store(), run_id) if view.finished else None)
    if playing and step >= total and st.session_state[KEY + "playing"]:
        st.session_state[KEY + "playing"] = False
        st.rerun()  # the whole page: the button now offers a replay and the timer stops


def compare_defaults(
    runs: list[dict[str, Any]],
    wanted: str | None = None,
    case_of: Callable[[str], str | None] = lambda _run: None,
    look: int = 50,
) -> tuple[str, str | None]:
    """Two different runs to compare: the one asked for (else the newest) on the left; on the right the newest
    other run of the same case among the `look` newest, else the newest other run; None when only one exists."""
    ids: list[str] = [str(r["run"]) for r in runs]
    left: str = wanted if wanted is not None and wanted in ids else ids[0]
    others = [i for i in ids if i != left]
    if not others:
        return left, None
    case = case_of(left)
    same = next((i for i in others[:look] if case is not None and case_of(i) == case), None)
    return left, same or others[0]


def _case_of(run_id: str) -> str | None:
    run = state.get_store().get_run(run_id)
    case = (run.config.get("case") or {}) if run is not None else {}
    return case.get("id") if isinstance(case, dict) else None


def _render_compare(runs: list[dict[str, Any]]) -> None:
    labels = {r["run"]: _label(r) for r in runs}
    default_left, default_right = compare_defaults(runs, st.query_params.get("run"), _case_of)
    if default_right is None:
        st.info("Only one jury run is stored: run another (another final method, another panel…) to compare.")
        return
    ids = list(labels)
    pick_left, pick_right = st.columns(2)
    a = pick_left.selectbox(
        "Left run", ids, index=ids.index(default_left), format_func=labels.__getitem__, key=KEY + "left"
    )
    b = pick_right.selectbox(
        "Right run", ids, index=ids.index(default_right), format_func=labels.__getitem__, key=KEY + "right"
    )
    if a == b:
        st.warning("The same run is on both sides: pick another run on one side.")
    views = {side: JuryView.fold(stored_events(run_id)) for side, run_id in (("left", a), ("right", b))}
    usage = {run_id: run_usage(state.get_store(), run_id) for run_id in (a, b)}
    st.dataframe(
        pd.DataFrame([summary_row(a, views["left"], usage[a]), summary_row(b, views["right"], usage[b])]),
        hide_index=True,
        width="stretch",
    )
    left, right = st.columns(2)  # the summary table above both runs, not below the longer one
    for column, side, run_id in ((left, "left", a), (right, "right", b)):
        with column:
            render_view(views[side], key=f"{KEY}{side}.view", show_rounds=True, stacked=True, usage=usage[run_id])


def summary_row(run_id: str, view: JuryView, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run in the compare table, identifiers in words; its tokens are its recorded calls' (`usage`, as on
    the Runs page), else the run's own count."""
    done = view.finished or {}
    final = view.final or {}
    tokens = (
        int(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        if usage is not None
        else (done.get("promptTokens") or 0) + (done.get("completionTokens") or 0)
    )
    return {
        "run": run_id,
        "case": view.case.get("id"),
        "panel": ", ".join(j["model_id"] for j in view.jurors),
        "method": method_words(final, view.config) if final else None,
        "verdict": in_words(final["verdict"]) if final.get("verdict") else None,
        "score": final.get("score"),
        "gold": in_words(view.case["gold"]) if view.case.get("gold") else None,
        "right": gold_check(view),
        "rounds": done.get("totalRounds"),
        "ended": in_words(done["terminationReason"], STOP_WORDS) if done.get("terminationReason") else None,
        "position changes": sum(s["positionChanged"] for s in view.statements()),
        "tokens": tokens,
        "wall s": done.get("wallS"),
    }
