"""The Multi-step plan tab: an editable table of steps, each scored, and the plan aggregated by every method side by
side."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import formstate as form
from dashboard.components import md, metric_row
from dashboard.mechanisms.confidence import charts
from dashboard.mechanisms.confidence.fields import COUNTS, DETAILS, KEY, SLIDERS
from engine.confidence.aggregation import ConfidenceAggregator
from engine.confidence.factors import FACTOR_FIELDS, FactorError, parse_factors
from engine.confidence.levels import decide_level
from engine.confidence.score import calculate
from engine.confidence.settings import ConfidenceSettings


def _default_plan() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": "search docs",
                "is_search_step": True,
                "search_result_count": 5,
                "search_avg_score": 0.62,
                "search_max_score": 0.78,
                "search_score_variance": 0.05,
                "source_count": 5,
                "source_agreement": 0.0,
                "llm_self_confidence": 0.5,
                "tool_success_rate": 1.0,
                "query_coverage": 0.0,
            },
            {
                "step": "call API",
                "is_search_step": False,
                "search_result_count": 0,
                "search_avg_score": 0.0,
                "search_max_score": 0.0,
                "search_score_variance": 1.0,
                "source_count": 1,
                "source_agreement": 0.0,
                "llm_self_confidence": 0.7,
                "tool_success_rate": 0.75,
                "query_coverage": 0.0,
            },
            {
                "step": "write answer",
                "is_search_step": False,
                "search_result_count": 0,
                "search_avg_score": 0.0,
                "search_max_score": 0.0,
                "search_score_variance": 1.0,
                "source_count": 3,
                "source_agreement": 0.82,
                "llm_self_confidence": 0.85,
                "tool_success_rate": 1.0,
                "query_coverage": 0.8,
            },
        ]
    )


PLAN_COLUMNS: dict[str, Any] = {
    "step": st.column_config.TextColumn("step", pinned=True),
    "is_search_step": st.column_config.CheckboxColumn("search step"),
    **{name: st.column_config.NumberColumn(label.lower()) for name, (label, _) in SLIDERS.items()},
    **{name: st.column_config.NumberColumn(label.lower()) for name, label in COUNTS.items()},
}


def render_plan(settings: ConfidenceSettings) -> None:
    """The Multi-step plan tab: the steps' table, each step's score and level, and the aggregates."""
    st.caption("Edit the steps; each row is scored, then the plan is aggregated by every method side by side.")
    plan = st.data_editor(
        _default_plan(),
        num_rows="dynamic",
        key=KEY + "plan",
        width="stretch",
        column_config=PLAN_COLUMNS,  # the factors' names in words, not their identifiers
    )
    critical = form.field(st.toggle, "Critical-step check (any step < 0.3 → mean × 0.7)", KEY + "critical")
    if plan.empty:
        st.info("Add a step.")
        return
    rows, problems = [], []
    for i, row in plan.iterrows():
        values = {k: row[k] for k in plan.columns if k in FACTOR_FIELDS and pd.notna(row[k])}
        for name in COUNTS:
            if name in values:
                values[name] = int(values[name])
        if "is_search_step" in values:
            values["is_search_step"] = bool(values["is_search_step"])
        try:
            rows.append((str(row.get("step") or f"step {i + 1}"), parse_factors(values)))
        except FactorError as exc:  # names the field
            problems.append(f"row {i + 1}: {exc}")
    for problem in problems:
        st.error(md(problem))
    if not rows:
        return
    scores = [calculate(f, settings) for _, f in rows]
    levels = [decide_level(s.score, settings.thresholds).value for s in scores]
    aggregator = ConfidenceAggregator(critical_check=critical)
    aggregates = {m: aggregator.aggregate(scores, m) for m in ConfidenceAggregator.METHODS}
    metric_row(
        [
            {
                "label": method,
                "value": f"{value:.3f}",
                "delta": decide_level(value, settings.thresholds).value,
                "delta_color": "off",
            }
            for method, value in aggregates.items()
        ]
    )
    st.plotly_chart(charts.step_scores([n for n, _ in rows], [s.score for s in scores], levels, aggregates))
    details = st.session_state.get(f"details.{DETAILS}", False)  # the formula names the factors' identifiers
    st.dataframe(
        pd.DataFrame(
            [
                {"step": n, "score": s.score, "level": lv} | ({"formula": s.reason} if details else {})
                for (n, _), s, lv in zip(rows, scores, levels, strict=True)
            ]
        ),
        hide_index=True,
        width="stretch",
    )
