"""Conversation: a multi-party chat where every participant's will to speak is judged before anyone
answers. Hands at or above the threshold appear as cards (icon, name, will, one-line reason) to approve
or skip, one by one or in batches, with a countdown when a timeout is set; approved participants answer
in parallel, streamed; skips show as a compact line. Charts, a what-if that re-decides the whole
conversation from the recorded components without calling a model, and tokens against the
"everyone answers" baseline."""

from __future__ import annotations

import queue
import time
from collections import Counter
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import state
from dashboard.components import md, plot_text, safe_avatar
from engine.events import EventBus, StoreSink
from engine.handraise import (
    DEFAULT_CAST,
    Action,
    Conversation,
    HandRaiseConfig,
    HandStatus,
    Mode,
    Participant,
    TurnState,
    Weights,
    changed_hands,
    failure_flags,
    redecide,
    skip_line,
)
from models.recording import call_context

KEY = "conv."
# The likelihood judge first: on the bundled model it scores best on the shipped benchmark (README).
METHODS = ["likelihood", "judge", "self", "hybrid", "embedding"]


def _init_state() -> None:
    st.session_state.setdefault(KEY + "conv", None)
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "log", [])  # what the chat shows: user lines, answers, skip lines
    st.session_state.setdefault(KEY + "deadline", None)
    st.session_state.setdefault(KEY + "error", None)


def render() -> None:
    _init_state()
    st.title("🙋 Conversation")
    st.caption("Before anyone answers, each participant's will to speak (relevance, novelty, confidence → will) is "
               "judged. Hands at or above the threshold become cards you approve or skip; @name and @all work "
               "anywhere in a message.")
    cast, config = _render_settings()
    conv: Conversation | None = st.session_state[KEY + "conv"]
    if conv is not None and (conv.config != config or [p.model_dump() for p in conv.participants.values()]
                             != [p.model_dump() for p in cast]):
        st.info("Settings changed: they apply from the next conversation (the What-if tab re-decides this one).")
    chat, charts_tab, whatif_tab, telemetry_tab, bench_tab = st.tabs(
        ["Chat", "Charts", "What-if", "Telemetry", "Judge benchmark"])
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
    with bench_tab:
        render_benchmark(config)


# -- settings --------------------------------------------------------------------------------------------------


def _render_settings() -> tuple[list[Participant], HandRaiseConfig]:
    catalog = state.get_catalog()
    with st.expander("Participants and settings", expanded=st.session_state[KEY + "conv"] is None):
        rows = [{"id": p.id, "model": p.model_id, "name": p.name, "icon": p.icon, "expertise": ", ".join(p.expertise),
                 "role": p.role} for p in DEFAULT_CAST]
        edited = st.data_editor(pd.DataFrame(rows), num_rows="dynamic", width="stretch", key=KEY + "cast",
                                column_config={"model": st.column_config.SelectboxColumn("model", options=catalog.ids,
                                                                                         required=True)})
        c1, c2, c3, c4 = st.columns(4)
        mode = c1.selectbox("Mode", [m.value for m in Mode], key=KEY + "mode",
                            help="focus: you approve; brainstorm: will above the auto-allow level is approved "
                                 "(up to the cap); mention_only: only @mentioned participants answer")
        method = c1.selectbox("Judge method", METHODS, key=KEY + "method")
        judge_model = c1.selectbox("Judge model", catalog.ids, key=KEY + "judge_model",
                                   disabled=method not in ("judge", "hybrid", "likelihood"))
        c1.caption(md(_calibration_caption(method, judge_model)))
        threshold = c2.slider("Threshold", 0.0, 1.0, 0.6, 0.05, key=KEY + "threshold")
        w_r = c2.slider("Weight: relevance", 0.0, 1.0, 0.5, 0.05, key=KEY + "w_r")
        w_n = c2.slider("Weight: novelty", 0.0, 1.0, 0.3, 0.05, key=KEY + "w_n")
        w_c = c2.slider("Weight: confidence", 0.0, 1.0, 0.2, 0.05, key=KEY + "w_c")
        cooldown = c3.toggle("Cooldown", value=True, key=KEY + "cooldown")
        strength = c3.slider("Cooldown per turn spoken", 0.0, 0.5, 0.1, 0.05, key=KEY + "strength")
        cap = c3.number_input("Brainstorm: max auto speakers", 1, 10, 2, key=KEY + "cap")
        timeout = c4.number_input("Card timeout (s, 0 = none)", 0, 600, 0, key=KEY + "timeout")
        action = c4.selectbox("On timeout", ["skip", "approve"], key=KEY + "timeout_action")
        auto_at = c4.number_input("Standing auto-approve at will ≥ (0 = off)", 0.0, 1.0, 0.0, 0.05,
                                  key=KEY + "auto_at")
    try:
        cast = []
        for r in edited.to_dict("records"):
            if not isinstance(r.get("id"), str) or not r["id"]:
                continue
            expertise = [e.strip() for e in str(r.get("expertise") or "").split(",") if e.strip()]
            cast.append(Participant(id=r["id"], model_id=r.get("model") or catalog.ids[0],
                                    name=r.get("name") or r["id"], icon=r.get("icon") or "🙋",
                                    role=r.get("role") or "", expertise=expertise))
        if len({p.id for p in cast}) != len(cast):
            raise ValueError("participant ids must be unique")
        config = HandRaiseConfig(
            weights=Weights(relevance=w_r, novelty=w_n, confidence=w_c), threshold=threshold, mode=Mode(mode),
            judge_method=method, judge_model=judge_model, cooldown_enabled=cooldown, cooldown_per_turn=strength,
            brainstorm_max_speakers=int(cap), card_timeout_s=float(timeout) or None, timeout_action=action,
            auto_approve_at=float(auto_at) or None)
    except ValueError as exc:
        st.error(f"Settings: {md(exc, inline=False)}")
        st.stop()
    return cast, config


def _calibration_caption(method: str, judge_model: str) -> str:
    """Which fitted map turns the judge's raw scores into will components (trusted text: file metadata)."""
    from engine.handraise import EMBEDDER_ID, EMBEDDING
    from engine.judgemaps import load_calibration
    from engine.likelihood import HANDRAISE

    if method not in ("likelihood", "embedding"):
        return "Calibration: none (the judge writes its numbers)"
    name, model = (HANDRAISE, judge_model) if method == "likelihood" else (EMBEDDING, EMBEDDER_ID)
    try:
        cal = load_calibration(name, model)
    except ValueError as exc:
        return f"Calibration: unreadable ({exc})"
    if cal is None:
        return f"Calibration: none for {model} — uncalibrated scores, flagged"
    return f"Calibration: {cal.label} (fitted on {cal.fitted_on}, {cal.n_items} rows)"


# -- chat ------------------------------------------------------------------------------------------------------


def _new_conversation(cast: list[Participant], config: HandRaiseConfig) -> Conversation:
    store = state.get_store()
    run = store.create_run("handraise.conversation", {"participants": [p.model_dump() for p in cast],
                                                      "config": config.model_dump(mode="json")},
                           name="conversation")
    bus = EventBus(run.id, [StoreSink(store)])
    st.session_state[KEY + "run_id"] = run.id
    st.session_state[KEY + "log"] = []
    hub = state.get_hub()
    conv = Conversation(cast, hub.get, config, emit=bus.emit)
    st.session_state[KEY + "conv"] = conv
    state.clear_reads()
    return conv


def _run(coro: Any, purpose: str) -> Any:
    run_id = st.session_state[KEY + "run_id"]

    async def attributed() -> Any:
        with call_context(run_id=run_id, purpose=purpose):
            return await coro

    return state.get_loop().run(attributed(), timeout=900)


def _render_chat(cast: list[Participant], config: HandRaiseConfig) -> None:
    conv: Conversation | None = st.session_state[KEY + "conv"]
    top = st.columns([1, 1, 4])
    if top[0].button("New conversation", key=KEY + "new", disabled=conv is None):
        if st.session_state[KEY + "run_id"]:
            state.get_store().finish_run(st.session_state[KEY + "run_id"], summary=_summary(conv))
        st.session_state[KEY + "conv"] = None
        st.rerun()
    icons = {p.id: p.icon for p in (conv.participants.values() if conv else cast)}
    names = {p.id: p.name for p in (conv.participants.values() if conv else cast)}
    # Messages, answers, names, icons and reasons are all untrusted: text, or escaped inside trusted markdown.
    for item in st.session_state[KEY + "log"]:
        if item["kind"] == "user":
            st.chat_message("user").text(item["text"])
        elif item["kind"] == "answer":
            with st.chat_message("assistant", avatar=safe_avatar(icons.get(item["pid"]))):
                st.markdown(f"**{md(names.get(item['pid'], item['pid']))}**")
                st.text(item["text"] or "(no answer)")
                if item.get("error"):
                    st.error(md(item["error"], inline=False))
        else:
            st.caption(md(f"{icons.get(item['pid'], '')} {names.get(item['pid'], item['pid'])} — {item['text']}"))
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    current: TurnState | None = conv.states[-1] if conv and conv.states and not conv.states[-1].answered else None
    if conv is not None and current is not None:
        _render_cards(conv, current)
    prompt = st.chat_input("Message the group (try @all or @coder)", key=KEY + "input", disabled=current is not None)
    if prompt:
        handle_message(prompt, cast, config)
        st.rerun()


def handle_message(text: str, cast: list[Participant], config: HandRaiseConfig) -> None:
    conv = st.session_state[KEY + "conv"] or _new_conversation(cast, config)
    st.session_state[KEY + "error"] = None
    st.session_state[KEY + "log"].append({"kind": "user", "text": text})
    try:
        turn = _run(conv.user_message(text), f"handraise.judge:{conv.config.judge_method}")
    except Exception as exc:  # the message stays in the log; the failure is shown, nothing recorded is lost
        st.session_state[KEY + "error"] = f"The will judgment failed: {exc}"
        return
    st.session_state[KEY + "deadline"] = (time.monotonic() + conv.config.card_timeout_s
                                          if conv.config.card_timeout_s else None)
    if not turn.waiting:
        answer_turn(conv, turn)


def _render_cards(conv: Conversation, turn: TurnState) -> None:
    deadline = st.session_state[KEY + "deadline"]
    if deadline is not None and time.monotonic() >= deadline:
        conv.timeout(turn)
        answer_turn(conv, turn)
        st.rerun()
    st.markdown("**Hands up** — approve who speaks")
    for hand in turn.waiting:
        p = conv.participants[hand.model]
        with st.container(border=True):
            left, right = st.columns([5, 2])
            left.markdown(f"🙋 {md(p.icon)} **{md(p.name)}** wants to speak (will: **{hand.will:.2f}**, reason: "
                          f"{md(hand.reason or '—')})")
            if failure_flags(hand.flags):
                left.caption("⚠ judgment failed, fallback used: " + md(", ".join(failure_flags(hand.flags))))
            if hand.cooldown_delta or hand.over_raise_factor != 1:
                left.caption(f"raw {hand.raw_will:.2f}, cooldown {hand.cooldown_delta:+.2f}, "
                             f"over-raise ×{hand.over_raise_factor:g}")
            a, b = right.columns(2)
            if a.button("Speak", key=f"{KEY}approve.{turn.turn_id}.{hand.model}", type="primary"):
                conv.act(turn, hand.model, "approve")
                _after_decision(conv, turn)
            if b.button("Skip", key=f"{KEY}skip.{turn.turn_id}.{hand.model}"):
                conv.act(turn, hand.model, "skip")
                _after_decision(conv, turn)
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    if c1.button("Approve all", key=f"{KEY}all.{turn.turn_id}"):
        conv.batch(turn, "approve_all")
        _after_decision(conv, turn)
    if c2.button("Skip all", key=f"{KEY}none.{turn.turn_id}"):
        conv.batch(turn, "skip_all")
        _after_decision(conv, turn)
    at = c4.number_input("Auto-approve will ≥", 0.0, 1.0, 0.8, 0.05, key=f"{KEY}at.{turn.turn_id}")
    if c3.button("Apply ≥ X", key=f"{KEY}atgo.{turn.turn_id}"):
        conv.batch(turn, "auto_at", at)
        _after_decision(conv, turn)
    if deadline is not None:
        left = max(0.0, deadline - time.monotonic())
        st.caption(f"⏳ {left:.0f} s left, then every waiting card is {conv.config.timeout_action}ped")
        time.sleep(min(1.0, left))
        st.rerun()


def _after_decision(conv: Conversation, turn: TurnState) -> None:
    if not turn.waiting:
        answer_turn(conv, turn)
    st.rerun()


def answer_turn(conv: Conversation, turn: TurnState) -> None:
    """Approved participants answer in parallel; their text streams into chat bubbles."""
    approved = [m for m, r in turn.resolved.items() if r.approved]
    chunks: queue.Queue[tuple[str, str] | None] = queue.Queue()
    bubbles = {}
    for pid in approved:
        p = conv.participants[pid]
        with st.chat_message("assistant", avatar=safe_avatar(p.icon)):
            st.markdown(f"**{md(p.name)}**")
            bubbles[pid] = st.empty()

    run_id = st.session_state[KEY + "run_id"]  # read here: session state belongs to the script thread

    async def go() -> TurnState:
        try:
            with call_context(run_id=run_id, purpose="handraise.answer"):
                return await conv.answer(turn, on_chunk=lambda pid, text: chunks.put((pid, text)))
        finally:
            chunks.put(None)

    future = state.get_loop().submit(go())
    texts: dict[str, str] = {pid: "" for pid in approved}
    while True:
        try:
            item = chunks.get(timeout=0.5)
        except queue.Empty:
            if future.done():
                break
            continue
        if item is None:
            break
        pid, text = item
        texts[pid] += text
        bubbles[pid].text(texts[pid] + "▌")  # streamed as text: an answer's markdown is not rendered
    try:
        future.result(timeout=60)
    except Exception as exc:
        st.session_state[KEY + "error"] = f"Answering failed: {exc}"
        return
    log = st.session_state[KEY + "log"]
    for h in turn.hands:
        r = turn.resolved[h.model]
        if r.approved:
            log.append({"kind": "answer", "pid": h.model, "text": turn.answers.get(h.model, ""),
                        "error": turn.answer_errors.get(h.model)})
        elif h.status != HandStatus.NOT_JUDGED:
            log.append({"kind": "skip", "pid": h.model, "text": skip_line(h)
                        + (f" · {r.by}" if r.by != "mode" else "")})
    st.session_state[KEY + "deadline"] = None
    state.clear_reads()


def _summary(conv: Conversation | None) -> dict[str, Any]:
    if conv is None:
        return {}
    return {"turns": len(conv.states), "answers": sum(len(s.answers) for s in conv.states), **token_figures(conv)}


# -- charts, what-if, tokens ----------------------------------------------------------------------------------


def token_figures(conv: Conversation) -> dict[str, Any]:
    """Tokens spent (judgments + answers) against the baseline in which every participant answers every
    turn; a participant that did not answer is counted at the mean answer length of this conversation."""
    judge = sum(s.judge_call.prompt_tokens + s.judge_call.completion_tokens for s in conv.states)
    answers = [t for s in conv.states for t in s.answer_tokens.values()]
    spent_answers = sum(answers)
    mean_answer = spent_answers / len(answers) if answers else 0.0
    slots = sum(len(conv.participants) for s in conv.states if s.answered)
    baseline = spent_answers + mean_answer * (slots - len(answers))
    return {"judge_tokens": judge, "answer_tokens": spent_answers, "spent_tokens": judge + spent_answers,
            "baseline_tokens": round(baseline), "answers": len(answers), "baseline_answers": slots}


def render_charts(conv: Conversation) -> None:
    df = pd.DataFrame(conv.telemetry)
    figures = token_figures(conv)
    m1, m2, m3 = st.columns(3)
    m1.metric("Tokens spent (judge + answers)", figures["spent_tokens"])
    m2.metric("'Everyone answers' baseline", figures["baseline_tokens"],
              help="Answer tokens if every participant had answered every turn (missing ones at this "
                   "conversation's mean answer length); no judgment cost.")
    m3.metric("Answers given / baseline", f"{figures['answers']} / {figures['baseline_answers']}")
    c1, c2 = st.columns(2)
    fig = go.Figure()
    for pid, rows in df.groupby("participant", sort=False):
        fig.add_trace(go.Scatter(x=rows["turn"], y=rows["will"], mode="lines+markers", name=plot_text(pid)))
    fig.add_hline(y=conv.config.threshold, line_dash="dot", annotation_text="threshold")
    fig.update_layout(title="Will per participant per turn", height=320, yaxis_range=[0, 1])
    c1.plotly_chart(fig, key=KEY + "will_chart")
    c2.plotly_chart(sankey(df), key=KEY + "sankey")
    hist = go.Figure()
    for pid, rows in df.groupby("participant", sort=False):
        over = rows["flags"].str.contains("over_raise").any()
        hist.add_trace(go.Histogram(x=rows["will"], name=plot_text(pid) + (" ⚠ over-raise" if over else ""),
                                    xbins={"start": 0, "end": 1, "size": 0.1}, opacity=0.7))
    hist.update_layout(barmode="overlay", title="Will distribution per participant", height=300)
    st.plotly_chart(hist, key=KEY + "hist")


def sankey(df: pd.DataFrame) -> go.Figure:
    """Raised → approved / skipped / timed out → answered; lowered hands go straight to 'not raised'."""
    flows: Counter[tuple[str, str]] = Counter()
    for row in df.itertuples():
        start = "raised" if row.status in ("raised", "mentioned") else "not raised"
        middle = ("timeout" if row.decided_by == "timeout" else "approved" if row.allowed else "skipped")
        flows[(start, middle)] += 1
        if row.allowed:
            flows[(middle, "answered")] += 1
    labels = ["raised", "not raised", "approved", "skipped", "timeout", "answered"]
    index = {label: i for i, label in enumerate(labels)}
    fig = go.Figure(go.Sankey(node={"label": labels}, link={
        "source": [index[a] for a, _ in flows], "target": [index[b] for _, b in flows], "value": list(flows.values())}))
    fig.update_layout(title="Approval flow", height=320)
    return fig


def render_whatif(conv: Conversation) -> None:
    st.caption("Move the settings: the whole conversation is re-decided from its recorded components (no model "
               "call). A card you never saw counts as skipped; your recorded decisions stand.")
    c1, c2, c3, c4 = st.columns(4)
    threshold = c1.slider("Threshold", 0.0, 1.0, conv.config.threshold, 0.05, key=KEY + "wi_threshold")
    mode = c1.selectbox("Mode", [m.value for m in Mode], index=[m.value for m in Mode].index(conv.config.mode.value),
                        key=KEY + "wi_mode")
    w_r = c2.slider("Relevance weight", 0.0, 1.0, conv.config.weights.relevance, 0.05, key=KEY + "wi_wr")
    w_n = c2.slider("Novelty weight", 0.0, 1.0, conv.config.weights.novelty, 0.05, key=KEY + "wi_wn")
    w_c = c3.slider("Confidence weight", 0.0, 1.0, conv.config.weights.confidence, 0.05, key=KEY + "wi_wc")
    strength = c3.slider("Cooldown per turn", 0.0, 0.5, conv.config.cooldown_per_turn, 0.05, key=KEY + "wi_cd")
    actions: list[Action] = ["skip", "approve"]
    unrecorded = c4.selectbox("Cards you never saw", actions, key=KEY + "wi_unrecorded") or "skip"
    try:
        cfg = conv.config.model_copy(update={
            "threshold": threshold, "mode": Mode(mode), "cooldown_per_turn": strength,
            "weights": Weights(relevance=w_r, novelty=w_n, confidence=w_c)})
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
    m1, m2, m3 = st.columns(3)
    m1.metric("Hands raised", raised[1], raised[1] - raised[0])
    m2.metric("Answers", spoke[1], spoke[1] - spoke[0])
    m3.metric("Hands that change", len(changes))
    st.caption(f"Re-decided {sum(len(o.hands) for o in after)} hands in {elapsed:.1f} ms.")
    if changes:
        st.dataframe(pd.DataFrame(changes), hide_index=True, width="stretch")


# -- the judge benchmark, with the context ablation side by side ------------------------------------------------


def benchmark_path() -> Any:
    from engine.config import get_settings

    return get_settings().data_dir / "benchmarks" / "handraise.jsonl"


def stored_evals() -> pd.DataFrame:
    """Every stored benchmark run with its totals (as computed from its per-item lines)."""
    store = state.get_store()
    rows = []
    for r in store.list_runs(kind="handraise.eval", limit=200):
        if r.status != "finished":
            continue
        cfg, totals = r.config, r.summary
        rows.append({"run": r.id, "method": cfg.get("method"), "context": cfg.get("context"),
                     "repeat": cfg.get("repeat"), "items": cfg.get("items"), **{
                         k: totals.get(k) for k in ("accuracy", "precision", "recall", "f1", "consistency",
                                                    "median_latency_s", "tokens_per_decision",
                                                    "cost_per_decision", "cost_total")}})
    return pd.DataFrame(rows)


def render_benchmark(config: HandRaiseConfig) -> None:
    from engine.handraise import ContextMode, parse_benchmark, run_benchmark

    st.caption("The labelled dialogues of data/benchmarks/handraise.jsonl, judged with the method and settings "
               "above, once per context size: the last 1, 3 or 5 turns, or a summary plus the last turn.")
    c1, c2, c3 = st.columns(3)
    options: list[ContextMode] = ["1", "3", "5", "summary"]
    contexts = c1.multiselect("Contexts", options, default=options, key=KEY + "b_contexts")
    repeat = c2.number_input("Repeats", 1, 10, 1, key=KEY + "b_repeat")
    limit = c3.number_input("Items (0 = all)", 0, 500, 0, key=KEY + "b_limit")
    if st.button("Run the ablation", key=KEY + "b_run", disabled=not contexts):
        try:
            items = parse_benchmark(benchmark_path().read_text(encoding="utf-8"), str(benchmark_path()))
        except (OSError, ValueError) as exc:
            st.error(md(exc, inline=False))
            return
        items = items[:int(limit)] if limit else items
        hub = state.get_hub()
        progress = st.progress(0.0, text="judging…")
        for i, context in enumerate(contexts):
            state.get_loop().run(run_benchmark(state.get_store(), items, hub.get, config, context, int(repeat)),
                                 timeout=3600)
            progress.progress((i + 1) / len(contexts), text=f"context {context} done")
        state.clear_reads()
    table = stored_evals()
    if table.empty:
        st.info("No benchmark runs stored yet (here or with `judgelab handraise eval`).")
        return
    latest = table.drop_duplicates(subset=["method", "context"], keep="first")
    st.markdown("**Latest run per method and context** (each figure from its run's per-item lines)")
    st.dataframe(latest, hide_index=True, width="stretch", column_config={
        "cost_per_decision": st.column_config.NumberColumn("$ per decision", format="$%.6f"),
        "cost_total": st.column_config.NumberColumn("$ total", format="$%.6f")})
    metrics = ["accuracy", "precision", "recall", "f1", "consistency"]
    fig = go.Figure()
    for row in latest.itertuples():
        fig.add_trace(go.Bar(name=plot_text(f"{row.method} · {row.context}"), x=metrics,
                             y=[getattr(row, m) if getattr(row, m) is not None else 0 for m in metrics]))
    fig.update_layout(barmode="group", title="Context ablation", height=320, yaxis_range=[0, 1])
    st.plotly_chart(fig, key=KEY + "ablation")
