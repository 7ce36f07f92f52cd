"""The Jury page's form: its session-state keys, the final methods, tie policies, consensus thresholds and
not-sure rates in words, the JURY_* defaults its widgets start at, and the seat editor's rows as the engine
reads them. It draws nothing itself: the panel (`panel`), the case picker (`case`) and the page (`page`) do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from engine.config import ConfigError
from engine.embeddings import EMBEDDERS
from engine.jury.config import JuryConfig

KEY = "jury."
FORM = KEY.removesuffix(".")  # its form's marker: "jury.form_for" names the run the form shows
RUN_PANEL = "as in the attached run"  # the seats of the run the page re-attached to, when no preset has them
# The final methods and tie policies in words (short: they fit a 185 px select box)
METHOD_CHOICES = {
    "auto": "Stack (auto)",
    "stack": "Stack",
    "majority_vote": "Majority vote",
    "weighted_average": "Weighted average",
    "final_judge": "Final judge",
}
TIE_WORDS = {
    "severe": "More severe",
    "lenient": "More lenient",
    "higher_score": "Higher mean score",
    "first": "First juror",
}
THRESHOLD_SHORT = {2.0: "no agreement stop", 1.0: "unanimity", 0.67: "2 of 3", 0.5: "majority"}  # fits the box
THRESHOLDS = {
    "2.0 — agreement never stops (the stagnation stop still can)": 2.0,
    "1.0 — only unanimity stops": 1.0,
    "0.67 — a 2-of-3 majority stops": 0.67,
    "0.5 — any strict majority stops": 0.5,
}


def init_state() -> None:
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "error", None)


AUTO = "auto (Jurors judge by)"  # a seat without a judge of its own: the 'Jurors judge by' setting


def seat_records(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The seat editor's rows as panel_seats reads them: empty cells '', the 'as the panel says' judge ''."""
    out = []
    for r in rows:
        row = {k: ("" if pd.isna(v) else str(v)) for k, v in r.items()}
        if row.get("judge") == AUTO:
            row["judge"] = ""
        out.append(row)
    return out


SELECTIVE = {
    "always decide": None,
    "10 % error": 0.1,
    "15 % error": 0.15,
    "20 % error": 0.2,
    "25 % error": 0.25,
    "30 % error": 0.3,
}


def selective_label(rate: float | None) -> str:
    """The option of a rate: a listed one, else its own ("12 % error"; a rate that '%' would round, to the
    digit: "0.1499999 error rate"), so a restored run's rate is not lost or changed."""
    if not rate:
        return "always decide"
    listed = next((k for k, v in SELECTIVE.items() if v == rate), None)
    if listed:
        return listed
    percent = f"{rate * 100:g}"
    return f"{percent} % error" if float(percent) / 100 == rate else f"{rate!r} error rate"


def selective_options(*rates: object) -> dict[str, float | None]:
    """The listed rates, plus a restored run's or JURY_SELECTIVE_ERROR's own (a label or a rate)."""
    out = dict(SELECTIVE)
    for rate in rates:
        if isinstance(rate, str) and rate.endswith((" % error", " error rate")) and rate not in out:
            try:
                value = (
                    float(rate.removesuffix(" % error")) / 100
                    if rate.endswith(" % error")
                    else float(rate.removesuffix(" error rate"))
                )
            except ValueError:
                continue
            if 0 < value < 1:
                out[rate] = value
        elif isinstance(rate, float) and 0 < rate < 1:
            out.setdefault(selective_label(rate), rate)
    return out


def env_config() -> JuryConfig:
    """The JURY_* settings, which the page's defaults follow where it has the control (a bad value: the built-in
    defaults; the CLI names the variable)."""
    try:
        return JuryConfig.from_env()
    except ConfigError:
        return JuryConfig()


def seat_models() -> list[str]:
    """What a seat may read with: the catalog's models and the embedders a neighbours seat uses."""
    return [*state.get_catalog().ids, *EMBEDDERS]
