"""Exported charts carry their own colours. Inside the dashboard Plotly's default template is Streamlit's, whose
colours are placeholders (#000001…#000030) that only the Streamlit front end replaces: a figure that leaned on it
came out black in an HTML export (the experiment heatmap was a black block, every dot black). Every figure an
export holds must name its colours: the export template in full, and each trace's own colour."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import plotly.io as pio
import pytest

from dashboard import charts
from dashboard.mechanisms.handraise import charts as handraise_charts
from dashboard.report import experiment_figures, experiment_report, figures_for
from engine.exports import Figure, load_run
from engine.store import Store
from tests.fakes.runs import (
    stored_conversation,
    stored_kinds,
)

PLACEHOLDER = re.compile(r"#0000(?:0[1-9]|[12][0-9]|30)\b")  # Streamlit's theme placeholders


@pytest.fixture(autouse=True)
def streamlit_theme() -> Iterator[None]:
    """The template the dashboard process runs with (set when streamlit's plotly element is imported)."""
    from streamlit.elements.lib.streamlit_plotly_theme import configure_streamlit_plotly_theme

    before = pio.templates.default
    configure_streamlit_plotly_theme()
    assert pio.templates.default == "streamlit"
    yield
    pio.templates.default = before


def _colored(trace: dict[str, Any]) -> bool:
    kind = trace.get("type", "scatter")
    marker, line = trace.get("marker") or {}, trace.get("line") or {}
    if kind in ("scatter", "scatterpolar", "scattergl"):
        return bool(marker.get("color") or line.get("color"))
    if kind in ("bar", "histogram"):
        return bool(marker.get("color"))
    if kind in ("heatmap", "contour"):
        return bool(trace.get("colorscale"))
    if kind == "sankey":
        return bool((trace.get("node") or {}).get("color") and (trace.get("link") or {}).get("color"))
    if kind == "indicator":
        return bool(((trace.get("gauge") or {}).get("bar") or {}).get("color"))
    if kind == "waterfall":
        return all(((trace.get(k) or {}).get("marker") or {}).get("color") for k in ("increasing", "decreasing"))
    return False


def explicit_color_problems(figure: Figure) -> list[str]:
    """Why an exported figure would not draw as the page does outside the dashboard (empty: it would)."""
    spec = json.loads(figure.spec)
    problems = [f"{figure.title}: placeholder colour {m}" for m in sorted(set(PLACEHOLDER.findall(figure.spec)))]
    template = (spec.get("layout") or {}).get("template") or {}
    if not (template.get("layout") or {}).get("colorway"):
        problems.append(f"{figure.title}: no explicit template (colorway)")
    for i, trace in enumerate(spec.get("data") or []):
        if not _colored(trace):
            problems.append(f"{figure.title}: trace {i} ({trace.get('type', 'scatter')}) has no colour of its own")
    return problems


def test_the_check_finds_a_figure_that_leans_on_the_theme() -> None:
    import plotly.graph_objects as go

    bare = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    problems = explicit_color_problems(Figure(title="bare", spec=bare.to_json()))
    assert any("placeholder" in p for p in problems) and any("no colour of its own" in p for p in problems)
    fixed = charts.for_export(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], colorscale="Viridis")))
    assert explicit_color_problems(Figure(title="fixed", spec=fixed.to_json())) == []


def test_every_run_report_figure_names_its_colours(store: Store) -> None:
    runs = stored_kinds(store)
    figures = [f for run_id in runs for f in figures_for(load_run(store, run_id))]
    assert len(figures) >= 9
    assert [p for f in figures for p in explicit_color_problems(f)] == []


def test_approval_flow_links_are_coloured_by_where_they_go(store: Store) -> None:
    run_id, _ = stored_conversation(store)
    (sankey,) = [f for f in figures_for(load_run(store, run_id)) if f.title == "Approval flow"]
    trace = json.loads(sankey.spec)["data"][0]
    nodes, link = trace["node"], trace["link"]
    for target, color in zip(link["target"], link["color"], strict=True):
        node = handraise_charts.SANKEY_COLORS[nodes["label"][target]]
        assert color == charts.rgba(node, 0.45)  # never white on white: the target node's colour, see-through
    assert "rgba(255,255,255" not in json.dumps(link)


def test_one_colour_per_participant_in_every_conversation_chart() -> None:
    rows = [
        {"participant": p, "turn": t, "will": w, "status": "raised", "decided_by": "user", "allowed": True, "flags": ""}
        for t in range(3)
        for p, w in (("coder", 0.8), ("designer", 0.3), ("pm", 0.55))
    ]
    line = handraise_charts.will_per_turn(rows, 0.6)
    histogram = handraise_charts.will_histogram(rows)
    by_line = {t.name: t.line.color for t in line.data}
    by_bars = {t.name: t.marker.color for t in histogram.data}
    assert by_line == by_bars and len(set(by_line.values())) == 3
    # side by side, so a bar's colour is its participant's own, never a blend of two the legend does not show
    assert histogram.layout.barmode == "group"


def shown_experiment() -> dict[str, Any]:
    rows = [
        {"cell": i, "repeat": 0, "threshold": t, "cooldown": c, "f1": round(0.5 + t / 4 - c / 20, 3), "calls": 10 + c}
        for i, (t, c) in enumerate((t, c) for t in (0.4, 0.5, 0.6) for c in (0, 1, 2))
    ]
    best = max(rows, key=lambda r: r["f1"])
    return {
        "experiment_id": "exp-test",
        "name": "threshold × cooldown",
        "status": "finished",
        "metric": "f1",
        "cells": len(rows),
        "finished": len(rows),
        "new_calls": 0,
        "best": best,
        "rows": rows,
        "parameters": ["threshold", "cooldown"],
        "definition": {"name": "t", "mechanism": "handraise", "cases": "/home/someone/secret/project/cases.jsonl"},
    }


def test_experiment_export_holds_every_page_chart_in_explicit_colours() -> None:
    shown = shown_experiment()
    figures = experiment_figures(shown)
    assert [f.title for f in figures] == [
        "f1 against threshold",
        "f1 against cooldown",
        "best f1 by threshold × cooldown",
        "f1 against calls",
    ]
    assert [p for f in figures for p in explicit_color_problems(f)] == []
    heatmap = json.loads(figures[2].spec)["data"][0]
    assert heatmap["type"] == "heatmap" and heatmap["colorscale"]
    stars = [t for f in figures for t in json.loads(f.spec)["data"] if (t.get("marker") or {}).get("symbol") == "star"]
    assert len(stars) == 4 and all(t["name"] == f"best cell {shown['best']['cell']}" for t in stars)
    document = experiment_report(shown)
    assert "/home/someone" not in document and "cases.jsonl" in document  # the file's name, not the machine's path
    assert '<tr class="best"><td>★</td>' in document and document.count('class="figure"') == 4
    specs = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', document, re.S)
    assert len(specs) == 4 and not any(PLACEHOLDER.search(spec) for spec in specs)
