"""Display helpers shared by pages: exports, metric rows, the Details toggle (the jury's view of a run is the jury's:
`dashboard.mechanisms.jury.view`). The text helpers
(`md`, `plot_text`, the identifiers in words) live in `dashboard.text` and are re-exported here; untrusted text
reaches markdown only through `md` and figures only through `plot_text` (see there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import streamlit as st

from dashboard.report import report_of
from dashboard.text import (
    BADGE,
    CONSENSUS_WORDS,
    METHOD_WORDS,
    STOP_WORDS,
    VERDICT_WORDS,
    WORD_JOINER,
    ZERO_WIDTH_SPACE,
    breakable,
    duration,
    in_words,
    md,
    method_words,
    money,
    plot_text,
    safe_avatar,
)
from engine import exports, judgemaps

if TYPE_CHECKING:
    from engine.store import Store

# The text helpers live in dashboard.text; the pages still find them here.
__all__ = [
    "BADGE",
    "CONSENSUS_WORDS",
    "GLOSSARY",
    "METHOD_WORDS",
    "STOP_WORDS",
    "VERDICT_WORDS",
    "WORD_JOINER",
    "ZERO_WIDTH_SPACE",
    "breakable",
    "calibration_note",
    "details_on",
    "duration",
    "export_buttons",
    "export_file",
    "flow_columns",
    "in_words",
    "md",
    "method_words",
    "metric_row",
    "money",
    "plot_text",
    "run_usage",
    "safe_avatar",
    "stream_as_text",
]


def calibration_note(name: str, model_id: str) -> str:
    """Which fitted map a likelihood judge uses: "calibration <name · model · version> (cross-validated AUC x
    on its split)", or that the model has none and the judge runs uncalibrated."""
    cal = judgemaps.load_calibration(name, model_id)
    if cal is None:
        return "no fitted map for this model — uncalibrated"
    auc = cal.metrics.get("cv_auc")
    fallback = f" — the adopted map cannot be used ({cal.fallback}): the shipped one is read" if cal.fallback else ""
    return (
        f"calibration {cal.label}"
        + (f" (cross-validated AUC {auc} on its split)" if auc is not None else "")
        + fallback
    )


def metric_row(metrics: Sequence[tuple[str, Any] | dict[str, Any]], *, key: str | None = None) -> None:
    """A row of `st.metric`s that wraps onto the next line when the page is narrow, instead of squeezing each
    into a fixed column until its label and value are cut ('Judge calls witho…'). Each metric is a (label,
    value) pair or the keyword arguments of `st.metric`; each takes the width of its content. Labels are
    trusted text (a value is shown as written)."""

    with st.container(horizontal=True, wrap=True, gap="medium", key=key):
        for metric in metrics:
            kwargs = dict(metric) if isinstance(metric, dict) else {"label": metric[0], "value": metric[1]}
            st.metric(**kwargs, width="content")


def flow_columns(count: int, width: int = 200) -> list[Any]:
    """`count` columns of `width` pixels side by side that wrap onto the next line when the page is narrow,
    where `st.columns` would squeeze them until their labels and values are cut ('final_ju…', 'P…')."""

    row = st.container(horizontal=True, wrap=True, gap="medium")
    return [row.container(width=width) for _ in range(count)]


def stream_as_text(pieces: Iterable[str], placeholder: Any, cursor: str = "▌") -> str:
    """Show a streamed answer as plain text while it arrives (`st.write_stream` would render markdown)."""
    text = ""
    for piece in pieces:
        text += piece
        placeholder.text(text + cursor)
    placeholder.text(text)
    return text


def export_file(store: Store, run_id: str, fmt: str) -> bytes:
    """One export of a stored run, built from the store when asked: `csv` (every table, zipped), `json`,
    `html` (the self-contained report) or `csv:TABLE` (one table)."""

    record = exports.load_run(store, run_id)
    if fmt == "json":
        return exports.run_json(record).encode("utf-8")
    if fmt == "html":
        return report_of(record).encode("utf-8")
    if fmt.startswith("csv:"):
        return exports.table_csv(record, fmt.removeprefix("csv:"))
    return exports.csv_zip(record)


def export_buttons(store: Store, run_ids: str | Sequence[str | None] | None, *, key: str = "export") -> None:
    """Download buttons for a run the page shows: CSV of its tables (zip), the whole run as JSON, and the
    self-contained HTML report. Files are built only when a button is clicked, from the stored run, and the
    click does not rerun the page. Given several runs (a page with several results), a picker chooses one."""

    ids = [run_ids] if isinstance(run_ids, str) else [r for r in (run_ids or []) if r]
    if not ids:
        return
    with st.container(border=True):
        run_id = ids[0] if len(ids) == 1 else st.selectbox("Export run", ids, key=f"{key}.pick")
        st.caption(f"Export run {md(run_id)} — built from the stored run, keys redacted")
        files = (
            ("⬇ CSV tables (zip)", "csv", ".zip", "application/zip"),
            ("⬇ JSON (whole run)", "json", ".json", "application/json"),
            ("⬇ HTML report", "html", ".html", "text/html"),
        )
        with st.container(horizontal=True, wrap=True):  # buttons wrap in a narrow window rather than squeeze
            for label, fmt, suffix, mime in files:
                st.download_button(
                    label,
                    partial(export_file, store, run_id, fmt),
                    file_name=f"{run_id}{suffix}",
                    mime=mime,
                    key=f"{key}.{fmt}.{run_id}",
                    on_click="ignore",
                )


# -- the jury view: what the Jury page shows live and the Replay page steps through ------------------------------


def run_usage(store: Store, run_id: str) -> dict[str, Any] | None:
    """A run's recorded model calls summed (calls, tokens, cost): the one token count that the Jury, Replay and
    Runs pages all show. None when the run recorded no call."""
    totals = store.run_totals([run_id]).get(run_id)
    return dict(totals) if totals else None


GLOSSARY = {
    "GRACE": "GRACE is the confidence design this lab implements: evidence factors (search quality, tool success, "
    "agreement between sources, the model's own rating, coverage of the question) weighted into one score, "
    "minus penalties, which decides whether the agent acts silently, notifies, asks to confirm or escalates.",
    "PMI": "PMI (pointwise mutual information): how much more likely the judge model finds a participant's "
    "expertise after reading the message than without it. Positive: the message is about that expertise.",
    "κ": "Fleiss' κ (kappa): how much the jurors agree beyond what chance would give. 1 is full agreement, 0 is "
    "chance level. Seats that are the same model with the same input agree by construction, not by judgment.",
    "α": "Krippendorff's α (alpha): agreement among the jurors that also counts how far apart verdicts are "
    "(safe vs. unsafe is further than safe vs. needs review). 1 is full agreement, 0 is chance level.",
}


def details_on(key: str, *, label: str = "Details", help: str | None = None) -> bool:
    """A "Details" toggle whose state outlives the page: research detail (calibration captions, flags, map
    versions, feature values, parameter identifiers, raw dicts) shows only while it is on. The state is kept
    under a key of its own (`details.<key>`), since Streamlit forgets a widget's value once a script run has not
    drawn it (another page was open)."""

    kept, widget = f"details.{key}", f"details.{key}.toggle"

    def keep() -> None:
        st.session_state[kept] = bool(st.session_state.get(widget))

    if widget not in st.session_state:
        st.session_state[widget] = bool(st.session_state.get(kept, False))
    return bool(
        st.toggle(
            label,
            key=widget,
            on_change=keep,
            help=help or "Research detail: fitted maps, flags, feature values and identifiers.",
        )
    )


# -- the jury's what-if: a stored run decided again with other settings, no model call ----------------------------
