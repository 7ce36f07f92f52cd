"""Conversation: a multi-party chat where every participant's will to speak is judged before anyone
answers. Hands at or above the threshold appear as cards (icon, name, will, one-line reason) to approve
or skip, one by one or in batches, with a countdown when a timeout is set; approved participants answer
in parallel, streamed; skips show as a compact line. Charts, a what-if that re-decides the whole
conversation from the recorded components without calling a model, and tokens against the
"everyone answers" baseline."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from dashboard import charts, demo, state
from dashboard.components import (
    GLOSSARY,
    breakable,
    details_on,
    export_buttons,
    flow_columns,
    md,
    metric_row,
    safe_avatar,
)
from dashboard.labelling import answer_words, current_user, refit_candidate, render_candidate
from engine.config import get_settings
from engine.diagnostics import Diagnosis
from engine.embeddings import EMBEDDERS
from engine.handraise.answers import DEFAULT_ANSWER_MODEL, cuts_note, plain_text
from engine.handraise.cast import Participant, default_cast
from engine.handraise.conversation import (
    Conversation,
    ConversationConfig,
    ConversationSession,
    TurnState,
    close_conversation,
    conversation_turn,
    open_conversation,
    restore_conversation,
    token_figures,
)
from engine.handraise.decisions import (
    DEFAULT_EMBEDDER,
    EMBEDDER_ENV,
    Action,
    Hand,
    HandRaiseConfig,
    HandStatus,
    Mode,
    Resolution,
    Weights,
    changed_hands,
    default_ensemble,
    failure_flags,
    redecide,
    skip_line,
)
from engine.handraise.judge import map_choice
from engine.handraise.label_refit import whatif_map
from engine.handraise.reasons import reason_sentence
from engine.labels import count_labels, list_labels, map_in_use
from engine.labels.refit import created_at
from engine.runctx import RunControl, controlled
from models.recording import call_context
from pages import conversation_benchmark

KEY = "conv."
DETAILS = "conversation"  # the page's Details toggle (dashboard.components.details_on)
# The likelihood judge first: on the bundled model it scores best on the shipped benchmark (README).
METHODS = ["likelihood", "judge", "self", "hybrid", "embedding"]


def _init_state() -> None:
    st.session_state.setdefault(KEY + "session", None)  # the open conversation run (ConversationSession)
    st.session_state.setdefault(KEY + "conv", None)
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "log", [])  # what the chat shows: user lines, answers, skip lines
    st.session_state.setdefault(KEY + "deadline", None)
    st.session_state.setdefault(KEY + "error", None)
    st.session_state.setdefault(KEY + "reopened", False)
    st.session_state.setdefault(KEY + "miss", False)  # demo mode: a message outside the recording
    wanted = st.query_params.get("run")
    if wanted and wanted != st.session_state[KEY + "run_id"]:
        _reopen(wanted)


def _reopen(run_id: str) -> None:
    """A stored conversation (`?run=ID`, linked from the Runs page), rebuilt from its events: its chat, charts,
    telemetry and What-if, read only — a new message starts a new conversation."""
    store = state.get_store()
    run = store.get_run(run_id)
    st.session_state[KEY + "run_id"] = run_id  # tried once per id, whatever the outcome
    try:
        if run is None or run.kind != "handraise.conversation":
            raise ValueError(f"no stored conversation {run_id}")
        conv = restore_conversation(
            run.config, [(e.type, e.payload) for e in store.events(run_id)], state.get_hub().get
        )
    except ValueError as exc:
        st.session_state.update(
            {
                KEY + "conv": None,
                KEY + "run_id": None,
                KEY + "log": [],
                KEY + "reopened": False,
                KEY + "error": f"Cannot reopen run {run_id}: {exc}",
            }
        )
        return
    log: list[dict[str, Any]] = []
    for turn in conv.states:
        log.append({"kind": "user", "text": turn.text})
        if turn.answered:
            log.extend(_turn_lines(turn))
    st.session_state.update(
        {KEY + "conv": conv, KEY + "session": None, KEY + "log": log, KEY + "reopened": True, KEY + "error": None}
    )


def _turn_lines(turn: TurnState) -> list[dict[str, Any]]:
    """What the chat shows of a closed turn: each approved answer, and a skip line for each hand not taken
    (and a note when the turn was cancelled)."""
    lines: list[dict[str, Any]] = []
    if turn.cancelled == "judging":
        return [{"kind": "note", "text": f"⏹ Turn cancelled while judging the wills ({turn.cancel_reason})."}]
    if (note := _unread_note(turn)) is not None:
        lines.append({"kind": "note", "text": note})
    for h in turn.hands:
        r = turn.resolved[h.model]
        if r.approved:
            text, error = turn.answers.get(h.model, ""), turn.answer_errors.get(h.model)
            notes = [cuts_note(turn.answer_cuts.get(h.model, [])), turn.answer_fallbacks.get(h.model, "")]
            lines.append(
                {
                    "kind": "answer",
                    "pid": h.model,
                    "text": plain_text(text),  # an answer stored before tidying read markdown out reads plainly too
                    "error": error,
                    "note": " ".join(n for n in notes if n),
                }
            )
        elif h.status != HandStatus.NOT_JUDGED:
            lines.append(
                {"kind": "skip", "pid": h.model, "text": _skip_words(h, r, turn.text), "machine": skip_line(h)}
            )
    if turn.cancelled:
        lines.append({"kind": "note", "text": f"⏹ Turn cancelled ({turn.cancel_reason}): what was said is kept."})
    return lines


def _unread_note(turn: TurnState) -> str | None:
    """Said once per turn when the embedding judge could not read much of the message (its hands carry the
    `embedder_unread:<share>` flag): why its wills there say little, and which judge reads it."""
    shares = []
    for flag in (f for h in turn.hands for f in h.flags if f.startswith("embedder_unread:")):
        try:
            shares.append(float(flag.split(":", 1)[1]))
        except ValueError:  # a stored run's flag that is not a number: no note rather than no page
            continue
    if not shares:
        return None
    return (
        f"⚠ The embedder (all-MiniLM-L6-v2, an English model) could not read {max(shares):.0%} of this message: "
        "the embedding judge's wills on it carry little signal. The likelihood judge reads it, and so does the "
        "multilingual embedder (Embedder: use-m3)."
    )


def _skip_words(hand: Hand, r: Resolution, message: str) -> str:
    """A skip line in words: a hand that was up says why it wanted to speak (`reason_sentence`) and who skipped
    it; a lowered hand says only that it stayed down: its reason is in the telemetry."""
    note = _skip_note(hand, r)
    if hand.status == HandStatus.RAISED and (said := reason_sentence(hand.reason, message)):
        return f"{note} — it {said}" if said.startswith(("asks", "mentions")) else f"{note} — {said}"
    return note


def _skip_note(hand: Hand, r: Resolution) -> str:
    """Why a participant did not answer, in words: its hand stayed down (and the rule that says so), or it was
    up and someone — you, the card timeout, a cancel — skipped it."""
    if hand.status == HandStatus.RAISED:
        who = {"user": "you", "batch": "you", "timeout": "the card timeout", "cancel": "the cancel"}.get(r.by, r.by)
        note = f"hand up (will {hand.will:.2f}), skipped by {who}"
    else:
        note = "hand down"
    return note + (f" ({r.rule})" if r.rule else "")


def render() -> None:
    _init_state()
    st.title("🙋 Conversation")
    st.caption(
        "A group chat in which each participant raises a hand only when your message is theirs to answer, and "
        "you choose who speaks."
    )
    details_on(DETAILS, help="Show the judge's machine detail: fitted maps, PMI scores, flags, raw wills.")
    cast, config = _render_settings()
    conv: Conversation | None = st.session_state[KEY + "conv"]
    if conv is not None and (
        conv.config != config or [p.model_dump() for p in conv.participants.values()] != [p.model_dump() for p in cast]
    ):
        st.info("Settings changed: they apply from the next conversation (the What-if tab re-decides this one).")
    chat, charts_tab, whatif_tab, telemetry_tab, bench_tab = st.tabs(
        ["Chat", "Charts", "What-if", "Telemetry", "Judge benchmark"]
    )
    with chat:
        _render_chat(cast, config)
    conv = st.session_state[KEY + "conv"]
    with charts_tab:
        if conv is None or not conv.telemetry:
            st.info("Charts appear after the first answered turn.")
        else:
            render_charts(conv)
    with whatif_tab:
        if conv is None or not conv.records:
            st.info("The what-if needs at least one finished turn.")
        else:
            render_whatif(conv)
    with telemetry_tab:
        if conv is None or not conv.telemetry:
            st.info("One row per hand per turn, once a turn is finished.")
        else:
            st.dataframe(pd.DataFrame(conv.telemetry), hide_index=True, width="stretch")
            if st.session_state[KEY + "run_id"]:
                st.caption(f"Events and calls: run `{st.session_state[KEY + 'run_id']}` on the Runs page.")
            export_buttons(state.get_store(), st.session_state[KEY + "run_id"], key=KEY + "export")
    with bench_tab:
        conversation_benchmark.render(cast, config)


# -- settings --------------------------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    """A table cell as text; an empty cell (None, or NaN in a row just added) as None."""
    return value if isinstance(value, str) and value else None


def _render_settings() -> tuple[list[Participant], HandRaiseConfig]:
    catalog = state.get_catalog()
    with st.expander("Participants and settings", expanded=st.session_state[KEY + "conv"] is None):
        rows = [
            {
                "id": p.id,
                "model": p.model_id,
                "answers with": p.answer_model,
                "name": p.name,
                "icon": p.icon,
                "expertise": ", ".join(p.expertise),
                "role": p.role,
            }
            for p in default_cast(catalog.ids)
        ]
        edited = st.data_editor(
            pd.DataFrame(rows),
            num_rows="dynamic",
            width="stretch",
            key=KEY + "cast",
            column_config={
                "model": st.column_config.SelectboxColumn(
                    "model", options=catalog.ids, required=True, help="the participant's own model (its profile)"
                ),
                "answers with": st.column_config.SelectboxColumn(
                    "answers with",
                    options=catalog.ids,
                    help="the model that writes this participant's answers. The default, SmolLM2-135M-Instruct, is "
                    "instruction-tuned: it answers the question. A base model such as Gemma 3 270M only continues "
                    "text (it loops and writes other speakers' lines), so it judges here but should not answer.",
                ),
            },
        )
        answering = {a for a in edited.get("answers with", pd.Series(dtype=object)).tolist() if isinstance(a, str)}
        if DEFAULT_ANSWER_MODEL in answering:
            st.caption(
                "SmolLM2-135M-Instruct writes short answers in English, on topic but with little knowledge, and "
                "cannot write Japanese: for real answers, pick a larger model under “answers with” (an API model "
                "or a bigger GGUF in the catalog). The judge is unaffected."
            )
        # four groups of settings in a row that wraps (each stretches, down to Streamlit's minimum width): side by
        # side at 1440 px, two by two at 900 px, where four columns squeezed "likelihood" into "likelihc"
        row = st.container(horizontal=True, wrap=True)
        c1, c2, c3, c4 = (row.container(width="stretch") for _ in range(4))
        mode = c1.selectbox(
            "Mode",
            [m.value for m in Mode],
            key=KEY + "mode",
            help="focus: you approve; brainstorm: will above the auto-allow level is approved "
            "(up to the cap); mention_only: only @mentioned participants answer",
        )
        method = c1.selectbox(
            "Judge method",
            METHODS,
            key=KEY + "method",
            help="How each hand is judged. likelihood (the default) reads, for each participant's expertise, its "
            f"PMI with the message through a map fitted on labelled chats. {GLOSSARY['PMI']} judge: one model rates "
            "everyone; self: each model rates itself; hybrid: both; embedding: text similarity, no language model.",
        )
        judge_model = c1.selectbox(
            "Judge model",
            catalog.ids,
            key=KEY + "judge_model",
            disabled=method not in ("judge", "hybrid", "likelihood"),
        )
        embedders = list(EMBEDDERS)
        embedder = c1.selectbox(
            "Embedder (embedding)",
            embedders,
            index=embedders.index(_default_embedder()),
            key=KEY + "embedder",
            disabled=method != "embedding",
            help="The sentence embedder the embedding judge reads, each through its own fitted map: use-m3, the "
            "multilingual Universal Sentence Encoder (16 languages, Japanese included), or minilm, "
            "all-MiniLM-L6-v2 (English). docs/hand-raise.md has the figures of both.",
        )
        partners = [m for m in catalog.ids if m != judge_model]
        ensemble = c1.multiselect(
            "Averaged with (likelihood)",
            partners,
            default=default_ensemble(catalog.ids, judge_model),
            key=KEY + "ensemble",
            disabled=method != "likelihood",
            help="Other local models whose option likelihoods are averaged with the judge model's. Used where a "
            "map was fitted for that combination (the caption below says which map is in use); otherwise the "
            "judge model scores alone.",
        )
        threshold = c2.slider("Threshold", 0.0, 1.0, 0.6, 0.05, key=KEY + "threshold")
        w_r = c2.slider("Weight: relevance", 0.0, 1.0, 0.5, 0.05, key=KEY + "w_r")
        w_n = c2.slider("Weight: novelty", 0.0, 1.0, 0.3, 0.05, key=KEY + "w_n")
        w_c = c2.slider("Weight: confidence", 0.0, 1.0, 0.2, 0.05, key=KEY + "w_c")
        cooldown = c3.toggle("Cooldown", value=True, key=KEY + "cooldown")
        strength = c3.slider("Cooldown per turn spoken", 0.0, 0.5, 0.1, 0.05, key=KEY + "strength")
        cap = c3.number_input("Brainstorm: max auto speakers", 1, 10, 2, key=KEY + "cap")
        auto_allow = c3.slider(
            "Brainstorm: auto-allow at will ≥",
            0.0,
            1.0,
            0.3,
            0.05,
            key=KEY + "auto_allow",
            help="In brainstorm mode a hand whose will reaches this is approved without a card (up to the cap).",
        )
        timeout = c4.number_input("Card timeout (s, 0 = none)", 0, 600, 0, key=KEY + "timeout")
        action = c4.selectbox("On timeout", ["skip", "approve"], key=KEY + "timeout_action")
        auto_at = c4.number_input("Standing auto-approve at will ≥ (0 = off)", 0.0, 1.0, 0.0, 0.05, key=KEY + "auto_at")
        over_window = c4.number_input(
            "Over-raise: turns looked at",
            2,
            100,
            5,
            key=KEY + "over_window",
            help="A participant whose raw will reaches the level below in every one of these turns is over-raising.",
        )
        over_level = c4.slider("Over-raise: level", 0.0, 1.0, 0.9, 0.05, key=KEY + "over_level")
        over_damping = c4.slider(
            "Over-raise: damping",
            0.05,
            1.0,
            0.8,
            0.05,
            key=KEY + "over_damping",
            help="The factor an over-raising participant's will is multiplied by (1 = no damping).",
        )
        # Under the columns, full width: in the first column it wrapped into a narrow strip of broken words.
        diagnosis = _judge_diagnosis(method, judge_model, ensemble, embedder)
        if diagnosis is not None:
            st.caption(md(f"Judge: {diagnosis.label} — {diagnosis.text}"))
        if _details():
            st.caption(md(breakable(_calibration_caption(method, judge_model, ensemble, embedder))))
    try:
        cast = []
        for r in edited.to_dict("records"):
            if not isinstance(r.get("id"), str) or not r["id"]:
                continue
            expertise = [e.strip() for e in str(r.get("expertise") or "").split(",") if e.strip()]
            cast.append(
                Participant(
                    id=r["id"],
                    model_id=r.get("model") or catalog.ids[0],
                    answer_model=_text(r.get("answers with")),
                    name=r.get("name") or r["id"],
                    icon=r.get("icon") or "🙋",
                    role=r.get("role") or "",
                    expertise=expertise,
                )
            )
        if len({p.id for p in cast}) != len(cast):
            raise ValueError("participant ids must be unique")
        config = HandRaiseConfig(
            weights=Weights(relevance=w_r, novelty=w_n, confidence=w_c),
            threshold=threshold,
            mode=Mode(mode),
            judge_method=method,
            judge_model=judge_model,
            likelihood_ensemble=list(ensemble),
            embedder=embedder,
            cooldown_enabled=cooldown,
            cooldown_per_turn=strength,
            brainstorm_max_speakers=int(cap),
            brainstorm_auto_allow=float(auto_allow),
            over_raise_window=int(over_window),
            over_raise_level=float(over_level),
            over_raise_damping=float(over_damping),
            card_timeout_s=float(timeout) or None,
            timeout_action=action,
            auto_approve_at=float(auto_at) or None,
        )
    except ValueError as exc:
        st.error(f"Settings: {md(exc, inline=False)}")
        st.stop()
    return cast, config


def _details() -> bool:
    """Whether the page's Details toggle is on (research detail shown)."""
    return bool(st.session_state.get(f"details.{DETAILS}", False))


def _default_embedder() -> str:
    """The embedding judge's embedder preselected: $HANDRAISE_EMBEDDER where it names a known one, else the
    measured default."""
    env = os.environ.get(EMBEDDER_ENV, "").strip()
    return env if env in EMBEDDERS else DEFAULT_EMBEDDER


def _calibration_caption(
    method: str, judge_model: str, ensemble: Sequence[str] = (), embedder: str = DEFAULT_EMBEDDER
) -> str:
    """Which models score and which fitted map turns their raw scores into will components: the engine's
    own choice (`map_choice`), described."""

    try:
        return map_choice(method, judge_model, ensemble, embedder=embedder).describe()
    except ValueError as exc:
        return f"Calibration: unreadable ({exc})"


def _judge_diagnosis(
    method: str, judge_model: str, ensemble: Sequence[str] = (), embedder: str = DEFAULT_EMBEDDER
) -> Diagnosis | None:
    """The diagnosis stored with the map the judge would read (measurable signal or not), None for a method
    without a map."""

    try:
        return map_choice(method, judge_model, ensemble, embedder=embedder).diagnosis
    except ValueError:
        return None


def _judged_by(conv: Conversation) -> str:
    """This conversation's judge, threshold, mode and the calibration its wills go through (trusted text), and
    the calibration versions its recorded hands name when the file has been refitted since."""
    config = conv.config
    on = (
        f" on {config.judge_model}"
        if config.judge_method in ("judge", "hybrid", "likelihood")
        else f" on {config.embedder}"
        if config.judge_method == "embedding"
        else ""
    )
    caption = _calibration_caption(config.judge_method, config.judge_model, config.likelihood_ensemble, config.embedder)
    used = sorted(
        {f.split(":", 1)[1] for t in conv.states for h in t.hands for f in h.flags if f.startswith("calibration:")}
    )
    stale = [v for v in used if v not in caption]
    plain = (
        f"This conversation: judge method {config.judge_method}{on}, threshold {config.threshold:.2f}, "
        f"mode {config.mode.value}."
    )
    if not _details():
        return plain
    return f"{plain} {caption}" + (f" — its recorded wills used calibration {', '.join(used)}" if stale else "")


# -- chat ------------------------------------------------------------------------------------------------------


def _new_conversation(cast: list[Participant], config: HandRaiseConfig) -> ConversationSession:
    """`handraise.open_conversation` (the run the CLI's `handraise chat` opens too), watched by the registry:
    closed as interrupted once this browser session is gone or idle too long."""
    session = open_conversation(
        ConversationConfig(participants=cast, config=config), state.get_hub().get, state.get_store()
    )
    state.get_registry().track(session.run_id, alive=_session_alive())
    st.session_state[KEY + "session"] = session
    st.session_state[KEY + "run_id"] = session.run_id
    st.session_state[KEY + "log"] = []
    st.session_state[KEY + "conv"] = session.conversation
    state.clear_reads()
    return session


def _session_alive() -> Any:
    """A check that this browser session still exists (None outside a Streamlit server, e.g. AppTest)."""
    try:
        ctx = get_script_run_ctx()
        runtime = Runtime.instance()
    except RuntimeError:
        return None
    if ctx is None:
        return None
    session_id = ctx.session_id
    return lambda: runtime.is_active_session(session_id)


def _reset_chat() -> None:
    for name, value in (
        ("session", None),
        ("conv", None),
        ("run_id", None),
        ("log", []),
        ("deadline", None),
        ("error", None),
        ("pending", None),
        ("streams", {}),
        ("answering", {}),
        ("reopened", False),
        ("miss", False),
    ):
        st.session_state[KEY + name] = value
    st.query_params.pop("run", None)


def handle_new_conversation() -> None:
    """Close this conversation (finished, with its figures: `handraise.close_conversation`) and clear the chat.
    A reopened stored conversation is only left."""
    session: ConversationSession | None = st.session_state[KEY + "session"]
    if session is not None:
        close_conversation(session)
        state.get_registry().release(session.run_id)
    _reset_chat()
    state.clear_reads()


def _still_open() -> bool:
    """False (and a note) when the registry closed this conversation after the session went idle."""
    run_id = st.session_state[KEY + "run_id"]
    if not run_id or state.get_registry().touch(run_id):
        return True
    reason = state.get_registry().closed_reason(run_id) or "it was closed"
    _reset_chat()
    st.session_state[KEY + "error"] = f"The previous conversation was closed ({reason}); this message starts a new one."
    return False


def _render_chat(cast: list[Participant], config: HandRaiseConfig) -> None:
    for name, value in (("pending", None), ("streams", {}), ("answering", {})):
        st.session_state.setdefault(KEY + name, value)
    conv: Conversation | None = st.session_state[KEY + "conv"]
    reopened = st.session_state[KEY + "reopened"]
    # Not in a narrow column: there the label was cut to "New conver…" in a window 1200 px wide.
    st.button("New conversation", key=KEY + "new", disabled=conv is None, on_click=handle_new_conversation)
    if reopened:
        st.info(
            f"Reopened from run {md(st.session_state[KEY + 'run_id'])} (read only): the What-if re-decides it; "
            "New conversation starts a fresh one."
        )
    if conv is not None:  # the settings expander is folded once a conversation runs: what judges it, in one line
        st.caption(md(breakable(_judged_by(conv))))
    _render_your_labels(config)
    icons = {p.id: p.icon for p in (conv.participants.values() if conv else cast)}
    names = {p.id: p.name for p in (conv.participants.values() if conv else cast)}
    # Messages, answers, names, icons and reasons are all untrusted: text, or escaped inside trusted markdown.
    for item in st.session_state[KEY + "log"]:
        if item["kind"] == "user":
            st.chat_message("user").text(item["text"])
        elif item["kind"] == "answer":
            with st.chat_message("assistant", avatar=safe_avatar(icons.get(item["pid"]))):
                st.markdown(f"**{md(names.get(item['pid'], item['pid']))}**")
                empty = "(no usable answer: see the note below)" if item.get("note") else "(no answer)"
                st.text(item["text"] or empty)
                if item.get("note"):
                    st.caption(md(item["note"]))
                if item.get("error") and demo.enabled() and demo.is_miss(item["error"]):
                    st.session_state[KEY + "miss"] = True  # said once, below, with the recorded input
                elif item.get("error"):
                    st.error(md(item["error"], inline=False))
        elif item["kind"] == "note":
            st.caption(md(item["text"]))
        else:
            st.caption(md(f"{icons.get(item['pid'], '')} {names.get(item['pid'], item['pid'])} — {item['text']}"))
            if _details() and item.get("machine"):
                st.caption(md(breakable(item["machine"])))
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    if st.session_state[KEY + "miss"]:
        sent = [i["text"] for i in st.session_state[KEY + "log"] if i["kind"] == "user"]
        demo.miss_notice(DEMO_PAGE, key=KEY + "use_recorded", on_use=_use_recorded, sent=sent[-1] if sent else None)
    if (text := st.session_state.pop(KEY + "send", None)) is not None:
        handle_message(text, cast, config)
        st.rerun()
    pending = st.session_state[KEY + "pending"]
    if pending is not None:
        _watch_judgment(pending)
    current: TurnState | None = conv.states[-1] if conv and conv.states and not conv.states[-1].answered else None
    if (pending is not None or current is not None) and not reopened:
        stopping = bool(current is not None and current.cancelled) or _turn_control().cancelled
        st.button(
            "Cancel this turn" if not stopping else "Cancelling…",
            key=KEY + "cancel_turn",
            disabled=stopping,
            on_click=handle_cancel_turn,
            help="Stop the judgment or the answers under way: what was said is kept and the conversation goes on.",
        )
    if current is not None and not reopened:
        assert conv is not None
        _watch_answers(conv, current)
        if current.waiting:
            _render_cards(conv, current)
    if demo.enabled() and current is None and pending is None and not reopened:
        _render_recorded_next()
    prompt = st.chat_input(
        "Message the group (try @all or @coder)",
        key=KEY + "input",
        disabled=current is not None or pending is not None or reopened,
    )
    if prompt:
        handle_message(prompt, cast, config)
        st.rerun()


DEMO_PAGE = "conversation"  # its recorded messages in data/demo/manifest.json


def _recorded_messages() -> list[str]:
    page = demo.page_demo(DEMO_PAGE)
    return list(page.inputs) if page is not None else []


def next_recorded(sent: Sequence[str], recorded: Sequence[str]) -> str | None:
    """The recorded message to send next: the one after those sent, while the chat has followed the recording
    (a message of its own makes every later judgment a miss, so none is offered then)."""
    if list(sent) != list(recorded[: len(sent)]) or len(sent) >= len(recorded):
        return None
    return recorded[len(sent)]


def _render_recorded_next() -> None:
    """Demo mode: the next recorded message, one click to send (the chat box cannot be prefilled)."""
    sent = [i["text"] for i in st.session_state[KEY + "log"] if i["kind"] == "user"]
    text = next_recorded(sent, _recorded_messages())
    if text is None:
        return
    st.button(
        f"Send the recorded message: “{text}”",
        key=KEY + "send_recorded",
        type="primary",
        on_click=lambda: st.session_state.update({KEY + "send": text}),
    )


def _use_recorded() -> None:
    """The miss notice's button: a new conversation that starts with the first recorded message (the message
    outside the recording is in this one's context, so every later judgment would miss too)."""
    handle_new_conversation()
    recorded = _recorded_messages()
    if recorded:
        st.session_state[KEY + "send"] = recorded[0]


def handle_message(text: str, cast: list[Participant], config: HandRaiseConfig) -> None:
    """Judge the wills on the background loop; the page watches the judgment (it never waits on it)."""
    _still_open()
    session = st.session_state[KEY + "session"] or _new_conversation(cast, config)
    st.session_state[KEY + "error"] = None
    st.session_state[KEY + "log"].append({"kind": "user", "text": text})
    # `conversation_turn` judges and decides what decides itself (attributed to the run); cards and answers follow.
    # The turn has its own run control: Cancel stops its judgment and its answers, not the conversation.
    control = RunControl()
    st.session_state[KEY + "turn_control"] = control

    async def turn() -> Any:
        with controlled(control):
            return await conversation_turn(session, text, answer=False)

    st.session_state[KEY + "pending"] = state.get_loop().submit(turn())


def _turn_control() -> RunControl:
    control = st.session_state.get(KEY + "turn_control")
    if not isinstance(control, RunControl):
        control = RunControl()
        st.session_state[KEY + "turn_control"] = control
    return control


def handle_cancel_turn() -> None:
    """Cancel the running turn: its judgment stops before its next call (a local generation at its next
    token), its answers keep what they streamed, the cards still waiting are skipped; the turn is stored with
    a `turn_cancelled` event and every event it completed, and the conversation goes on."""
    reason = "cancelled by the user"
    _turn_control().cancel(reason)
    conv: Conversation | None = st.session_state[KEY + "conv"]
    current = conv.states[-1] if conv and conv.states and not conv.states[-1].answered else None
    if conv is not None and current is not None and st.session_state[KEY + "pending"] is None:
        conv.cancel_turn(current, reason)
        st.session_state[KEY + "deadline"] = None


def _submit(coro: Any, purpose: str) -> Any:
    run_id = st.session_state[KEY + "run_id"]
    control = _turn_control()

    async def attributed() -> Any:
        with controlled(control), call_context(run_id=run_id, purpose=purpose):
            return await coro

    return state.get_loop().submit(attributed())


def _watch_judgment(pending: Any) -> None:
    @st.fragment(run_every=0.3)
    def judging() -> None:
        if not pending.done():
            st.caption("⏳ judging who wants to speak…")
            return
        st.session_state[KEY + "pending"] = None
        conv: Conversation = st.session_state[KEY + "conv"]
        if pending.cancelled():  # Cancel during the judgment: the turn ended there (stored `turn_cancelled`)
            if conv.states and conv.states[-1].cancelled == "judging":
                st.session_state[KEY + "log"].extend(_turn_lines(conv.states[-1]))
            state.clear_reads()
            st.rerun()
        try:
            turn = pending.result()
        except Exception as exc:  # the message stays in the log; the failure is shown, nothing recorded is lost
            if demo.enabled() and demo.is_miss(exc):
                st.session_state[KEY + "miss"] = True  # a notice with the recorded input, not an error
            else:
                st.session_state[KEY + "error"] = f"The will judgment failed: {exc}"
        else:
            if _turn_control().cancelled:  # cancelled as the judgment came in: no card waits, no answer starts
                conv.cancel_turn(turn, _turn_control().cancel_reason or "cancelled by the user")
            st.session_state[KEY + "deadline"] = (
                time.monotonic() + conv.config.card_timeout_s if conv.config.card_timeout_s and turn.waiting else None
            )
            _start_approved(conv, turn)
        st.rerun()

    judging()


def _start_approved(conv: Conversation, turn: TurnState) -> None:
    """Every approved participant starts answering now, whether or not other cards still wait."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    streams: dict[str, str] = st.session_state[KEY + "streams"]
    for pid, r in turn.resolved.items():
        if not r.approved or pid in answering or pid in turn.answers:  # (a cancelled turn's unstarted answers)
            continue
        streams[pid] = ""

        def on_chunk(who: str, text: str) -> None:  # on the loop's thread: a plain dict update
            streams[who] = streams.get(who, "") + text

        answering[pid] = _submit(conv.answer_one(turn, pid, on_chunk=on_chunk), "handraise.answer")


def _watch_answers(conv: Conversation, turn: TurnState) -> None:
    """The answers of this turn stream into their own chat bubbles, below the conversation and apart from
    the cards; once every card is decided and every answer is in, the turn closes."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    streams: dict[str, str] = st.session_state[KEY + "streams"]
    running = any(not f.done() for f in answering.values())

    @st.fragment(run_every=0.3 if running else None)
    def answers() -> None:
        for pid, future in list(answering.items()):
            p = conv.participants[pid]
            with st.chat_message("assistant", avatar=safe_avatar(p.icon)):
                st.markdown(f"**{md(p.name)}**")
                # streamed as text: an answer's markdown is not rendered
                st.text((streams.get(pid, "") + ("" if future.done() else "▌")) or "…")
        if not turn.waiting and all(f.done() for f in answering.values()):
            _close_turn(conv, turn)
            st.rerun()
        elif running and all(f.done() for f in answering.values()):
            st.rerun()  # the answers are in: stop refreshing

    answers()


def _render_cards(conv: Conversation, turn: TurnState) -> None:
    deadline = st.session_state[KEY + "deadline"]
    st.markdown("**Hands up** — approve who speaks")
    if (note := _unread_note(turn)) is not None:
        st.caption(note)
    for hand in turn.waiting:
        p = conv.participants[hand.model]
        with st.container(border=True):
            # Text above, buttons in a row that wraps: side by side in columns, a 900 px window cut them to "S…".
            left = st.container()
            said = reason_sentence(hand.reason, turn.text)
            left.markdown(
                f"🙋 {md(p.icon)} **{md(p.name)}** wants to speak (will **{hand.will:.2f}**)"
                + (f" — {md(said)}" if said else "")
            )
            if failure_flags(hand.flags):
                left.caption("⚠ The judgment of this hand failed, so it counts as 0 (see Details).")
            if _details():
                left.caption(
                    md(breakable(f"judge: {hand.reason or '—'} · flags: {', '.join(hand.flags) or '—'}"))
                    + (
                        f" · raw {hand.raw_will:.2f}, cooldown {hand.cooldown_delta:+.2f}, "
                        f"over-raise ×{hand.over_raise_factor:g}"
                        if hand.cooldown_delta or hand.over_raise_factor != 1
                        else ""
                    )
                )
            row = st.container(horizontal=True, wrap=True)
            row.button(
                "Speak",
                key=f"{KEY}approve.{turn.turn_id}.{hand.model}",
                type="primary",
                on_click=_decide,
                args=(conv, turn, "act", hand.model, "approve"),
            )
            row.button(
                "Skip",
                key=f"{KEY}skip.{turn.turn_id}.{hand.model}",
                on_click=_decide,
                args=(conv, turn, "act", hand.model, "skip"),
            )
    batch = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    batch.button(
        "Approve all", key=f"{KEY}all.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "approve_all", None)
    )
    batch.button(
        "Skip all", key=f"{KEY}none.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "skip_all", None)
    )
    at = batch.number_input("Auto-approve will ≥", 0.0, 1.0, 0.8, 0.05, key=f"{KEY}at.{turn.turn_id}", width=180)
    batch.button(
        "Apply ≥ X", key=f"{KEY}atgo.{turn.turn_id}", on_click=_decide, args=(conv, turn, "batch", "auto_at", at)
    )
    if deadline is not None:
        _countdown(conv, turn, deadline)


def _decide(conv: Conversation, turn: TurnState, how: str, what: str, arg: Any) -> None:
    """A card callback: record the decision, and let every newly approved participant start answering."""
    if turn.answered or not _still_open():
        return
    if how == "act":
        if what not in {h.model for h in turn.waiting}:
            return  # a second click on a card already decided
        conv.act(turn, what, arg)
    else:
        conv.batch(turn, what, arg)
    _start_approved(conv, turn)


def _countdown(conv: Conversation, turn: TurnState, deadline: float) -> None:
    @st.fragment(run_every=1.0)
    def countdown() -> None:
        left = deadline - time.monotonic()
        if left > 0:
            st.caption(f"⏳ {left:.0f} s left, then every waiting card is {conv.config.timeout_action}ped")
            return
        if turn.waiting:
            conv.timeout(turn)
            _start_approved(conv, turn)
        st.session_state[KEY + "deadline"] = None
        st.rerun()

    countdown()


def _close_turn(conv: Conversation, turn: TurnState) -> None:
    """Every card decided and every approved answer in: close the turn and write it into the chat log."""
    answering: dict[str, Any] = st.session_state[KEY + "answering"]
    for pid, future in answering.items():
        exc = future.exception() if not future.cancelled() else None
        if exc is not None or future.cancelled():  # a failure that is no model error (e.g. a replay miss)
            turn.answers.setdefault(pid, st.session_state[KEY + "streams"].get(pid, "").strip())
            turn.answer_errors.setdefault(pid, f"{type(exc).__name__}: {exc}" if exc else "cancelled")
    try:
        conv.close_answers(turn)
    except ValueError as exc:
        st.session_state[KEY + "error"] = f"Answering failed: {exc}"
        return
    st.session_state[KEY + "log"].extend(_turn_lines(turn))
    st.session_state[KEY + "deadline"] = None
    st.session_state[KEY + "answering"] = {}
    st.session_state[KEY + "streams"] = {}
    state.clear_reads()


# -- your labels: what your Speak / Skip taught, and the refit they offer ----------------------------------------


def map_id(config: HandRaiseConfig) -> str | None:
    """The id of the map the likelihood judge reads under `config` (the judge model, or its ensemble's); None for
    a judge method without a map."""
    if config.judge_method != "likelihood":
        return None
    try:
        return map_choice(config.judge_method, config.judge_model, config.likelihood_ensemble).map_id
    except ValueError:
        return None


def map_line(config: HandRaiseConfig) -> str:
    """Which map the likelihood judge reads, in words: 'learnt from 40 of your approvals (you)', or the shipped
    one; '' for a judge method without a map."""
    mid = map_id(config)
    if mid is None:
        return ""
    used = map_in_use("handraise", mid)
    if used is None:
        return "none fitted for this model (the judge runs uncalibrated)"
    if used.version == "shipped" and used.fallback:  # a damaged in_use.json or adopted version
        return f"the shipped one — the adopted map cannot be used ({used.fallback})"
    if used.version == "shipped":
        return "the shipped one, fitted on the project's labelled chats"
    return str(used.provenance or f"version {used.version}")


def approvals_since_map(config: HandRaiseConfig) -> int:
    """Your Speak / Skip labels recorded since the map in use was made (all of them for the shipped map)."""
    mid = map_id(config)
    used = map_in_use("handraise", mid) if mid else None
    since = created_at(used) if used is not None and used.version != "shipped" else None
    labels = list_labels(state.get_store(), mechanism="handraise", user=current_user())
    return sum(1 for lab in labels if lab.source == "approval" and (since is None or _naive(lab.created_at) > since))


def _naive(moment: Any) -> Any:
    """A UTC datetime without its zone (a map version's date has none)."""
    return moment.replace(tzinfo=None) if getattr(moment, "tzinfo", None) is not None else moment


def refit_every() -> int:
    """After every K new approvals the page offers a refit (settings: JUDGELAB_REFIT_EVERY)."""
    return max(1, int(getattr(get_settings(), "refit_every", 20) or 20))


def _render_your_labels(config: HandRaiseConfig) -> None:
    """One caption: the map in use and the labels your Speak / Skip recorded; after every K new approvals, an offer
    to refit the judge from them (the candidate shows in the What-if tab before it is used)."""
    store = state.get_store()
    run_id = st.session_state[KEY + "run_id"]
    total = count_labels(store, mechanism="handraise")
    here = count_labels(store, mechanism="handraise", run_id=run_id) if run_id else 0
    parts = []
    used = map_line(config)
    if used:
        parts.append(f"Map in use: {md(used)}")
    counted = (
        f"{here} hand label{'s' if here != 1 else ''} (Speak/Skip and the Labels queue) in this conversation, "
        f"{total} in all"
        if run_id
        else f"{total} hand label{'s' if total != 1 else ''} (Speak/Skip and the Labels queue) so far"
    )
    parts.append(f"🏷️ {counted} ([Labels page](/labels))")
    st.caption(" · ".join(parts), help="Each Speak or Skip you give is kept as a label of who should speak.")
    notice = st.session_state.pop(KEY + "label_notice", None)
    if notice:
        (st.error if notice[0] == "error" else st.success)(md(notice[1]))
    if config.judge_method != "likelihood":
        return
    candidate = st.session_state.get(KEY + "candidate")
    if candidate is not None and candidate.get("model_id") == map_id(config):
        with st.expander("A map refitted from your labels is ready (the What-if tab shows how it would decide)"):
            render_candidate(candidate, key=KEY + "cand", notice_key=KEY + "label_notice", refit_key=KEY + "candidate")
        return
    fresh, every = approvals_since_map(config), refit_every()
    if fresh >= every:
        row = st.container(horizontal=True, wrap=True, vertical_alignment="center")
        row.caption(f"{fresh} new Speak / Skip labels since this map was made: refit the judge to your choices?")
        row.button("Refit from my labels", key=KEY + "refit", on_click=handle_refit_offer)


def handle_refit_offer() -> None:
    """Fit a candidate map on your labels (saved as a version, not in use) and keep it for the What-if."""
    result = refit_candidate("handraise")
    if "error" in result:
        st.session_state[KEY + "label_notice"] = ("error", result["error"])
        return
    st.session_state[KEY + "candidate"] = result


# -- charts, what-if, tokens ----------------------------------------------------------------------------------


def render_charts(conv: Conversation) -> None:
    figures = token_figures(conv)
    metric_row(token_metrics(figures))
    st.caption(token_caption(figures, conv.config.judge_method))
    c1, c2 = flow_columns(2, width=400)
    c1.plotly_chart(charts.will_per_turn(conv.telemetry, conv.config.threshold), key=KEY + "will_chart")
    c2.plotly_chart(charts.approval_sankey(conv.telemetry), key=KEY + "sankey")
    st.plotly_chart(charts.will_histogram(conv.telemetry), key=KEY + "hist")


def token_metrics(figures: Mapping[str, Any]) -> list[tuple[str, Any] | dict[str, Any]]:
    """The tokens headline, judging and answering apart: the answer tokens the hands saved against everyone
    answering every turn, and the judge tokens that deciding cost (mostly prompt reads of a local model)."""
    saved = max(0, int(figures["baseline_tokens"]) - int(figures["answer_tokens"]))
    return [
        {
            "label": "Answer tokens saved",
            "value": f"{saved:,}",
            "help": f"{figures['answer_tokens']:,} answer tokens written, against {figures['baseline_tokens']:,} "
            "if every participant had answered every turn (the missing answers counted at this conversation's "
            "mean answer length).",
        },
        ("Answers given / everyone answers", f"{figures['answers']} / {figures['baseline_answers']}"),
        {
            "label": "Judge tokens (deciding who speaks)",
            "value": f"{figures['judge_tokens']:,}",
            "help": "Tokens the will judge read and wrote. The likelihood judge only reads (prompt tokens on a "
            "local model, nothing generated), so these cost time, not money.",
        },
    ]


def token_caption(figures: Mapping[str, Any], method: str) -> str:
    """One sentence with both sides, so the two numbers are never read as one total against the baseline."""
    saved = max(0, int(figures["baseline_tokens"]) - int(figures["answer_tokens"]))
    how = " (read by the judge model, nothing generated)" if method == "likelihood" else ""
    return (
        f"Answering: {figures['answer_tokens']:,} tokens written instead of {figures['baseline_tokens']:,} "
        f"({saved:,} saved). Deciding who answers: {figures['judge_tokens']:,} judge tokens{how}."
    )


def render_whatif(conv: Conversation) -> None:
    st.caption(
        "Move the settings: the whole conversation is re-decided from its recorded components (no model "
        "call). A card you never saw counts as skipped; your recorded decisions stand."
    )
    c1, c2, c3, c4 = st.columns(4)
    threshold = c1.slider("Threshold", 0.0, 1.0, conv.config.threshold, 0.05, key=KEY + "wi_threshold")
    mode = c1.selectbox(
        "Mode",
        [m.value for m in Mode],
        index=[m.value for m in Mode].index(conv.config.mode.value),
        key=KEY + "wi_mode",
    )
    w_r = c2.slider("Relevance weight", 0.0, 1.0, conv.config.weights.relevance, 0.05, key=KEY + "wi_wr")
    w_n = c2.slider("Novelty weight", 0.0, 1.0, conv.config.weights.novelty, 0.05, key=KEY + "wi_wn")
    w_c = c3.slider("Confidence weight", 0.0, 1.0, conv.config.weights.confidence, 0.05, key=KEY + "wi_wc")
    strength = c3.slider("Cooldown per turn", 0.0, 0.5, conv.config.cooldown_per_turn, 0.05, key=KEY + "wi_cd")
    actions: list[Action] = ["skip", "approve"]
    unrecorded = c4.selectbox("Cards you never saw", actions, key=KEY + "wi_unrecorded") or "skip"
    try:
        cfg = conv.config.model_copy(
            update={
                "threshold": threshold,
                "mode": Mode(mode),
                "cooldown_per_turn": strength,
                "weights": Weights(relevance=w_r, novelty=w_n, confidence=w_c),
            }
        )
    except ValueError as exc:
        st.error(md(exc, inline=False))
        return
    started = time.perf_counter()
    before = redecide(conv.records, conv.config)
    after = redecide(conv.records, cfg, unrecorded)
    elapsed = (time.perf_counter() - started) * 1000
    changes = changed_hands(before, after)
    raised = [sum(h.status == HandStatus.RAISED for o in outs for h in o.hands) for outs in (before, after)]
    spoke = [sum(len(o.speakers) for o in outs) for outs in (before, after)]
    metric_row(
        [
            {"label": "Hands raised", "value": raised[1], "delta": raised[1] - raised[0]},
            {"label": "Answers", "value": spoke[1], "delta": spoke[1] - spoke[0]},
            ("Hands that change", len(changes)),
        ]
    )
    st.caption(f"Re-decided {sum(len(o.hands) for o in after)} hands in {elapsed:.1f} ms.")
    if changes:
        st.dataframe(pd.DataFrame(whatif_rows(conv, changes)), hide_index=True, width="stretch")
    candidate = st.session_state.get(KEY + "candidate")
    run_id = st.session_state[KEY + "run_id"]
    if candidate is not None and run_id and candidate.get("model_id") == map_id(conv.config):
        render_candidate_whatif(conv, run_id, candidate)


def render_candidate_whatif(conv: Conversation, run_id: str, candidate: Mapping[str, Any]) -> None:
    """How the map refitted from your labels (not in use yet) would have decided the hands already played: each
    recorded hand's features read through it, at this conversation's threshold, no model call."""
    st.divider()
    st.markdown(f"**With the map refitted from your labels** — {md(candidate['provenance'])}, not in use yet")
    try:
        rows = whatif_map(state.get_store(), run_id, candidate["calibration"])
    except ValueError as exc:
        st.info(f"This conversation cannot be re-decided with the new map: {md(exc)}")
        return
    if not rows:
        st.caption("No hand of this conversation recorded the judge's features, so the new map cannot read it.")
        return
    names = {p.id: f"{p.icon} {p.name}" for p in conv.participants.values()}
    changed = [r for r in rows if r["then"] != r["candidate"]]
    metric_row(
        [
            ("Hands read again", len(rows)),
            {
                "label": "Would speak",
                "value": sum(r["candidate"] == "speak" for r in rows),
                "delta": sum(r["candidate"] == "speak" for r in rows) - sum(r["then"] == "speak" for r in rows),
            },
            ("Hands that change", len(changed)),
        ],
        key=KEY + "cand_metrics",
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "turn": str(r["key"]).split("/", 1)[0],
                    "participant": names.get(str(r["participant"]), str(r["participant"])),
                    "then": answer_words("handraise", r["then"]),
                    "with the new map": answer_words("handraise", r["candidate"]),
                    "will then": r["will_then"],
                    "will with the new map": r["will_candidate"],
                }
                for r in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "will then": st.column_config.NumberColumn(format="%.2f"),
            "will with the new map": st.column_config.NumberColumn(format="%.2f"),
        },
    )


def whatif_rows(conv: Conversation, changes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The hands that change, headed in words: the participant by name (the engine's rows name its id under
    `model`), its hand and answer before and after."""
    names = {p.id: f"{p.icon} {p.name}" for p in conv.participants.values()}
    return [
        {
            "turn": c["turn"],
            "participant": names.get(str(c["model"]), str(c["model"])),
            "hand before": c["status_before"],
            "hand after": c["status_after"],
            "answered before": c["answered_before"],
            "answered after": c["answered_after"],
            "will before": c["will_before"],
            "will after": c["will_after"],
        }
        for c in changes
    ]


if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
