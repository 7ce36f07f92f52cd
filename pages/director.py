"""Director lab: one line through every rule (matches highlighted), a batch you can retune instantly, and a
duo simulator where two characters talk and every line goes through the director."""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from dashboard import charts, state
from dashboard.components import export_buttons, md
from engine.config import ConfigError, get_settings
from engine.director import (
    RUBRIC_LABELS,
    CheckConfig,
    DirectorConfig,
    DuoConfig,
    ScriptConfig,
    ScriptError,
    ScriptLine,
    ScriptVerdict,
    Status,
    hit_rates,
    list_characters,
    load_character,
    parse_script,
    retune_script,
    review_line,
    run_duo,
    run_script,
    script_verdicts,
)
from engine.inputs import InputError, read_upload
from models.errors import ModelError

KEY = "director."
STATUS_COLORS = {"PASS": "green", "WARN": "orange", "MODIFY": "violet", "RETRY": "red"}
STATUS_ICONS = {"PASS": "✅", "WARN": "⚠️", "MODIFY": "✏️", "RETRY": "🔁"}


def _init_state() -> None:
    st.session_state.setdefault(KEY + "batch", None)
    st.session_state.setdefault(KEY + "duo", None)
    st.session_state.setdefault(KEY + "review", None)


def render() -> None:
    _init_state()
    st.title("🎬 Director lab")
    st.caption(
        "Hard rules, then an LLM rubric, decide PASS / WARN / RETRY for a character's line. Rules are code "
        "(instant, no model); the rubric runs only when the rules do not already say RETRY."
    )
    try:
        characters = list_characters()
        profiles = {c: load_character(c) for c in characters}
    except ConfigError as exc:
        st.error(md(exc, inline=False))
        return
    check_tab, batch_tab, duo_tab = st.tabs(["Check a line", "Batch", "Duo simulator"])
    with check_tab:
        _render_check(profiles)
    with batch_tab:
        _render_batch(profiles)
    with duo_tab:
        _render_duo(profiles)
    export_buttons(
        state.get_store(),
        [
            (st.session_state.get(KEY + k) or {}).get("run_id")  # the runs shown above
            for k in ("review", "batch_rubric", "duo")
        ],
        key=KEY + "export",
    )


def _status_badge(status: str) -> str:
    return f":{STATUS_COLORS[status]}-background[**{STATUS_ICONS[status]} {status}**]"


def highlight(text: str, rules: list[dict[str, Any]]) -> str:
    """The line as markdown with each rule's matches on its status colour (worst wins, longest match first).
    The line itself is escaped: only the colour directives around the matches are markdown."""
    statuses: dict[str, str] = {}
    for rule in sorted(rules, key=lambda r: Status[r["status"]]):
        if rule["status"] != "PASS":
            statuses.update({word: rule["status"] for word in rule["matches"] if word})
    marks: list[str | None] = [None] * len(text)
    for word in sorted(statuses, key=len, reverse=True):
        start = text.find(word)
        while start >= 0:
            if not any(marks[start : start + len(word)]):
                marks[start : start + len(word)] = [statuses[word]] * len(word)
            start = text.find(word, start + 1)
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and marks[j] == marks[i]:
            j += 1
        segment, mark = md(text[i:j], inline=False), marks[i]
        out.append(f":{STATUS_COLORS[mark]}-background[{segment}]" if mark else segment)
        i = j
    return "".join(out)


# -- check one line -------------------------------------------------------------------------------
def _render_check(profiles: dict[str, Any]) -> None:
    left, right = st.columns([1, 1], gap="large")
    with left:
        names = list(profiles)
        character = st.selectbox(
            "Character",
            names,
            index=names.index("yana") if "yana" in names else 0,
            key=KEY + "character",
            format_func=lambda c: f"{profiles[c].name} ({c})",
        )
        st.text_area("Line", "えー、ほんと？海って気持ちいいわ！", key=KEY + "line", height=110)
        st.text_input("Scene (for the rubric)", "海辺の散歩", key=KEY + "scene")
        use_model = st.toggle("Also score the LLM rubric", key=KEY + "use_rubric")
        model_id = None
        if use_model:
            model_id = _model_picker(KEY + "rubric_model")
        if st.button("Check", type="primary", key=KEY + "check"):
            handle_check(profiles[character], model_id)
    with right:
        review = st.session_state[KEY + "review"]
        if review is None:
            st.info("Rules update as you press Check; with the rubric on, the model's scores join them.")
            return
        _render_review(review)


def _render_review(review: dict[str, Any]) -> None:
    st.markdown(f"### {_status_badge(review['status'])}")
    if review.get("run_id"):
        st.caption(f"recorded as run {md(review['run_id'])}")
    st.markdown("**Normalised** (matches highlighted)")
    st.markdown(highlight(review["normalized"], review["rules"]))
    st.dataframe(
        pd.DataFrame(
            [
                {"rule": r["rule"], "status": r["status"], "detail": r["detail"], "matches": ", ".join(r["matches"])}
                for r in review["rules"]
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    tone = review["tone"]
    cols = st.columns(4)
    cols[0].metric("Tone score", tone["score"])
    cols[1].metric("Ending marker", tone["marker"])
    cols[2].metric("Vocabulary", tone["vocab"])
    cols[3].metric("Style", tone["style"])
    rubric = review.get("rubric")
    if rubric:
        if rubric.get("failed"):
            st.warning(
                f"Rubric failed: {md(rubric['error'])} — {md(rubric['comment'])}"
                + (f" ⚠ {md(', '.join(rubric['flags']))}" if rubric.get("flags") else "")
            )
        else:
            st.markdown(f"**Rubric** average {rubric['average']:.2f} → {_status_badge(rubric['status'])}")
            st.plotly_chart(charts.rubric_radar(rubric["scores"], RUBRIC_LABELS))
            if rubric.get("comment"):
                st.text(rubric["comment"])


def _model_picker(key: str) -> str | None:
    availability = state.get_availability()
    usable = [m for m, a in availability.items() if a.available]
    if not usable:
        st.warning("No model is available.")
        return None
    catalog = state.get_catalog()
    return st.selectbox(
        "Model", usable, key=key, format_func=lambda m: f"{catalog.get(m).profile.icon} {catalog.get(m).profile.name}"
    )


def handle_check(profile: Any, model_id: str | None) -> None:
    """One line through `director.review_line` (a `director.check` run, rules only or with the rubric)."""
    try:
        config = CheckConfig(
            character=profile.id,
            text=st.session_state[KEY + "line"],
            scene=st.session_state[KEY + "scene"],
            model_id=model_id,
        )
    except ValidationError as exc:
        st.session_state[KEY + "review"] = None
        st.error(f"Nothing checked: {md(exc.errors()[0]['msg'])}")
        return
    with st.spinner("Scoring the rubric…" if model_id else "Checking the rules…"):
        result = state.get_loop().run(review_line(config, state.get_hub().get, state.get_store()), timeout=300)
    st.session_state[KEY + "review"] = result.payload() | {"run_id": result.run_id}
    state.clear_reads()


# -- batch ----------------------------------------------------------------------------------------
def _retune_controls() -> DirectorConfig:
    d = DirectorConfig()
    with st.expander("Retune thresholds (statuses update instantly, no model calls)", expanded=True):
        c1, c2, c3 = st.columns(3)
        warn_lines = c1.number_input("Format: WARN from lines", 1, 50, d.format_warn_lines, key=KEY + "warn_lines")
        retry_lines = c1.number_input("Format: RETRY from lines", 1, 50, d.format_retry_lines, key=KEY + "retry_lines")
        tone_pass = c2.number_input("Tone: PASS from score", 0, 3, d.tone_pass, key=KEY + "tone_pass")
        tone_warn = c2.number_input("Tone: WARN from score", 0, 3, d.tone_warn, key=KEY + "tone_warn")
        rubric_pass = c3.number_input("Rubric: PASS from average", 1.0, 5.0, d.rubric_pass, 0.1, key=KEY + "r_pass")
        rubric_warn = c3.number_input("Rubric: WARN from average", 1.0, 5.0, d.rubric_warn, 0.1, key=KEY + "r_warn")
    try:
        return DirectorConfig(
            format_warn_lines=int(warn_lines),
            format_retry_lines=int(retry_lines),
            tone_pass=int(tone_pass),
            tone_warn=int(tone_warn),
            rubric_pass=float(rubric_pass),
            rubric_warn=float(rubric_warn),
        )
    except ValueError as exc:
        st.error(f"Invalid thresholds, using the defaults: {str(exc).splitlines()[-1]}")
        return d


def _render_batch(profiles: dict[str, Any]) -> None:
    upload = st.file_uploader(
        "Script (CSV with a `text` column, or JSONL of {text, id?, character?})",
        type=["csv", "jsonl"],
        key=KEY + "upload",
    )
    default = st.selectbox(
        "Character for rows that name none",
        list(profiles),
        key=KEY + "batch_character",
        format_func=lambda c: profiles[c].name,
    )
    kind: Literal["csv", "jsonl"]
    if upload is not None:
        try:
            content = read_upload(upload.name, upload.getvalue())
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return
        kind, source = ("csv" if upload.name.lower().endswith(".csv") else "jsonl"), upload.name
    else:
        path = get_settings().data_dir / "scripts" / "beach.jsonl"
        content, kind, source = path.read_text(encoding="utf-8"), "jsonl", path.name
    try:
        lines = parse_script(content, kind, source)
    except ScriptError as exc:
        st.error("Nothing imported — fix these rows:\n\n" + "\n".join(f"- {md(p)}" for p in exc.problems))
        return
    unknown = sorted({ln.character for ln in lines if ln.character and ln.character not in profiles})
    if unknown:
        st.error(f"Unknown characters: {md(', '.join(unknown))} — add data/characters/<id>.yaml. Nothing imported.")
        return
    verdicts = _batch_verdicts(tuple(lines), default)
    cfg = _retune_controls()
    averages = _render_batch_rubric(lines, default, source)
    frame = pd.DataFrame(retune_script(verdicts, averages, cfg))
    counts = frame["status"].value_counts()
    cols = st.columns(5)
    cols[0].metric("Lines", len(frame))
    for col, status in zip(cols[1:], ("PASS", "WARN", "RETRY"), strict=False):
        col.metric(status, int(counts.get(status, 0)))
    cols[4].metric("Changed by retuning", int((frame["status"] != frame["default status"]).sum()))
    st.dataframe(frame, hide_index=True, width="stretch", key=KEY + "batch_table")
    st.plotly_chart(charts.rule_hit_rates(hit_rates([v.verdict for v in verdicts])))


def _render_batch_rubric(lines: list[ScriptLine], default: str, source: str) -> dict[str, float | None]:
    """Record the batch as a `director.batch` run — rules only, or with the rubric scored once by a model —
    whose averages the cut-offs above then re-decide without new calls."""
    stored = st.session_state.get(KEY + "batch_rubric") or {}
    if stored.get("source") != source:
        stored = {}
    with st.expander("LLM rubric for every line (optional)"):
        model_id = _model_picker(KEY + "batch_model")
        st.caption("Lines the rules already mark RETRY are not scored, as in a live review.")
        score, record = st.columns(2)
        if score.button("Score the rubric", key=KEY + "batch_score", disabled=model_id is None):
            stored = handle_batch(lines, default, source, model_id)
        if record.button("Record the rules only", key=KEY + "batch_record"):
            stored = handle_batch(lines, default, source, None)
        if stored:
            if stored["model_id"] is None:
                st.caption(f"rules recorded in run {md(stored['run_id'])}")
            else:
                st.caption(
                    f"rubric scored in run {md(stored['run_id'])} with {md(stored['model_id'])}; "
                    f"{sum(v is None for v in stored['averages'].values())} failed (left to the rules)"
                )
    return dict(stored.get("averages", {}))


def handle_batch(lines: list[ScriptLine], default: str, source: str, model_id: str | None) -> dict[str, Any]:
    config = ScriptConfig(lines=lines, character=default, source=source, model_id=model_id)
    with st.spinner("Scoring the rubric for every line…" if model_id else "Recording the batch…"):
        result = state.get_loop().run(run_script(config, state.get_hub().get, state.get_store()), timeout=1800)
    stored = {"source": source, "model_id": model_id, "run_id": result.run_id, "averages": result.averages}
    st.session_state[KEY + "batch_rubric"] = stored
    state.clear_reads()
    return stored


@st.cache_data(show_spinner=False, max_entries=16)
def _batch_verdicts(lines: tuple[ScriptLine, ...], default: str) -> list[ScriptVerdict]:
    """The rules for every line, each character keeping its conversation state (`script_verdicts`)."""
    return script_verdicts(lines, default)


# -- duo ------------------------------------------------------------------------------------------
def _render_duo(profiles: dict[str, Any]) -> None:
    names = list(profiles)
    c1, c2 = st.columns(2)
    first = c1.selectbox(
        "First speaker",
        names,
        index=names.index("yana") if "yana" in names else 0,
        key=KEY + "duo_first",
        format_func=lambda c: profiles[c].name,
    )
    second = c2.selectbox(
        "Second speaker",
        names,
        index=names.index("ayu") if "ayu" in names else 0,
        key=KEY + "duo_second",
        format_func=lambda c: profiles[c].name,
    )
    topic = c1.text_input("Topic", "夏の思い出", key=KEY + "duo_topic")
    scene = c2.text_input("Scene", "海辺の散歩", key=KEY + "duo_scene")
    model_id = _model_picker(KEY + "duo_model")
    c3, c4, c5 = st.columns(3)
    turns = c3.number_input("Turns", 1, 20, 4, key=KEY + "duo_turns")
    retries = c4.number_input("Max retries", 0, 5, 2, key=KEY + "duo_retries")
    policy = c5.selectbox("When retries run out", ["mark", "accept_last", "drop"], key=KEY + "duo_policy")
    use_rubric = st.toggle("LLM rubric on every line", value=False, key=KEY + "duo_rubric")
    if st.button("Run dialogue", type="primary", key=KEY + "duo_run", disabled=model_id is None or first == second):
        handle_duo(
            profiles[first], profiles[second], model_id, topic, scene, int(turns), int(retries), policy, use_rubric
        )
    result = st.session_state[KEY + "duo"]
    if result is None:
        return
    if "error" in result:
        st.error(md(result["error"], inline=False))
        return
    st.caption(f"recorded as run {md(result['run_id'])}")
    for turn in result["turns"]:
        profile = profiles[turn["speaker"]]
        with st.chat_message(profile.name, avatar="🧡" if turn["speaker"] == first else "💙"):
            label = {
                "accepted": "",
                "accepted_after_retries": f" after {len(turn['attempts']) - 1} retr"
                f"{'y' if len(turn['attempts']) == 2 else 'ies'}",
                "accepted_last": " (accepted last draft)",
                "dropped": " (dropped)",
                "marked": " (shown, marked RETRY)",
            }[turn["outcome"]]
            st.markdown(f"**{md(profile.name)}** {_status_badge(turn['status'])}{label}")
            if turn["text"] is None:
                st.markdown("_— line dropped —_")
            else:
                st.text(turn["text"])
            if turn.get("instruction"):
                with st.expander("Instruction carried from the previous WARN line (§1)"):
                    st.text(turn["instruction"])
            rejected = [a for a in turn["attempts"] if a["review"]["status"] == "RETRY"]
            if turn["outcome"] in ("accepted", "accepted_after_retries"):
                rejected = turn["attempts"][:-1]
            if rejected:
                with st.expander(f"{len(rejected)} rejected draft(s)"):
                    for attempt in rejected:
                        st.markdown(f"~~{md(attempt['text'])}~~")
                        st.caption(md(" · ".join(attempt["review"]["reasons"]) or "—"))


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
) -> None:
    if model_id is None:
        return
    config = DuoConfig(
        first=first.id,
        second=second.id,
        model_id=model_id,
        topic=topic,
        scene=scene,
        turns=turns,
        rubric=use_rubric,
        director=DirectorConfig(max_retries=retries, on_retries_exhausted=policy),
    )
    with st.spinner("The sisters are talking…"):
        try:
            result = state.get_loop().run(run_duo(config, state.get_hub().get, state.get_store()), timeout=900)
        except (ModelError, ConfigError) as exc:
            st.session_state[KEY + "duo"] = {"error": str(exc)}
            return
    st.session_state[KEY + "duo"] = {"run_id": result.run_id, "turns": result.transcript()}
    state.clear_reads()
