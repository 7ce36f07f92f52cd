"""The Hand raise page's "Participants and settings": the cast table (model, answering model, name, icon,
expertise, role), the judge (mode, method, model, embedder, likelihood partners), the decision knobs (threshold,
weights, cooldown, brainstorm, card timeout, over-raise) and what the chosen judge reads, in words."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import state
from dashboard.components import GLOSSARY, breakable, md
from dashboard.mechanisms.handraise.session import KEY, details
from engine.diagnostics import Diagnosis
from engine.embeddings import EMBEDDERS
from engine.handraise.answers import DEFAULT_ANSWER_MODEL
from engine.handraise.cast import Participant, default_cast
from engine.handraise.conversation import Conversation
from engine.handraise.decisions import DEFAULT_EMBEDDER, EMBEDDER_ENV, HandRaiseConfig, Mode, Weights, default_ensemble
from engine.handraise.judge import map_choice

# The likelihood judge first: on the bundled model it scores best on the shipped benchmark (README).
METHODS = ["likelihood", "judge", "self", "hybrid", "embedding"]


def _text(value: Any) -> str | None:
    """A table cell as text; an empty cell (None, or NaN in a row just added) as None."""
    return value if isinstance(value, str) and value else None


def render_settings() -> tuple[list[Participant], HandRaiseConfig]:
    """The "Participants and settings" expander, read into the cast and the config the next conversation runs
    with; a setting that cannot be read is said, and the page stops there."""
    catalog = state.get_catalog()
    with st.expander("Participants and settings", expanded=st.session_state[KEY + "conv"] is None):
        edited = _cast_editor(catalog.ids)
        # four groups of settings in a row that wraps (each stretches, down to Streamlit's minimum width): side by
        # side at 1440 px, two by two at 900 px, where four columns squeezed "likelihood" into "likelihc"
        row = st.container(horizontal=True, wrap=True)
        c1, c2, c3, c4 = (row.container(width="stretch") for _ in range(4))
        judge = _judge_settings(c1, catalog.ids)
        knobs = {**_weight_settings(c2), **_cooldown_settings(c3), **_timeout_settings(c4)}
        # Under the columns, full width: in the first column it wrapped into a narrow strip of broken words.
        _judge_captions(judge["method"], judge["judge_model"], judge["ensemble"], judge["embedder"])
    try:
        cast = _read_cast(edited, catalog.ids)
        config = _read_config(judge, knobs)
    except ValueError as exc:
        st.error(f"Settings: {md(exc, inline=False)}")
        st.stop()
    return cast, config


def _cast_editor(model_ids: list[str]) -> pd.DataFrame:
    """The cast as an editable table (a row per participant, rows added or removed), seeded with the default
    cast; a note on the bundled answering model when a participant answers with it."""
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
        for p in default_cast(model_ids)
    ]
    edited = st.data_editor(
        pd.DataFrame(rows),
        num_rows="dynamic",
        width="stretch",
        key=KEY + "cast",
        column_config={
            "model": st.column_config.SelectboxColumn(
                "model", options=model_ids, required=True, help="the participant's own model (its profile)"
            ),
            "answers with": st.column_config.SelectboxColumn(
                "answers with",
                options=model_ids,
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
    return edited


def _judge_settings(c1: DeltaGenerator, model_ids: list[str]) -> dict[str, Any]:
    """The first group: the mode, and the judge — its method, model, embedder and likelihood partners."""
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
        model_ids,
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
    partners = [m for m in model_ids if m != judge_model]
    ensemble = c1.multiselect(
        "Averaged with (likelihood)",
        partners,
        default=default_ensemble(model_ids, judge_model),
        key=KEY + "ensemble",
        disabled=method != "likelihood",
        help="Other local models whose option likelihoods are averaged with the judge model's. Used where a "
        "map was fitted for that combination (the caption below says which map is in use); otherwise the "
        "judge model scores alone.",
    )
    return {"mode": mode, "method": method, "judge_model": judge_model, "embedder": embedder, "ensemble": ensemble}


def _weight_settings(c2: DeltaGenerator) -> dict[str, Any]:
    """The second group: the threshold a will must reach, and the weights of its three components."""
    threshold = c2.slider("Threshold", 0.0, 1.0, 0.6, 0.05, key=KEY + "threshold")
    w_r = c2.slider("Weight: relevance", 0.0, 1.0, 0.5, 0.05, key=KEY + "w_r")
    w_n = c2.slider("Weight: novelty", 0.0, 1.0, 0.3, 0.05, key=KEY + "w_n")
    w_c = c2.slider("Weight: confidence", 0.0, 1.0, 0.2, 0.05, key=KEY + "w_c")
    return {"threshold": threshold, "w_r": w_r, "w_n": w_n, "w_c": w_c}


def _cooldown_settings(c3: DeltaGenerator) -> dict[str, Any]:
    """The third group: the cooldown of who just spoke, and brainstorm's cap and auto-allow level."""
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
    return {"cooldown": cooldown, "strength": strength, "cap": cap, "auto_allow": auto_allow}


def _timeout_settings(c4: DeltaGenerator) -> dict[str, Any]:
    """The fourth group: the card timeout and what it does, the standing auto-approve, and the over-raise
    damping of a participant whose hand is always up."""
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
    return {
        "timeout": timeout,
        "action": action,
        "auto_at": auto_at,
        "over_window": over_window,
        "over_level": over_level,
        "over_damping": over_damping,
    }


def _judge_captions(method: str, judge_model: str, ensemble: Sequence[str], embedder: str) -> None:
    """What the chosen judge reads, in words: its map's diagnosis, and (Details) the calibration itself."""
    diagnosis = judge_diagnosis(method, judge_model, ensemble, embedder)
    if diagnosis is not None:
        st.caption(md(f"Judge: {diagnosis.label} — {diagnosis.text}"))
    if details():
        st.caption(md(breakable(_calibration_caption(method, judge_model, ensemble, embedder))))


def _read_cast(edited: pd.DataFrame, model_ids: list[str]) -> list[Participant]:
    """The cast table's rows as participants (a row without an id is left out); ValueError for a row that is
    not one, or for two participants with one id."""
    cast = []
    for r in edited.to_dict("records"):
        if not isinstance(r.get("id"), str) or not r["id"]:
            continue
        expertise = [e.strip() for e in str(r.get("expertise") or "").split(",") if e.strip()]
        cast.append(
            Participant(
                id=r["id"],
                model_id=r.get("model") or model_ids[0],
                answer_model=_text(r.get("answers with")),
                name=r.get("name") or r["id"],
                icon=r.get("icon") or "🙋",
                role=r.get("role") or "",
                expertise=expertise,
            )
        )
    if len({p.id for p in cast}) != len(cast):
        raise ValueError("participant ids must be unique")
    return cast


def _read_config(judge: dict[str, Any], knobs: dict[str, Any]) -> HandRaiseConfig:
    """The settings' values as the hand-raise config (ValueError for one it refuses)."""
    return HandRaiseConfig(
        weights=Weights(relevance=knobs["w_r"], novelty=knobs["w_n"], confidence=knobs["w_c"]),
        threshold=knobs["threshold"],
        mode=Mode(judge["mode"]),
        judge_method=judge["method"],
        judge_model=judge["judge_model"],
        likelihood_ensemble=list(judge["ensemble"]),
        embedder=judge["embedder"],
        cooldown_enabled=knobs["cooldown"],
        cooldown_per_turn=knobs["strength"],
        brainstorm_max_speakers=int(knobs["cap"]),
        brainstorm_auto_allow=float(knobs["auto_allow"]),
        over_raise_window=int(knobs["over_window"]),
        over_raise_level=float(knobs["over_level"]),
        over_raise_damping=float(knobs["over_damping"]),
        card_timeout_s=float(knobs["timeout"]) or None,
        timeout_action=knobs["action"],
        auto_approve_at=float(knobs["auto_at"]) or None,
    )


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


def judge_diagnosis(
    method: str, judge_model: str, ensemble: Sequence[str] = (), embedder: str = DEFAULT_EMBEDDER
) -> Diagnosis | None:
    """The diagnosis stored with the map the judge would read (measurable signal or not), None for a method
    without a map."""

    try:
        return map_choice(method, judge_model, ensemble, embedder=embedder).diagnosis
    except ValueError:
        return None


def judged_by(conv: Conversation) -> str:
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
    if not details():
        return plain
    return f"{plain} {caption}" + (f" — its recorded wills used calibration {', '.join(used)}" if stale else "")
