"""The Skip cache page's two tabs under a finished simulation: the per-conversation timeline (a conversation's
messages, judgments and skip windows, and your label of one of its messages) and the calls-saved vs. delay
trade-off the run swept (its Pareto front, and with Details on its raw table)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard.labelling import label_buttons
from dashboard.mechanisms.skip import charts
from dashboard.mechanisms.skip.fields import DETAILS, KEY
from dashboard.text import scope_words
from engine.labels import item_key


def render_timeline(result: dict[str, Any]) -> None:
    messages = pd.DataFrame(result["messages"])
    if messages.empty:
        return
    messages["scope"] = messages["channel_id"] + ":" + messages["thread_ts"].fillna("top")
    counts = messages["scope"].value_counts()
    scope = st.selectbox(
        "Conversation",
        counts.index.tolist(),
        key=KEY + "scope",
        format_func=lambda s: f"{scope_words(s)} ({counts[s]} messages)",
    )
    st.plotly_chart(charts.skip_scope_timeline(scope, result["messages"], result["judgments"], result["timeline"]))
    _render_reply_label(result, scope)


def _render_reply_label(result: dict[str, Any], scope: str) -> None:
    """Your label of one message of the conversation shown, "should have replied / should not", which the Labels
    page compares with what the judge decided for it (when it judged that message)."""
    messages = [m for m in result["messages"] if f"{m['channel_id']}:{m['thread_ts'] or 'top'}" == scope]
    if not messages:
        return
    with st.expander("Your label: should the bot have replied?", expanded=False):
        index = st.selectbox(
            "Message",
            range(len(messages)),
            key=KEY + "label_message." + scope,
            format_func=lambda i: f"{i + 1}. {messages[i]['author']}: {str(messages[i]['text'])[:80]}",
        )
        message = messages[index]
        st.text(str(message["text"]))
        judged = next((j for j in result.get("judgments") or [] if j.get("target") == message["id"]), None)
        context: dict[str, Any] = {"judge": "skip.simulate", "author": message.get("author")}
        if judged is not None:  # the judge looked at this message: what it decided, so the agreement view counts it
            context |= {
                "predicted": "reply" if judged.get("should_respond") else "no_reply",
                "confidence": judged.get("confidence"),
            }
            said = "reply" if judged.get("should_respond") else "stay silent"
            st.caption(f"The judge decided: {said} (confidence {float(judged.get('confidence') or 0):.2f}).")
        else:
            st.caption("The judge did not judge this message itself (it judged a later one of the conversation).")
        label_buttons(
            "skip",
            item_key("skip", scope=scope, message=message["id"]),
            run_id=result["run_id"],
            key=KEY + "label." + scope,
            context=context,
            prompt="Should the bot have replied to this message?",
        )


def few_points_note(rows: list[dict[str, Any]], messages: int) -> str | None:
    """Why the trade-off chart has few points, when the swept settings give fewer than three outcomes."""
    outcomes = {(r["judge calls"], r["staleness p95 s"]) for r in rows}
    if len(outcomes) >= 3:
        return None
    return (
        f"The {len(rows)} skip settings give only {len(outcomes)} different outcome(s): with {messages} messages, "
        "conversations rarely go quiet long enough for the skip window to matter. Simulate more hours or channels "
        "to spread the points."
    )


def render_tradeoff(result: dict[str, Any]) -> None:
    st.caption(
        "Each point re-runs the workload under other skip seconds with the judgments this run recorded "
        "(no new model calls). A new message always invalidates the cache, so first-judgment delay stays "
        "within min wait + one interval; what long skip windows cost is staleness: how old the judgment "
        "was whenever a waiting conversation was skipped. Fewer calls and less staleness are both better: "
        "the line is the Pareto front."
    )
    rows = result.get("sweep") or []
    if not rows:  # a run stored before the simulation swept its own grid: the page computes nothing itself
        st.info("This run was stored without its trade-off sweep: simulate again to see it.")
        return
    frame = pd.DataFrame(rows)
    if (note := few_points_note(rows, len(result["messages"]))) is not None:
        st.info(note)
    st.plotly_chart(charts.skip_tradeoff(rows))
    if st.session_state.get(f"details.{DETAILS}", False):
        st.dataframe(frame, hide_index=True, width="stretch")
