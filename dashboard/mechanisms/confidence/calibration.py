"""The Calibration tab: a labelled set (uploaded or shipped) scored under the sidebar's settings — its accuracy, ECE,
AUC and AURC with their intervals, the level shares, reliability and risk–coverage charts, the per-level table and the
items — and recorded as a run on request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import flow_columns, md, metric_row
from dashboard.mechanisms.confidence import charts
from dashboard.mechanisms.confidence.fields import CALIB_PARAM, CALIB_RUN, KEY
from dashboard.watch import Collected, is_live, start_error, start_watched, watch_run, watched_run
from engine.confidence.calibration import (
    CalibrationConfig,
    LabelError,
    LabelledItem,
    calibrate_labels,
    calibration_report,
    parse_labels,
)
from engine.confidence.levels import LEVEL_NAMES
from engine.confidence.settings import ConfidenceSettings
from engine.config import get_settings
from engine.inputs import InputError, MissingFile, read_text, read_upload, shown_problems
from engine.stats import fmt, wilson

LABELS_FILE = "benchmarks/confidence.jsonl"


def _labels_path() -> Path:
    return get_settings().data_dir / LABELS_FILE


@st.cache_data(show_spinner=False)
def _load_labels(text: str, source: str) -> tuple[list[LabelledItem], list[str]]:
    """`engine.confidence.parse_labels`, cached per text: the items, or the problems of every bad row."""
    try:
        return parse_labels(text, source), []
    except LabelError as exc:
        return [], exc.problems  # at most `Problems.KEEP` of them, and their count


def render_calibration(settings: ConfidenceSettings) -> None:
    """The Calibration tab: the labelled set (an upload, else the shipped one) scored under the sidebar's
    settings — its figures, the button that records it, its charts and tables."""
    labels = _read_labels()
    if labels is None:
        return
    text, source = labels
    items, problems = _load_labels(text, source)
    if problems:
        st.error(md("bad rows, nothing imported — " + "; ".join(shown_problems(problems))))
        return
    if not items:
        st.info("No labelled items.")
        return
    report = calibration_report(items, settings)
    _render_summary(report, source)
    _render_record(source, items, settings)
    _render_levels(report)


def _read_labels() -> tuple[str, str] | None:
    """The uploader, then the labelled set's text and name: the upload, else the shipped file (empty when it is
    missing). None, with the error shown, when it cannot be read."""
    upload = st.file_uploader("Labelled set (JSONL of {factors, correct})", type=["jsonl"], key=KEY + "upload")
    if upload is not None:
        try:
            return read_upload(upload.name, upload.getvalue()), upload.name
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return None
    path = _labels_path()
    try:
        return read_text(path), path.name
    except MissingFile:
        return "", path.name
    except InputError as exc:
        st.error(f"Nothing imported: {exc}")
        return None


def _render_summary(report: dict[str, Any], source: str) -> None:
    """The set's figures — items, accuracy, ECE, AUC, AURC with their intervals — and how far one item moves them."""

    def spread(key: str) -> str:
        ci = report.get(f"{key}_ci")
        return f" ({ci[0]:.2f}–{ci[1]:.2f})" if isinstance(ci, list) else ""

    metric_row(
        [
            ("Items", report["n"]),
            {
                "label": "Accuracy",
                "value": f"{report['accuracy']:.2f}{spread('accuracy')}",
                "help": "the share of right answers, with its 95 % interval",
            },
            {
                "label": "ECE",
                "value": f"{report['ece']:.3f}{spread('ece')}",
                "help": "expected calibration error over 10 bins (lower is better), with its 95 % bootstrap interval",
            },
            {
                "label": "AUC",
                "value": "—" if report.get("auc") is None else f"{report['auc']:.2f}{spread('auc')}",
                "help": "do right answers score higher than wrong ones? 0.5 is a coin flip",
            },
            {
                "label": "AURC",
                "value": f"{report['aurc']:.3f}{spread('aurc')}",
                "help": "area under the risk–coverage curve (lower is better), with its 95 % bootstrap interval",
            },
        ]
    )
    st.caption(
        f"{report['n']} labelled items: one item moves a rate by {100 / max(report['n'], 1):.0f} points — the "
        "intervals say how far the figures could move on another set of this size."
    )
    st.caption(f"Source: {md(source)}. Move the thresholds in the sidebar: shares and markers move at once.")


def _render_record(source: str, items: list[LabelledItem], settings: ConfidenceSettings) -> None:
    """The button that records this calibration as a run (off while one goes), and the run it recorded."""
    run_id = watched_run(CALIB_PARAM, CALIB_RUN)
    live = is_live(run_id)
    if st.button("Record this calibration as a run", key=KEY + "calib_record", disabled=live):
        run_id = handle_calibrate(source, items, settings) or run_id
    start_error(CALIB_RUN)
    if run_id:
        watch_run(run_id, Collected, _render_calibrated, key=KEY + "calib_watch")


def _render_levels(report: dict[str, Any]) -> None:
    """The level shares, the reliability and risk–coverage charts, the per-level table and the items."""
    st.plotly_chart(charts.level_shares(report["level_shares"]))
    left, right = flow_columns(2, width=400)  # one under the other in a narrow window (legends overlapped)
    left.plotly_chart(charts.reliability_diagram(report["bins"], report["ece"]))
    right.plotly_chart(charts.risk_coverage_curve(report["risk_coverage"], report["thresholds"]))
    st.dataframe(
        pd.DataFrame(
            {
                "level": list(LEVEL_NAMES),
                "count": [report["level_counts"][lv] for lv in LEVEL_NAMES],
                "answers right (95 % interval)": [
                    level_accuracy_text(report["accuracy_by_level"][lv], report["level_counts"][lv])
                    for lv in LEVEL_NAMES
                ],
            }
        ).set_index("level"),
        width="stretch",
    )
    with st.expander("Items"):
        st.dataframe(
            pd.DataFrame(report["items"])[["id", "query", "correct", "score", "level"]],
            hide_index=True,
            width="stretch",
        )


def level_accuracy_text(accuracy: float | None, count: int) -> str:
    """'0.80 (0.49–0.94)': the share of right answers at a level with its Wilson interval — at 7–13 items a
    level, one item moves it by 8–14 points."""
    if accuracy is None or not count:
        return "—"
    interval = wilson(round(accuracy * count), count)
    return fmt(accuracy, interval)


def _render_calibrated(view: Collected, live: bool) -> None:
    if not live and view.summary is not None:
        run_id = st.session_state.get(CALIB_RUN)
        st.caption(f"Recorded as run {md(run_id)} (Runs page): ECE {view.summary.get('ece', 0):.3f}.")


def handle_calibrate(source: str, items: list[LabelledItem], settings: ConfidenceSettings) -> str | None:
    """`confidence.calibrate_labels` (no model call) started in the registry; the page watches it."""
    config = CalibrationConfig(labels=source, items=items, settings=settings)
    store = state.get_store()
    return start_watched(
        "confidence.calibrate",
        config.model_dump(mode="json"),
        lambda: calibrate_labels(config, None, store),
        param=CALIB_PARAM,
        key=CALIB_RUN,
    )
