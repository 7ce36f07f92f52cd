"""The Hand raise page's Charts tab: the tokens headline (answer tokens saved against everyone answering, the
judge tokens that deciding cost), the wills per turn, the approval flow and the will histogram."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from dashboard.components import flow_columns, metric_row
from dashboard.mechanisms.handraise.charts import approval_sankey, will_histogram, will_per_turn
from dashboard.mechanisms.handraise.session import KEY
from engine.handraise.conversation import Conversation, token_figures


def render_charts(conv: Conversation) -> None:
    """The tokens headline and its sentence, then the wills per turn, the approval flow and the will histogram."""
    figures = token_figures(conv)
    metric_row(token_metrics(figures))
    st.caption(token_caption(figures, conv.config.judge_method))
    c1, c2 = flow_columns(2, width=400)
    c1.plotly_chart(will_per_turn(conv.telemetry, conv.config.threshold), key=KEY + "will_chart")
    c2.plotly_chart(approval_sankey(conv.telemetry), key=KEY + "sankey")
    st.plotly_chart(will_histogram(conv.telemetry), key=KEY + "hist")


def token_metrics(figures: Mapping[str, Any]) -> list[tuple[str, Any] | dict[str, Any]]:
    """The tokens headline, judging and answering apart: the answer tokens the hands saved against everyone
    answering every turn, and the judge tokens that deciding cost (mostly prompt reads of a local model)."""
    saved = max(0, int(figures["baseline_tokens"]) - int(figures["answer_tokens"]))
    return [
        {
            "label": "Answer tokens saved",
            "value": f"{saved:,}",
            "help": f"{figures['answer_tokens']:,} answer tokens written, against {figures['baseline_tokens']:,} "
            "if every participant had answered every turn (the missing answers counted at this conversation's "
            "mean answer length).",
        },
        ("Answers given / everyone answers", f"{figures['answers']} / {figures['baseline_answers']}"),
        {
            "label": "Judge tokens (deciding who speaks)",
            "value": f"{figures['judge_tokens']:,}",
            "help": "Tokens the will judge read and wrote. The likelihood judge only reads (prompt tokens on a "
            "local model, nothing generated), so these cost time, not money.",
        },
    ]


def token_caption(figures: Mapping[str, Any], method: str) -> str:
    """One sentence with both sides, so the two numbers are never read as one total against the baseline."""
    saved = max(0, int(figures["baseline_tokens"]) - int(figures["answer_tokens"]))
    how = " (read by the judge model, nothing generated)" if method == "likelihood" else ""
    return (
        f"Answering: {figures['answer_tokens']:,} tokens written instead of {figures['baseline_tokens']:,} "
        f"({saved:,} saved). Deciding who answers: {figures['judge_tokens']:,} judge tokens{how}."
    )
