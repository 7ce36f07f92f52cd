"""The Check a line tab: the character, the line (or an example of each status), the scene and the optional rubric; the
review under it — status and why, the line highlighted, the rules' table, the tone, the rubric — and your mark of the
line."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from dashboard import demo, state
from dashboard import formstate as form
from dashboard.components import md, metric_row
from dashboard.labelling import label_buttons, run_item
from dashboard.mechanisms.director import charts
from dashboard.mechanisms.director.fields import CHECK_PARAM, CHECK_RUN, KEY
from dashboard.mechanisms.director.pickers import model_picker, rubric_judge_picker
from dashboard.mechanisms.director.runs import start_run
from dashboard.mechanisms.director.words import highlight, mended_mark, status_badge, status_why, tone_words
from dashboard.watch import Collected, is_live, start_error, watch_run, watched_run
from engine.director.config import DirectorConfig
from engine.director.review import CheckConfig, review_line
from engine.director.rubric import RUBRIC_LABELS
from engine.store import FINISHED

RULES_ONLY = KEY + "rules_only"  # the rules-only check run that stands in for a demo-missed rubric check
RULES_ONLY_NOTE = "The rubric score of this line is not in the demo recording — rules only."


def render_check(profiles: dict[str, Any]) -> None:
    """The Check a line tab: the form and its Check button, then the review of the run it started."""
    # The form, then the review under it at full width: beside it, at 900 px the rule table needed a scroll.
    left = right = st.container()
    with left:
        names = list(profiles)
        character = form.choice(
            st.selectbox, "Character", names, KEY + "character", format_func=lambda c: f"{profiles[c].name} ({c})"
        )
        form.field(st.text_area, "Line", KEY + "line", height=110)
        _example_buttons(profiles)
        form.field(st.text_input, "Scene (for the rubric)", KEY + "scene")
        use_model = form.field(st.toggle, "Also score the LLM rubric", KEY + "use_rubric")
        model_id = None
        if use_model:
            model_id = model_picker(KEY + "rubric_model")
            rubric_judge_picker(KEY + "rubric_judge", model_id)
        run_id = _rules_only_on_demo_miss(watched_run(CHECK_PARAM, CHECK_RUN))
        live = is_live(run_id)
        if st.button("Check", type="primary", key=KEY + "check", disabled=live):
            run_id = handle_check(profiles[character], model_id) or run_id
            if is_live(run_id):
                st.rerun()  # drawn again with Check off while the rubric is scored
        start_error(CHECK_RUN)
    with right:
        if not run_id:
            st.info("Rules update as you press Check; with the rubric on, the model's scores join them.")
            return
        watch_run(run_id, Collected, _render_check_view, key=KEY + "check_watch")


# One example line per status, each the seed's kind of case (the Check button then judges it like any other line).
CHECK_EXAMPLES: dict[str, tuple[str, str]] = {
    "PASS": ("yana", "えー、ほんと？海って気持ちいいわ！"),
    "WARN": ("ayu", "日焼け止めは二時間ごとに塗り直すのが推奨されています。忘れないようにしましょう。"),
    "MODIFY · too long": (
        "yana",
        "えー、ほんとにこの海辺の散歩道って、朝の光がきらきらして波の音もやさしくて、ずっと歩いていたくなるくらい"
        "気持ちいいわ！帰りに駅前のカフェで冷たいレモネードを飲んで、夕焼けの時間まで窓際の席でゆっくりしたいな。",
    ),
    "MODIFY · praise word": ("ayu", "今日はすごく暑いですね。水分補給が推奨されています。"),
    "RETRY": ("yana", "まだ未成年じゃないわ！"),
}


def _use_example(name: str) -> None:
    character, line = CHECK_EXAMPLES[name]
    form.restore({KEY + "character": character, KEY + "line": line})


def _example_buttons(profiles: dict[str, Any]) -> None:
    """Fill the form with an example of each status (a click sets the boxes before they are drawn again)."""
    shown = [name for name, (character, _) in CHECK_EXAMPLES.items() if character in profiles]
    if not shown:
        return
    row = st.container(horizontal=True, wrap=True, gap="small", vertical_alignment="center")
    row.caption("Examples of each status:", width="content")
    for name in shown:
        row.button(name, key=f"{KEY}example.{name}", on_click=_use_example, args=(name,), type="tertiary")


def _rules_only_on_demo_miss(run_id: str | None) -> str | None:
    """Demo mode: a check whose rubric call the recording lacks ends on a ReplayMiss, yet its rules need no model.
    The same line is then checked by the rules alone (a run of its own, so it is marked and exported as what it
    is) and shown with one line saying so, rather than a notice with no verdict at all."""
    if not run_id or not demo.enabled() or is_live(run_id):
        return run_id
    run = state.get_store().get_run(run_id)
    if run is None or run.status == FINISHED or not demo.is_miss(run.error) or not run.config.get("model_id"):
        return run_id
    try:
        config = CheckConfig.model_validate(run.config | {"model_id": None})
    except ValidationError:
        return run_id
    rules_id = start_run("director.check", config, review_line, CHECK_PARAM, CHECK_RUN, settle=True)
    if rules_id:
        st.session_state[RULES_ONLY] = rules_id
    return rules_id or run_id


def _render_check_view(view: Collected, live: bool) -> None:
    verdicts = view.of("director_verdict")
    if verdicts:
        _render_review(verdicts[-1])
        item = run_item(st.session_state.get(CHECK_RUN)) if not live else None
        if item is not None:
            what = "the mended line" if verdicts[-1].get("mended") is not None else "the line"
            st.markdown(f"**Your mark:** is {what} fine to say (OK), or should it be rewritten (RETRY)?")
            label_buttons(
                "director",
                item.key,
                run_id=item.run_id,
                key=KEY + "check_label",
                context=item.context,
                prompt="Your mark of this line",
            )
    elif live:
        st.caption("Scoring the rubric…")


def _render_review(review: dict[str, Any]) -> None:
    st.markdown(f"### {status_badge(review['status'])}")
    if why := status_why(review):
        st.markdown(f"**Why {review['status']}:** {md(why)}")
    run_id = st.session_state.get(CHECK_RUN)
    if run_id:
        st.caption(f"recorded as run {md(run_id)}")
        if run_id == st.session_state.get(RULES_ONLY):
            st.caption(RULES_ONLY_NOTE)
    if review.get("mended") is not None:
        st.markdown("**Shown as** — the director mended the line itself (MODIFY) instead of sending it back:")
        st.text(str(review["mended"]))
    marked = highlight(review["normalized"], review["rules"])
    normalised = "**As written, normalised**" if review.get("mended") is not None else "**Normalised**"
    if marked != md(review["normalized"], inline=False):
        st.markdown(f"{normalised} (what the rules flagged, on their colour)")
    elif any(r["status"] != "PASS" for r in review["rules"]):  # a rule that judges the line as a whole
        st.markdown(f"{normalised} — the rules flagged the line as a whole, not a word of it (see the table)")
    else:  # PASS everywhere, or matches only a passing rule found: nothing is coloured, so none is promised
        st.markdown(f"{normalised} — no rule flagged a word of it")
    st.markdown(marked)
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "rule": r["rule"].replace("_", " "),  # 'topic loop', not the identifier
                    "status": r["status"] + mended_mark(review, r),
                    "detail": tone_words(review["tone"]) if r["rule"] == "tone" else r["detail"],
                    "matches": ", ".join(r["matches"]),
                }
                for r in review["rules"]
            ]
        ),
        hide_index=True,
        width="stretch",
        column_config={
            # 430 px in all: the table fits a 900 px window without a scroll (a long detail shows on hover)
            "rule": st.column_config.TextColumn("Rule", width=122),
            "status": st.column_config.TextColumn("Status", width=70),
            "detail": st.column_config.TextColumn("Detail", width=172),
            "matches": st.column_config.TextColumn("Matches", width=66),
        },
    )
    if review.get("mended") is not None:
        st.caption("✏️ a WARN the director mended itself: the line is shown mended (above), not sent back")
    tone = review["tone"]
    metric_row(
        [
            ("Tone score", tone["score"]),
            ("Ending marker", tone["marker"]),
            ("Vocabulary", tone["vocab"]),
            ("Style", tone["style"]),
        ]
    )
    rubric = review.get("rubric")
    if rubric:
        if rubric.get("failed"):
            st.warning(
                f"Rubric failed: {md(rubric['error'])} — {md(rubric['comment'])}"
                + (f" ⚠ {md(', '.join(rubric['flags']))}" if rubric.get("flags") else "")
            )
        else:
            st.markdown(f"**Rubric** average {rubric['average']:.2f} → {status_badge(rubric['status'])}")
            st.plotly_chart(charts.rubric_radar(rubric["scores"], RUBRIC_LABELS))
            if rubric.get("comment"):
                st.text(rubric["comment"])


def handle_check(profile: Any, model_id: str | None) -> str | None:
    """One line through `director.review_line` (a `director.check` run, rules only or with the rubric),
    started in the registry; the page watches it. Rules only make no model call and end at once: their
    verdict is waited for (at most a second), so it shows with this click."""
    try:
        config = CheckConfig(
            character=profile.id,
            text=st.session_state[KEY + "line"],
            scene=st.session_state[KEY + "scene"],
            model_id=model_id,
            director=DirectorConfig(rubric_judge=st.session_state.get(KEY + "rubric_judge", "generate")),
        )
    except ValidationError as exc:
        st.session_state[CHECK_RUN + ".error"] = f"Nothing checked: {exc.errors()[0]['msg']}"
        return None
    return start_run("director.check", config, review_line, CHECK_PARAM, CHECK_RUN, settle=model_id is None)
