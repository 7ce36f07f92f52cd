"""Director lab: one line through every rule (matches highlighted), a batch you can retune instantly, and a
duo simulator where two characters talk and every line goes through the director."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Literal

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from dashboard import charts, demo, state
from dashboard import formstate as form
from dashboard.components import export_buttons, flow_columns, md, metric_row
from dashboard.labelling import label_buttons, run_item
from dashboard.watch import Collected, is_live, start_error, start_watched, watch_run, watched_run
from engine.config import ConfigError, get_settings
from engine.director.batch import (
    ScriptConfig,
    ScriptVerdict,
    hit_rates,
    retune_script,
    run_script,
    script_verdicts,
    share_text,
)
from engine.director.config import DirectorConfig, list_characters, load_character
from engine.director.dialogue import DuoConfig, run_duo
from engine.director.review import CheckConfig, review_line
from engine.director.rubric import RUBRIC_LABELS
from engine.director.scorecard import rubric_diagnoses
from engine.director.scripts import ScriptError, ScriptLine, parse_script
from engine.director.signals import default_rubric_judge
from engine.director.status import Status
from engine.inputs import InputError, read_text, read_upload, shown_problems
from engine.labels import item_key
from engine.store import FINISHED
from models.errors import ModelError

KEY = "director."
# The runs this page shows live in the URL under these names, so a reload or a second tab re-attaches.
CHECK_PARAM, BATCH_PARAM, DUO_PARAM = "check", "batch", "duo"
CHECK_RUN, BATCH_RUN, DUO_RUN = KEY + "check_run", KEY + "batch_run", KEY + "duo_run_id"
RULES_ONLY = KEY + "rules_only"  # the rules-only check run that stands in for a demo-missed rubric check
RULES_ONLY_NOTE = "The rubric score of this line is not in the demo recording — rules only."
STATUS_COLORS = {"PASS": "green", "WARN": "orange", "MODIFY": "violet", "RETRY": "red"}
DIRECTOR_LABEL = {"PASS": "ok", "WARN": "ok", "RETRY": "retry"}  # what a status predicts, as a label value
STATUS_ICONS = {"PASS": "✅", "WARN": "⚠️", "MODIFY": "✏️", "RETRY": "🔁"}


def render() -> None:
    st.title("🎬 Director lab")
    st.caption(
        "Hard rules, then an LLM rubric, decide PASS / WARN / RETRY for a character's line — or MODIFY, when the "
        "director can mend it itself (too long, a praise word said alone, a doubled ！). Rules are code (instant, no "
        "model); the rubric runs only when the rules do not already say RETRY."
    )
    try:
        characters = list_characters()
        profiles = {c: load_character(c) for c in characters}
    except ConfigError as exc:
        st.error(md(exc, inline=False))
        return
    _init_state(profiles)
    _restore_forms(profiles)
    check_tab, batch_tab, duo_tab = st.tabs(["Check a line", "Batch", "Duo simulator"])
    with check_tab:
        _render_check(profiles)
        _export_tab(CHECK_RUN, "check")
    with batch_tab:
        _render_batch(profiles)
        _export_tab(BATCH_RUN, "batch")
    with duo_tab:
        _render_duo(profiles)
        _export_tab(DUO_RUN, "duo")


def _export_tab(run_key: str, name: str) -> None:
    """A tab's export box names that tab's own run (once ended): the Check tab exports its check, never the
    batch another tab recorded."""
    run_id = st.session_state.get(run_key)
    if run_id and not is_live(run_id):
        export_buttons(state.get_store(), run_id, key=f"{KEY}export.{name}")


def _status_badge(status: str) -> str:
    return f":{STATUS_COLORS[status]}-background[**{STATUS_ICONS[status]} {status}**]"


# -- the form: its defaults, and the settings of the run a reload re-attaches to ----------------------------------
DUO_DEFAULTS: dict[str, Any] = {
    "duo_topic": "夏の思い出",
    "duo_scene": "海辺の散歩",
    "duo_turns": 4,
    "duo_retries": 2,
    "duo_policy": "mark",
    "duo_rubric": False,
}


def _init_state(profiles: dict[str, Any]) -> None:
    """The widgets' first values, here rather than in the widgets, so a reload can put a run's settings in."""
    names = list(profiles)
    form.default(KEY + "character", "yana" if "yana" in names else names[0] if names else None)
    form.default(KEY + "line", "えー、ほんと？海って気持ちいいわ！")
    form.default(KEY + "scene", "海辺の散歩")
    form.default(KEY + "use_rubric", False)
    form.default(KEY + "duo_first", "yana" if "yana" in names else names[0] if names else None)
    form.default(KEY + "duo_second", "ayu" if "ayu" in names else names[0] if names else None)
    for name, value in DUO_DEFAULTS.items():
        form.default(KEY + name, value)


def _restore_forms(profiles: dict[str, Any]) -> None:
    """On first sight of each run in the URL (a reload, a shared link), its tab's form takes its settings
    before a widget is drawn, so the next click runs the same check, batch or dialogue, not the defaults."""
    for param, key in ((CHECK_PARAM, CHECK_RUN), (BATCH_PARAM, BATCH_RUN), (DUO_PARAM, DUO_RUN)):
        form.restore_from(key, watched_run(param, key), lambda run_id: restore_form(run_id, profiles))


def _usable(model_id: Any) -> bool:
    availability = state.get_availability().get(str(model_id))
    return availability is not None and availability.available


def restore_form(run_id: str, profiles: dict[str, Any]) -> None:
    """Put a stored director run's settings into its tab's form. A character or model this page cannot offer
    leaves that widget as it is; a batch's uploaded script is not kept (the page shows the shipped one)."""
    run = state.get_store().get_run(run_id)
    if run is None or not run.kind.startswith("director."):
        return
    config, values = run.config, {}
    judge = (config.get("director") or {}).get("rubric_judge")
    judge = judge if judge in RUBRIC_JUDGES else None
    model = config.get("model_id")
    if run.kind == "director.check":
        if config.get("character") in profiles:
            values["character"] = config["character"]
        values |= {"line": str(config.get("text") or ""), "scene": str(config.get("scene") or "")}
        values["use_rubric"] = model is not None
        if _usable(model):
            values["rubric_model"] = model
        if judge:
            values["rubric_judge"] = judge
    elif run.kind == "director.batch":
        if config.get("character") in profiles:
            values["batch_character"] = config["character"]
        if _usable(model):
            values["batch_model"] = model
        if judge:
            values["batch_rubric_judge"] = judge
    elif run.kind == "director.duo":
        try:
            duo = DuoConfig(**config)
        except (TypeError, ValueError):  # stored by an older version: the form keeps its own settings
            return
        if duo.first in profiles and duo.second in profiles:
            values |= {"duo_first": duo.first, "duo_second": duo.second}
        values |= {"duo_topic": duo.topic, "duo_scene": duo.scene, "duo_turns": duo.turns}
        if duo.director.max_retries <= 5:  # the widget's range
            values["duo_retries"] = duo.director.max_retries
        values |= {"duo_policy": duo.director.on_retries_exhausted, "duo_rubric": duo.rubric}
        if _usable(duo.model_id):
            values["duo_model"] = duo.model_id
        if duo.rubric and judge:
            values["duo_rubric_judge"] = judge
    form.restore({KEY + name: value for name, value in values.items()})


# -- why a line is not a plain PASS, in words ---------------------------------------------------------------------
TONE_PARTS = {"marker": "sentence endings", "vocab": "typical words", "style": "speaking style"}


def rule_words(rule: dict[str, Any], tone: dict[str, Any] | None = None) -> str:
    """One rule at WARN or RETRY as a stakeholder reads it, from its name, detail and matches (the engine's
    reasons read 'tone: tone 1 = marker 0 + vocab 1 + style 0')."""
    name, detail, matches = str(rule.get("rule")), str(rule.get("detail") or ""), list(rule.get("matches") or [])
    quoted = "、".join(str(m) for m in matches[:3])
    if name == "tone":
        missing = [words for part, words in TONE_PARTS.items() if tone is not None and not tone.get(part)]
        said = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else "".join(missing)
        return "does not quite sound like the character" + (f": missing its {said}" if said else "")
    if name == "format":
        return f"too long ({detail})"
    if name == "setting":
        return "breaks the characters' setting" + (f" ({quoted})" if quoted else "")
    if name == "praise":
        if rule.get("status") == "RETRY":
            return "praises the other speaker"
        return "uses a praise word on its own" + (f" ({quoted})" if quoted else "")
    if name == "scatter":
        return f"scattered: {detail.split(' (')[0]}"
    if name == "line_length":
        return f"longer than advised ({detail.split(',')[0]})"
    if name == "logic":
        return "a double negative turns the meaning around" + (f" ({quoted})" if quoted else "")
    if name == "script_form":
        return "written as a script line in 「」 quotes"
    if name == "topic_loop":
        return "keeps coming back to the same words" + (f" ({quoted})" if quoted else "")
    if name == "early_topic_change":
        return "changes the topic before the current one was explored"
    return f"{name.replace('_', ' ')}: {detail}"


def tone_words(tone: dict[str, Any]) -> str:
    """The tone rule's detail in words: '2/3: ✓ endings ✗ words ✓ style' (not 'tone 2 = marker 1 + …')."""
    parts = (("marker", "endings"), ("vocab", "words"), ("style", "style"))
    return f"{tone.get('score', 0)}/3: " + " ".join(f"{'✓' if tone.get(p) else '✗'} {w}" for p, w in parts)


def status_why(review: dict[str, Any]) -> str:
    """Why a line is WARN, MODIFY or RETRY, in one line of words: each rule that flagged it (and, for MODIFY, what
    the director changed), and the rubric's average when it decided. Empty for a PASS."""
    if review.get("status") == "PASS":
        return ""
    tone = review.get("tone")
    parts = [rule_words(r, tone) for r in review.get("rules") or [] if r.get("status") in ("WARN", "RETRY")]
    if review.get("status") == "MODIFY":  # what was flagged, then what the director did about it
        changes = "; ".join(str(c) for c in review.get("changes") or [])
        return "; ".join(dict.fromkeys(parts)) + (f" — the director mended it: {changes}" if changes else "")
    rubric = review.get("rubric") or {}
    if rubric.get("failed"):
        parts.append("the rubric could not be scored")
    elif rubric.get("status") in ("WARN", "RETRY") and rubric.get("average") is not None:
        parts.append(f"the rubric scored it {float(rubric['average']):.1f} of 5")
    return "; ".join(dict.fromkeys(parts))


def mended_mark(review: dict[str, Any], rule: dict[str, Any]) -> str:
    """' ✏️' beside a rule's WARN that the director mended (a MODIFY line's WARNs are all such rules)."""
    return " ✏️" if review.get("status") == "MODIFY" and rule.get("status") == "WARN" else ""


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
            model_id = _model_picker(KEY + "rubric_model")
            _rubric_judge_picker(KEY + "rubric_judge", model_id)
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
    rules_id = _start("director.check", config, review_line, CHECK_PARAM, CHECK_RUN, settle=True)
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
    st.markdown(f"### {_status_badge(review['status'])}")
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
    return form.choice(
        st.selectbox,
        "Model",
        usable,
        key,
        format_func=lambda m: f"{catalog.get(m).profile.icon} {catalog.get(m).profile.name}",
    )


RUBRIC_JUDGES = ["signals", "generate", "likelihood"]
POLICY_WORDS = {  # DirectorConfig.on_retries_exhausted, in words
    "mark": "show it, marked RETRY",
    "accept_last": "accept the last draft",
    "drop": "drop the line",
}


def _rubric_judge_picker(key: str, model_id: str | None) -> str:
    """How the LLM rubric is judged (`DirectorConfig.rubric_judge`), wherever a rubric model is picked; under
    it, what the scorecard measured of that model and method (no measurable signal, flat scale), so nobody
    picks a rubric that cannot tell lines apart without being told."""
    default = _default_judge(model_id)
    if st.session_state.get(key + ".default_for") != model_id:  # a new model: its default, unless the user chose
        if key not in st.session_state or st.session_state[key] == st.session_state.get(key + ".default"):
            form.put(key, default)
        st.session_state[key + ".default_for"], st.session_state[key + ".default"] = model_id, default
    method = str(
        form.choice(
            st.selectbox,
            "Rubric judged by",
            RUBRIC_JUDGES,
            key,
            help="signals (the default for the bundled Gemma): each criterion from a signal the model and the "
            "multilingual embedder carry — her voice against her sister's, the partner's line, the topic, length — "
            "through maps fitted on labelled lines; generate: the model writes the five criteria's scores as "
            "JSON; likelihood: each criterion is the expected value over 1-5 of the calibrated likelihood of the "
            "digits (models that can score)",
        )
    )
    if model_id is not None:
        for diagnosis in rubric_diagnoses(state.get_store(), model_id, method):
            if diagnosis.mark in ("no_signal", "flat_scale", "signal"):
                st.caption(md(f"Rubric on {model_id} by {method}: {diagnosis.label} — {diagnosis.text}"))
    return method


def _default_judge(model_id: str | None) -> str:
    """The rubric judge with measured signal on this model (`engine.director.signals.default_rubric_judge`)."""
    try:  # the model that will run (a page under test runs a stand-in under the catalog's id)
        backend = state.get_hub().get(model_id).spec.backend if model_id else None
    except (KeyError, ModelError):
        backend = None
    return default_rubric_judge(model_id, backend)


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
    return _start("director.check", config, review_line, CHECK_PARAM, CHECK_RUN, settle=model_id is None)


def _start(
    kind: str, config: Any, entry: Callable[[Any, Any, Any], Any], param: str, key: str, *, settle: bool = False
) -> str | None:
    """`entry(config, models, store)` started in the registry as a `kind` run that the page watches (its id in
    the URL at `param`). With `settle`, a run that makes no model call is given the moment it needs (at most a
    second), so its result shows with this click."""
    hub, store = state.get_hub(), state.get_store()
    run_id = start_watched(
        kind, config.model_dump(mode="json"), lambda: entry(config, hub.get, store), param=param, key=key
    )
    if run_id and settle:
        _settle(run_id, 1.0)
    return run_id


def _settle(run_id: str, timeout_s: float) -> None:
    """Give a run that makes no model call the moment it needs (bounded), so its result shows at once."""
    live = state.get_registry().get(run_id)
    if live is not None:
        concurrent.futures.wait([live.future], timeout=timeout_s)


# -- batch ----------------------------------------------------------------------------------------
def _retune_controls() -> DirectorConfig:
    d = DirectorConfig()
    with st.expander("Retune thresholds (statuses update instantly, no model calls)", expanded=True):
        c1, c2, c3 = st.columns(3)
        number = c1.number_input
        warn_lines = form.field(
            number, "Format: WARN from lines", KEY + "warn_lines", 1, 50, initial=d.format_warn_lines
        )
        retry_lines = form.field(
            number, "Format: RETRY from lines", KEY + "retry_lines", 1, 50, initial=d.format_retry_lines
        )
        number = c2.number_input
        tone_pass = form.field(number, "Tone: PASS from score", KEY + "tone_pass", 0, 3, initial=d.tone_pass)
        tone_warn = form.field(number, "Tone: WARN from score", KEY + "tone_warn", 0, 3, initial=d.tone_warn)
        number = c3.number_input
        rubric_pass = form.field(
            number, "Rubric: PASS from average", KEY + "r_pass", 1.0, 5.0, initial=d.rubric_pass, step=0.1
        )
        rubric_warn = form.field(
            number, "Rubric: WARN from average", KEY + "r_warn", 1.0, 5.0, initial=d.rubric_warn, step=0.1
        )
        mend = form.field(
            st.toggle,
            "Mend what the director can (MODIFY)",
            KEY + "mend",
            initial=d.mend,
            help="On: a line that passes but for being too long, a praise word said alone or a doubled ！ is shown "
            "mended (MODIFY, the mended line in its own column). Off: shown as written, PASS or WARN.",
        )
    try:
        return DirectorConfig(
            format_warn_lines=int(warn_lines),
            format_retry_lines=int(retry_lines),
            tone_pass=int(tone_pass),
            tone_warn=int(tone_warn),
            rubric_pass=float(rubric_pass),
            rubric_warn=float(rubric_warn),
            mend=bool(mend),
        )
    except ValueError as exc:
        st.error(f"Invalid thresholds, using the defaults: {str(exc).splitlines()[-1]}")
        return d


# The lines a page judges and tables at once: a 10 MB script of short lines (655 360) took 5.7 GB in the page's
# cached verdicts and table; the whole script is judged by the batch run (`run_script`), which stays under 1 GB.
PAGE_LINES = 20_000


def _render_batch(profiles: dict[str, Any]) -> None:
    upload = st.file_uploader(
        "Script (CSV with a `text` column, or JSONL of {text, id?, character?})",
        type=["csv", "jsonl"],
        key=KEY + "upload",
    )
    default = form.choice(
        st.selectbox,
        "Character for rows that name none",
        list(profiles),
        KEY + "batch_character",
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
        try:
            content, kind, source = read_text(path), "jsonl", path.name
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return
    try:
        lines = parse_script(content, kind, source)
    except ScriptError as exc:
        st.error(
            "Nothing imported — fix these rows:\n\n" + "\n".join(f"- {md(p)}" for p in shown_problems(exc.problems))
        )
        return
    unknown = sorted({ln.character for ln in lines if ln.character and ln.character not in profiles})
    if unknown:
        st.error(f"Unknown characters: {md(', '.join(unknown))} — add data/characters/<id>.yaml. Nothing imported.")
        return
    shown = lines[:PAGE_LINES]
    if len(lines) > PAGE_LINES:
        st.info(
            f"This script has {len(lines):,} lines: the table, the counts and the retuning below cover its first "
            f"{PAGE_LINES:,} (a browser table of every line would take gigabytes). Record the whole script with "
            "**Record the rules only** below — a stored run with every line's verdict, its counts and hit rates, "
            "exportable — or `judgelab director batch --file …`."
        )
    verdicts = _batch_verdicts(tuple(shown), default)
    cfg = _retune_controls()
    averages = _render_batch_rubric(lines, default, source)
    frame = pd.DataFrame(retune_script(verdicts, averages, cfg))
    if "mended" in frame and frame["mended"].isna().all():
        frame = frame.drop(columns="mended")  # a column only when a line is shown mended (MODIFY)
        if cfg.mend:
            st.caption(
                "No line of this script can be mended by the director (MODIFY): each flagged line also has a WARN "
                "it does not mend, such as the tone. Upload a script to see the switch at work."
            )
    elif "mended" in frame:
        frame["mended"] = frame["mended"].fillna("")  # blank, not "None", for the lines shown as written
    frame.columns = [str(c).replace("_", " ") for c in frame.columns]  # the rules' names in words
    frame.insert(int(frame.columns.get_loc("status")) + 1, "why", flagged_rules(frame))
    counts = frame["status"].value_counts()
    metric_row(
        [
            ("Lines", len(frame)),
            *((status, int(counts.get(status, 0))) for status in ("PASS", "WARN", "MODIFY", "RETRY")),
            ("Changed by retuning", int((frame["status"] != frame["default status"]).sum())),
        ]
    )
    # Many columns (a line's every rule): wider than a 900 px window. The line's id, its status and why stay
    # pinned at the left while the rules scroll past; the text is cut to its column (the whole line on hover).
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key=KEY + "batch_table",
        column_config={
            "id": st.column_config.TextColumn("id", pinned=True, width=70),
            "status": st.column_config.TextColumn("status", pinned=True, width=70),
            "text": st.column_config.TextColumn("text", width=260),
            "why": st.column_config.TextColumn("why", pinned=True, width=120, help="the rules at WARN or RETRY"),
        },
    )
    rates = hit_rates([v.verdict for v in verdicts])
    st.plotly_chart(charts.rule_hit_rates(rates))
    fired = [
        f"{rule.replace('_', ' ')}: warn {share_text(rate, 'warn')}, retry {share_text(rate, 'retry')}"
        for rule, rate in rates.items()
        if rate["warn"] or rate["retry"]
    ]
    if fired:  # the figures the bars show, with their 95 % Wilson intervals over this script's lines
        st.caption("Hit rates (95 % interval over these lines) — " + " · ".join(md(f) for f in fired))
    _render_row_marks(frame)


def _render_row_marks(frame: pd.DataFrame) -> None:
    """OK / RETRY marks on the batch's rows: pick a row, mark it. Kept with the recorded batch run when there is
    one (so the Labels page links it), else as labels of this script's rows."""
    run_id = watched_run(BATCH_PARAM, BATCH_RUN)
    if frame.empty:
        return
    with st.expander("Mark rows OK or RETRY (your labels)", expanded=False):
        if not run_id:
            st.caption(
                "Record the batch (“Record the rules only” under “LLM rubric for every line”, above) to keep your "
                "marks with its run; until then they are kept with no run."
            )
        index = st.selectbox(
            "Row",
            range(len(frame)),
            key=KEY + "mark_row",
            format_func=lambda i: (
                f"{frame.iloc[i]['id']} · {frame.iloc[i]['status']} · {str(frame.iloc[i]['text'])[:70]}"
            ),
        )
        row = frame.iloc[index]
        st.text(str(row["text"]))
        key = item_key("director", row=row["id"])
        recorded = run_id if run_id and not is_live(run_id) else None
        item = run_item(recorded, key) if recorded else None
        status = str(row["status"])
        label_buttons(
            "director",
            key,
            run_id=item.run_id if item is not None else None,
            key=KEY + "row_label",
            context=item.context
            if item is not None
            else {"predicted": DIRECTOR_LABEL.get(status), "status": status, "judge": "director.rules"},
            prompt=f"Your mark of line {row['id']}",
        )


def flagged_rules(frame: pd.DataFrame) -> pd.Series:
    """Per line, the rules at WARN or RETRY, named ('tone, praise'): a status in the table says why at once,
    without reading across a dozen rule columns. Vectorised: a script has up to `PAGE_LINES` lines."""
    rules = [
        c
        for c in frame.columns
        if c not in ("status", "default status") and len(frame) and frame[c].isin(list(STATUS_COLORS)).all()
    ]
    if not rules or frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    hits = frame[rules].isin(["WARN", "RETRY"])
    return hits.dot(pd.Index(rules) + ", ").str.rstrip(", ")


def _render_batch_rubric(lines: list[ScriptLine], default: str, source: str) -> dict[str, float | None]:
    """Record the batch as a `director.batch` run — rules only, or with the rubric scored once by a model —
    whose averages the cut-offs above then re-decide without new calls. The run goes in the registry; the
    page watches it (progress, Cancel) and takes its averages from the stored result once it has finished."""
    run_id = watched_run(BATCH_PARAM, BATCH_RUN)
    live = is_live(run_id)
    averages: dict[str, float | None] = {}
    with st.expander("LLM rubric for every line (optional)", expanded=bool(run_id)):
        model_id = _model_picker(KEY + "batch_model")
        _rubric_judge_picker(KEY + "batch_rubric_judge", model_id)
        st.caption("Lines the rules already mark RETRY are not scored, as in a live review.")
        score, record = st.columns(2)
        busy = "A batch is going: watch it below, or cancel it" if live else None
        if score.button("Score the rubric", key=KEY + "batch_score", disabled=model_id is None or live, help=busy):
            if handle_batch(lines, default, source, model_id):
                st.rerun()  # drawn again with the buttons off while the run goes
        if record.button("Record the rules only", key=KEY + "batch_record", disabled=live, help=busy):
            if handle_batch(lines, default, source, None):
                st.rerun()
        start_error(BATCH_RUN)
        if run_id:
            view = watch_run(run_id, Collected, _render_batch_view, key=KEY + "batch_watch")
            run = state.get_store().get_run(run_id)
            result = view.result if view is not None else None
            if run is not None and result is not None:
                if run.config.get("source") != source or _stored_lines(run.config) != len(lines):
                    st.caption(f"run {md(run_id)} scored another script: its averages are not applied here")
                else:
                    averages = {str(k): v for k, v in (result.get("averages") or {}).items()}
                    model = run.config.get("model_id")
                    if model is None:
                        st.caption(f"rules recorded in run {md(run_id)}")
                    else:
                        st.caption(
                            f"rubric scored in run {md(run_id)} with {md(model)}; "
                            f"{sum(v is None for v in averages.values())} failed (left to the rules)"
                        )
    return averages


def _render_batch_view(view: Collected, live: bool) -> None:
    if live:
        judged = view.of("director_line")
        st.caption(f"{len(judged)} line(s) judged so far" + (f"; last: {md(judged[-1]['id'])}" if judged else ""))


def handle_batch(lines: list[ScriptLine], default: str, source: str, model_id: str | None) -> str | None:
    """`director.run_script` (the entry point `judgelab director batch` calls too) started in the registry."""
    config = ScriptConfig(
        lines=lines,
        character=default,
        source=source,
        model_id=model_id,
        director=DirectorConfig(rubric_judge=st.session_state.get(KEY + "batch_rubric_judge", "generate")),
    )
    return _start("director.batch", config, run_script, BATCH_PARAM, BATCH_RUN, settle=model_id is None)


@st.cache_data(show_spinner=False, max_entries=16)
def _batch_verdicts(lines: tuple[ScriptLine, ...], default: str) -> list[ScriptVerdict]:
    """The rules for every line, each character keeping its conversation state (`script_verdicts`)."""
    return script_verdicts(lines, default)


def _stored_lines(config: dict[str, Any]) -> int:
    """How many lines a stored batch judged: a count (`lines`), or the list itself in runs stored before."""
    lines = config.get("lines")
    return lines if isinstance(lines, int) else len(lines or [])


# -- duo ------------------------------------------------------------------------------------------
def _is_base_model(model_id: str) -> bool:
    try:
        return state.get_catalog().get(model_id).tuning == "base"
    except KeyError:
        return False


def _render_duo(profiles: dict[str, Any]) -> None:
    names = list(profiles)
    c1, c2 = st.columns(2)

    def name_of(c: str) -> str:
        return str(profiles[c].name)

    first = form.choice(c1.selectbox, "First speaker", names, KEY + "duo_first", format_func=name_of)
    second = form.choice(c2.selectbox, "Second speaker", names, KEY + "duo_second", format_func=name_of)
    topic = form.field(c1.text_input, "Topic", KEY + "duo_topic")
    scene = form.field(c2.text_input, "Scene", KEY + "duo_scene")
    model_id = _model_picker(KEY + "duo_model")
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
        _rubric_judge_picker(KEY + "duo_rubric_judge", model_id)
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

    def render_duo(view: Collected, live: bool) -> None:
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

    watch_run(run_id, Collected, render_duo, key=KEY + "duo_watch")


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
        st.markdown(f"**{md(name)}** {_status_badge(turn['status'])}{label}" + (f" — {md(why)}" if why else ""))
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
    return _start("director.duo", config, run_duo, DUO_PARAM, DUO_RUN)


if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
