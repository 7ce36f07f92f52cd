"""Runs: every recorded run, its events and each LLM call it made (request, raw text, parsed, cost)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import md, money

KEY = "runs."


def _init_state() -> None:
    wanted = st.query_params.get("run")
    if wanted and st.session_state.get(KEY + "selected") is None:
        st.session_state[KEY + "selected"] = wanted
    st.session_state.setdefault(KEY + "selected", None)


def render() -> None:
    _init_state()
    st.title("🗂️ Runs")
    st.caption("Everything the engine ran, newest first. Pick a run to see its events and every LLM call.")
    rows = state.list_runs()
    if not rows:
        st.info("No runs recorded yet. Send a prompt on the Models page, or run `judgelab models check gemma3-270m`.")
        return
    kinds = sorted({r["kind"] for r in rows})
    chosen = st.multiselect("Kinds", kinds, default=kinds, key=KEY + "kinds")
    shown = [r for r in rows if r["kind"] in chosen]
    _render_table(shown)
    selected = st.session_state[KEY + "selected"]
    if selected:
        st.divider()
        _render_run(selected)


def _render_table(rows: list[dict[str, Any]]) -> None:
    frame = pd.DataFrame(rows)
    event = st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key=KEY + "table",
        on_select="rerun",
        selection_mode="single-row",
        column_config={
            "cost_usd": st.column_config.NumberColumn("cost", format="$%.6f"),
            "would_cost_usd": st.column_config.NumberColumn(
                "would have cost", format="$%.6f", help="Replayed runs spend nothing: what the recorded calls cost"),
            "duration_s": st.column_config.NumberColumn("duration", format="%.2f s"),
            "started": st.column_config.DatetimeColumn("started", format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    picked = getattr(getattr(event, "selection", None), "rows", None) or []
    if picked:
        handle_select(frame.iloc[picked[0]]["run"])
    ids = frame["run"].tolist()
    current = st.session_state[KEY + "selected"]
    st.selectbox(
        "Run", ids, index=ids.index(current) if current in ids else None, key=KEY + "pick",
        placeholder="choose a run…", on_change=handle_pick,
    )


def _render_run(run_id: str) -> None:
    store = state.get_store()
    run = store.get_run(run_id)
    if run is None:
        st.warning(f"No run {md(run_id)}.")
        return
    totals = store.run_totals([run_id]).get(run_id, {})
    st.subheader(f"{md(run.kind)} · {md(run.id)}")
    if run.name:
        st.caption(md(run.name))
    cols = st.columns(6)
    cols[0].metric("Status", run.status)
    cols[1].metric("Duration", f"{run.duration_s:.2f} s" if run.duration_s is not None else "running")
    cols[2].metric("LLM calls", int(totals.get("calls", 0)))
    cols[3].metric("Errors", int(totals.get("errors", 0)))
    cols[4].metric("Tokens", int(totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0)))
    would = totals.get("would_cost")
    cols[5].metric("Cost", money(totals.get("cost", 0.0)),
                   None if would is None else f"replayed: would have cost {money(would)}", delta_color="off")
    if run.error:
        st.error(md(run.error, inline=False))
    left, right = st.columns(2)
    with left:
        st.markdown("**Config**")
        st.json(run.config, expanded=False)
    with right:
        st.markdown("**Summary**")
        st.json(run.summary, expanded=False)
    _render_events(run_id)
    _render_calls(run_id)


def _render_events(run_id: str) -> None:
    events = state.get_store().events(run_id)
    st.markdown(f"**Events** ({len(events)})")
    if events:
        st.dataframe(
            pd.DataFrame(
                [
                    {"seq": e.seq, "type": e.type, "time": e.ts,
                     "payload": json.dumps(e.payload, ensure_ascii=False)[:200]}
                    for e in events
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def _render_calls(run_id: str) -> None:
    calls = state.get_store().calls(run_id)
    st.markdown(f"**LLM calls** ({len(calls)})")
    for call in calls:
        status = f"❌ {md(call.error_type)}" if call.error else "✅"
        label = (
            f"#{call.id} · {md(call.model_id)} · {md(call.purpose)} · {status} · "
            f"{call.prompt_tokens}+{call.completion_tokens} tokens · {call.latency_s:.2f} s · {md(money(call.cost))}"
            + ("" if call.would_cost is None else f" (replayed: would have cost {md(money(call.would_cost))})")
        )
        with st.expander(label):
            request = json.loads(call.request_json)
            for message in request.get("messages", []):
                st.markdown(f"*{md(message.get('role'))}*")
                st.text(message.get("content"))
            if call.error:
                st.error(md(call.error, inline=False))
            st.markdown("*raw text*")
            st.code(call.raw_text or "", language="json" if request.get("json_schema") else None)
            if call.parsed_json:
                st.markdown("*parsed*")
                st.json(json.loads(call.parsed_json))
            flags = json.loads(call.flags_json or "[]")
            if flags:
                st.caption("flags: " + md(", ".join(map(str, flags))))


def handle_select(run_id: str) -> None:
    st.session_state[KEY + "selected"] = run_id
    st.query_params["run"] = run_id


def handle_pick() -> None:
    picked = st.session_state.get(KEY + "pick")
    if picked:
        handle_select(picked)
