"""The Hand raise page's What-if tab: the whole conversation re-decided from its recorded components under
other settings (no model call), and how a map refitted from your labels would decide the hands already played."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import md, metric_row
from dashboard.labelling import answer_words
from dashboard.mechanisms.handraise.session import KEY
from dashboard.mechanisms.handraise.your_labels import map_id
from engine.handraise.conversation import Conversation
from engine.handraise.decisions import Action, HandStatus, Mode, Weights, changed_hands, redecide
from engine.handraise.label_refit import whatif_map


def render_whatif(conv: Conversation) -> None:
    """The What-if tab: the settings moved, the whole conversation re-decided (before / after), the hands that
    change; and, with a refitted map waiting, how it would decide."""
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
