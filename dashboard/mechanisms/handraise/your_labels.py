"""The Hand raise chat's labels line: the map the likelihood judge reads, the Speak / Skip labels given so far,
and after every K new approvals the offer to refit the judge from them."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import state
from dashboard.components import md
from dashboard.labelling import current_user, refit_candidate, render_candidate
from dashboard.mechanisms.handraise.session import KEY
from engine.config import get_settings
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.judge import map_choice
from engine.labels import count_labels, list_labels, map_in_use
from engine.labels.refit import created_at


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


def render_your_labels(config: HandRaiseConfig) -> None:
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
