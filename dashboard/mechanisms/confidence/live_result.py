"""The Live tab's result: the run it was recorded as, a note when the boxes changed since, the factors as they arrive,
what the judge read of the answer, the fallbacks in words, the score panel, your label of the answer and the sampled
answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import export_buttons
from dashboard.labelling import label_buttons, run_item
from dashboard.mechanisms.confidence.fields import DETAILS, KEY, SLIDERS
from dashboard.mechanisms.confidence.score import render_score
from dashboard.watch import Collected, watch_run
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.settings import DEFAULT_SETTINGS, ConfidenceSettings


def render_live_result(run_id: str, settings: ConfidenceSettings) -> None:
    """The evaluation `run_id` under the Live form: the factors as they arrive, then its export, what the judge
    read, the score panel with the fallbacks in words, your label of the answer and the sampled answers."""
    st.markdown(f"Recorded as run `{run_id}` (Runs page).")
    stale = stale_inputs(state.get_store().get_run(run_id))
    if stale:
        st.warning(f"This result is for an earlier {stale}: press Evaluate for the ones above.", icon="⚠️")
    view = watch_run(run_id, Collected, _render_factor_rows, key=KEY + "eval_watch")
    result = view.result if view is not None else None
    if not isinstance(result, dict):
        return
    export_buttons(state.get_store(), run_id, key=KEY + "export")
    run = state.get_store().get_run(run_id)
    self_eval = str((run.config if run is not None else {}).get("self_eval", "generate"))  # stored before: generate
    failed = [_fallback_detail(r, self_eval) for r in result["results"] if r["flagged"]]
    flagged = [str(r["name"]) for r in result["results"] if r["flagged"]]
    used = (run.config if run is not None else {}).get("settings") or {}  # the settings the run scored under
    floor = float(used.get("include_self_confidence_above", DEFAULT_SETTINGS.include_self_confidence_above))
    exempt = float(used.get("no_sources_exempt_self_confidence", DEFAULT_SETTINGS.no_sources_exempt_self_confidence))
    sourceless = not ConfidenceFactors(**result["factors"]).source_count
    reading = judge_reading(result["results"], floor, sourceless=sourceless, exempt=exempt)
    if reading:
        st.markdown(reading)  # numbers and fixed words only: nothing untrusted to escape
    render_score(ConfidenceFactors(**result["factors"]), settings, failed, key=KEY + "live", flagged=flagged)
    _render_answer_label(run_id)
    if result.get("samples"):
        with st.expander("Sampled answers"):
            for sample in result["samples"]:
                st.text(sample)


def stale_inputs(run: Any) -> str:
    """'' when the shown result was evaluated on the query, answer and sources now in the boxes, else which of
    them changed since (an example picked, a box edited): the result is not theirs."""
    config = run.config if run is not None else {}
    now = {
        "query": st.session_state.get(KEY + "live_query", ""),
        "answer": st.session_state.get(KEY + "live_answer", ""),
        "sources": [s for s in str(st.session_state.get(KEY + "live_sources", "")).splitlines() if s.strip()],
    }
    then = {
        "query": config.get("query", ""),
        "answer": config.get("answer", ""),
        "sources": [s for s in config.get("sources") or [] if str(s).strip()],
    }
    changed = [name for name in now if now[name] != then[name]]
    return " and ".join([", ".join(changed[:-1]), changed[-1]] if len(changed) > 1 else changed)


def judge_reading(
    results: Sequence[dict[str, Any]], floor: float, *, sourceless: bool = False, exempt: float | None = None
) -> str:
    """What the judge read of the answer, in one sentence: p(supported) beside the self-confidence it became on
    the seed's scale (only where the self-evaluation gave a calibrated probability, not a fallback)."""
    by_name = {str(r.get("name")): r for r in results}
    self_conf = by_name.get("llm_self_confidence") or {}
    p = self_conf.get("probability")
    if p is None or self_conf.get("flagged"):
        return ""
    value = float(self_conf.get("value") or 0.0)
    words = "as likely right as wrong" if 0.4 <= p <= 0.6 else ("likely right" if p > 0.6 else "likely wrong")
    coverage = by_name.get("query_coverage") or {}
    covers = (
        f"; it covers the question at {float(coverage.get('value') or 0.0):.2f}"
        if coverage and not coverage.get("flagged")
        else ""
    )
    sentence = (
        f"**The judge read p(supported) = {float(p):.2f}** ({words}), which is a self-confidence of {value:.2f} "
        f"on the seed's scale ({floor:g} + {1 - floor:g} × p){covers}."
    )
    if sourceless and exempt is not None:
        sentence += (
            f" Without sources that clears the seed's bar of {exempt:g} for going on the answer alone, so no "
            "no-sources penalty."
            if value >= exempt
            else f" Without sources the seed asks {exempt:g} to go on the answer alone: under it, the no-sources "
            "penalty applies."
        )
    return sentence


FALLBACK_TO = {  # factor → what it falls back to, in words
    "llm_self_confidence": "fell back to {value:g} (neutral)",
    "query_coverage": "fell back to {value:g} and is left out of the weighted mean",
    "sampling_consistency": "is not used (source agreement keeps its value)",
}


def _fallback_detail(result: dict[str, Any], self_eval: str = "generate") -> str:
    """A flagged factor in plain words: which factor, how it was judged, what it fell back to and why (from
    its flags and detail, `engine.confidence`'s FactorResult). Plain text: the page escapes it (`md`), as the
    reason can quote a model's or a server's message."""
    name = str(result.get("name", ""))
    label = SLIDERS.get(name, (name.replace("_", " ").capitalize(), ""))[0]
    if name == "llm_self_confidence":
        how = {"likelihood": "by likelihood", "signals": "read from SmolLM2's and the embedder's signals"}.get(
            self_eval, "written as JSON by the model"
        )
    elif name == "query_coverage":
        how = "read from the answer–question cosine" if self_eval == "signals" else "generated by the JSON judge"
    elif name == "sampling_consistency":
        how = "from sampled answers"
    else:
        how = ""
    flags = [str(f) for f in result.get("flags") or []]
    detail = str(result.get("detail") or "")
    fields = [f.removeprefix("invalid:") for f in flags if f.startswith("invalid:")]
    if "invalid:likelihood_features" in flags:
        why = "the likelihood features were not finite numbers (an option got no probability) — no usable signal"
    elif "truncated" in flags:
        why = "the model's answer was cut off at its token limit"
    elif fields:
        why = "the model's answer had no valid " + ", ".join(fields)
    elif name == "sampling_consistency":
        why = detail or "too few answers could be sampled"
    elif detail.startswith("fallback"):
        why = "the model call failed: " + detail.split(": ", 1)[-1]
    else:
        why = detail or "no reason recorded"
    what = FALLBACK_TO.get(name, "fell back to {value:g}").format(value=float(result.get("value") or 0.0))
    return f"{label}" + (f" ({how})" if how else "") + f" {what} — {why}"


def _render_answer_label(run_id: str) -> None:
    """Under the Live result, "the answer was right / wrong": your label of the evaluated answer, which the Labels
    page compares with what the score decided (a silent level trusts the answer: "right")."""
    item = run_item(run_id)
    if item is None:
        return
    st.markdown("**Was the answer right?**")
    label_buttons(
        "confidence",
        item.key,
        run_id=run_id,
        key=KEY + "live_label",
        context=item.context,
        prompt="Your judgment of the answer",
    )


def _render_factor_rows(view: Collected, live: bool) -> None:
    """The factors as they arrive (one `confidence_factor` event each), final once the run has ended."""
    rows = [
        {"factor": r["name"], "value": round(r["value"], 3), "fallback": r["flagged"], "detail": r["detail"]}
        for r in view.of("confidence_factor")
    ]
    if rows and not st.session_state.get(f"details.{DETAILS}", False):
        return  # the per-factor table (values, flags, the model's raw text) is research detail
    if rows:
        st.dataframe(
            pd.DataFrame(rows),
            hide_index=True,
            width="stretch",
            column_config={  # the factor pinned; the detail (why it fell back) takes the rest
                "factor": st.column_config.TextColumn("factor", pinned=True, width=150),
                "value": st.column_config.NumberColumn("value", width=60),
                "fallback": st.column_config.CheckboxColumn("fallback", width=70),
                "detail": st.column_config.TextColumn("detail", width="large"),
            },
        )
    elif live:
        st.caption("Computing the LLM and embedding factors…")
