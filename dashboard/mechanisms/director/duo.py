"""The Duo simulator tab: two characters, a topic and a scene, a model, turns, retries and what to do when they run out;
the dialogue as it goes, each line with its status, why, its mended or rejected drafts."""

from __future__ import annotations

from typing import Any

import streamlit as st
from pydantic import ValidationError

from dashboard import formstate as form
from dashboard import state
from dashboard.components import flow_columns, md
from dashboard.mechanisms.director.fields import DUO_PARAM, DUO_RUN, KEY
from dashboard.mechanisms.director.pickers import model_picker, rubric_judge_picker
from dashboard.mechanisms.director.runs import start_run
from dashboard.mechanisms.director.words import status_badge, status_why
from dashboard.watch import Collected, is_live, start_error, watch_run, watched_run
from engine.director.config import DirectorConfig
from engine.director.dialogue import DuoConfig, run_duo

POLICY_WORDS = {  # DirectorConfig.on_retries_exhausted, in words
    "mark": "show it, marked RETRY",
    "accept_last": "accept the last draft",
    "drop": "drop the line",
}


def _is_base_model(model_id: str) -> bool:
    try:
        return state.get_catalog().get(model_id).tuning == "base"
    except KeyError:
        return False


def render_duo(profiles: dict[str, Any]) -> None:
    """The Duo simulator tab: the form and its Run button, then the dialogue as it goes."""
    names = list(profiles)
    c1, c2 = st.columns(2)

    def name_of(c: str) -> str:
        return str(profiles[c].name)

    first = form.choice(c1.selectbox, "First speaker", names, KEY + "duo_first", format_func=name_of)
    second = form.choice(c2.selectbox, "Second speaker", names, KEY + "duo_second", format_func=name_of)
    topic = form.field(c1.text_input, "Topic", KEY + "duo_topic")
    scene = form.field(c2.text_input, "Scene", KEY + "duo_scene")
    model_id = model_picker(KEY + "duo_model")
    if model_id is not None and _is_base_model(model_id):
        st.caption(
            "A small base model cannot follow “write a line as やな”: it continues a script that opens with each "
            "sister's own lines, so their voices hold, but it rarely keeps to the topic. For lines on topic, pick a "
            "larger model (an API model, or a bigger GGUF added to the catalog)."
        )
    c3, c4, c5 = flow_columns(3, width=190)  # side by side where they fit: in thirds the policy was cut at 900 px
    turns = form.field(c3.number_input, "Turns", KEY + "duo_turns", 1, 20)
    retries = form.field(c4.number_input, "Max retries", KEY + "duo_retries", 0, 5)
    policy = form.choice(
        c5.selectbox,
        "When retries run out",
        list(POLICY_WORDS),
        KEY + "duo_policy",
        format_func=lambda p: POLICY_WORDS[p],
    )
    use_rubric = form.field(st.toggle, "LLM rubric on every line", KEY + "duo_rubric")
    if use_rubric:
        rubric_judge_picker(KEY + "duo_rubric_judge", model_id)
    run_id = watched_run(DUO_PARAM, DUO_RUN)
    live = is_live(run_id)
    if st.button(
        "Run dialogue",
        type="primary",
        key=KEY + "duo_run",
        disabled=model_id is None or first == second or live,
        help="A dialogue is going: watch it below, or cancel it" if live else None,
    ):
        if handle_duo(
            profiles[first], profiles[second], model_id, topic, scene, int(turns), int(retries), policy, use_rubric
        ):
            st.rerun()  # drawn again with Run off while the dialogue goes
    start_error(DUO_RUN)
    if not run_id:
        return
    st.caption(f"recorded as run {md(run_id)}")
    run = state.get_store().get_run(run_id)
    speakers = (run.config.get("first"), run.config.get("second")) if run is not None else (first, second)

    def render_dialogue(view: Collected, live: bool) -> None:
        turns_done = view.result if isinstance(view.result, list) else None
        if turns_done is not None:
            for turn in turns_done:
                _render_duo_turn(profiles, speakers, turn)
            return
        # While it goes (or after a cancel): the turns so far, each with the review of its last draft (the
        # drafts' verdicts come in order, `attempts` of them a turn), so a WARN says why at once.
        verdicts, seen = view.of("director_verdict"), 0
        for turn in view.of("director_turn"):
            seen += int(turn.get("attempts") or 1)
            final = verdicts[seen - 1] if 0 < seen <= len(verdicts) else None
            _render_duo_turn(profiles, speakers, turn | {"attempts": None}, final)

    watch_run(run_id, Collected, render_dialogue, key=KEY + "duo_watch")


def _render_duo_turn(
    profiles: dict[str, Any], speakers: tuple[Any, Any], turn: dict[str, Any], review: dict[str, Any] | None = None
) -> None:
    speaker = turn["speaker"]
    profile = profiles.get(speaker)
    name = profile.name if profile is not None else speaker
    attempts = turn["attempts"]  # the drafts (a finished run's result), or their count (a live event)
    n_attempts = attempts if isinstance(attempts, int) else len(attempts) if attempts else 1
    with st.chat_message(name, avatar="🧡" if speaker == speakers[0] else "💙"):
        label = {
            "accepted": "",
            "accepted_after_retries": f" after {n_attempts - 1} retr{'y' if n_attempts == 2 else 'ies'}",
            "accepted_last": " (accepted last draft)",
            "dropped": " (dropped)",
            "marked": " (shown, marked RETRY)",
        }[turn["outcome"]]
        final = attempts[-1] if isinstance(attempts, list) and attempts else None
        review = final["review"] if final is not None else review
        why = status_why(review) if review is not None and turn["status"] != "PASS" else ""
        st.markdown(f"**{md(name)}** {status_badge(turn['status'])}{label}" + (f" — {md(why)}" if why else ""))
        if turn["text"] is None:
            st.markdown("_— line dropped —_")
        else:
            st.text(turn["text"])
        if review is not None and review.get("mended") is not None and final is not None:
            st.caption("✏️ Mended by the director; as written: " + md(final["text"]))
        if final is not None and len(attempts) > 1 and final.get("feedback"):
            st.caption("↻ Written after the director sent the last draft back with: " + md(final["feedback"]))
        if turn.get("instruction"):
            with st.expander("The director's note, carried from the previous WARN line"):
                st.text(turn["instruction"])
        if not isinstance(attempts, list):
            return
        rejected = [a for a in attempts if a["review"]["status"] == "RETRY"]
        if turn["outcome"] in ("accepted", "accepted_after_retries"):
            rejected = attempts[:-1]
        if rejected:
            with st.expander(f"{len(rejected)} rejected draft(s)"):
                for attempt in rejected:
                    st.markdown(f"~~{md(attempt['text'])}~~")
                    st.caption("why: " + md(status_why(attempt["review"]) or "—"))


def handle_duo(
    first: Any,
    second: Any,
    model_id: str | None,
    topic: str,
    scene: str,
    turns: int,
    retries: int,
    policy: str,
    use_rubric: bool,
) -> str | None:
    """`director.run_duo` (the entry point `judgelab director duo` calls too) started in the registry."""
    if model_id is None:
        return None
    try:
        config = DuoConfig(
            first=first.id,
            second=second.id,
            model_id=model_id,
            topic=topic,
            scene=scene,
            turns=turns,
            rubric=use_rubric,
            director=DirectorConfig(
                max_retries=retries,
                on_retries_exhausted=policy,
                rubric_judge=st.session_state.get(KEY + "duo_rubric_judge", "generate") if use_rubric else "generate",
            ),
        )
    except ValidationError as exc:
        st.session_state[DUO_RUN + ".error"] = f"No dialogue: {exc.errors()[0]['msg']}"
        return None
    return start_run("director.duo", config, run_duo, DUO_PARAM, DUO_RUN)
