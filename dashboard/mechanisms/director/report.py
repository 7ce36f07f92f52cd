"""The director's charts in a run's report: a check's rubric, a batch's rubric averages and rule hit rates, a scene's
drafts per turn."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, MUTED, small
from dashboard.mechanisms.director import charts
from dashboard.text import plot_text
from engine.director.rubric import RUBRIC_CRITERIA
from engine.exports import RunRecord


def director(record: RunRecord) -> list[tuple[str, go.Figure]]:

    out: list[tuple[str, go.Figure]] = []
    rubrics = [p.get("rubric") for _, p in record.pairs("director_verdict")]
    scored = [r for r in rubrics if isinstance(r, dict) and isinstance(r.get("scores"), dict)]
    if record.run.kind == "director.check" and scored:
        scores = scored[-1]["scores"]
        names = [k for k in RUBRIC_CRITERIA if k in scores]
        values = [scores[k] for k in names]
        radar = go.Figure(
            go.Scatterpolar(
                r=values + values[:1],
                theta=[plot_text(n) for n in names + names[:1]],
                fill="toself",
                line_color=BASE_COLOR,
            )
        )
        radar.update_layout(polar={"radialaxis": {"range": [0, 5]}}, showlegend=False)
        out.append(("Rubric", small(radar, "Rubric")))
    # a script's lines: `director_line` events (the rubric average in `rubric`), or the older `director_rubric`
    lines = [
        {"id": p.get("id"), "average": p.get("rubric") if t == "director_line" else p.get("average")}
        for t, p in record.pairs("director_line", "director_rubric")
    ]
    lines = [p for p in lines if isinstance(p["average"], int | float) and not isinstance(p["average"], bool)]
    if record.run.kind == "director.batch" and lines:
        fig = go.Figure(
            go.Bar(
                x=[plot_text(p.get("id")) for p in lines],
                y=[p["average"] for p in lines],
                marker_color=BASE_COLOR,
            )
        )
        fig.update_yaxes(range=[0, 5.2], title="rubric average")
        out.append(("Rubric average per line", small(fig, "Rubric average per line")))
    result = record.run.summary.get("result")
    rates = result.get("hit_rates") if isinstance(result, dict) else None
    if record.run.kind == "director.batch" and isinstance(rates, dict) and rates:
        title = "Rule hit rates with 95 % intervals"
        out.append((title, small(charts.rule_hit_rates(rates), title)))
    turns = [p for _, p in record.pairs("director_turn")]
    if turns:
        colors = {"PASS": "#1B9E77", "WARN": "#E6AB02", "RETRY": "#D95F02"}
        fig = go.Figure(
            go.Bar(
                x=[f"{p.get('index')}: {plot_text(p.get('speaker'))}" for p in turns],
                y=[p.get("attempts", 1) for p in turns],
                marker_color=[colors.get(str(p.get("status")), MUTED) for p in turns],
                text=[plot_text(p.get("outcome")) for p in turns],
                textposition="outside",
            )
        )
        fig.update_yaxes(title="drafts", dtick=1)
        out.append(("Drafts per turn (colour: status)", small(fig, "Drafts per turn (colour: status)")))
    return out
