"""The skip cache's charts in a run's report: judge calls with and without the cache, the trade-off sweep, a
conversation's timeline."""

from __future__ import annotations

from datetime import datetime

import plotly.graph_objects as go

from dashboard.charts.base import BASE_COLOR, MUTED, small
from dashboard.mechanisms.skip import charts
from dashboard.text import plot_text, scope_words
from engine.exports import RunRecord
from engine.skip.exports import simulation


def simulation_charts(record: RunRecord) -> list[tuple[str, go.Figure]]:
    rows = [r for r in simulation(record) if isinstance(r.get("judge_calls"), int | float)]  # its export table
    if not rows:
        return []
    fig = go.Figure(
        go.Bar(
            x=[plot_text(r["setting"]) for r in rows],
            y=[r["judge_calls"] for r in rows],
            marker_color=[MUTED, BASE_COLOR][: len(rows)],
        )
    )
    fig.update_yaxes(title="judge calls")
    out = [("Judge calls with and without the cache", small(fig, "Judge calls with and without the cache"))]
    sweep = record.run.summary.get("sweep")
    if isinstance(sweep, list) and sweep:  # the page's "Calls saved vs. delay" tab
        out.append(("Calls saved vs. delay (trade-off sweep)", charts.skip_tradeoff(sweep)))
    stored = next((p for _, p in record.pairs("skip_scope_timeline")), None)
    if stored and stored.get("scope"):  # the page's timeline, of the busiest conversation (the page's first)
        try:
            messages = [m | {"at": datetime.fromisoformat(m["at"])} for m in stored.get("messages") or []]
            judgments = [j | {"at": datetime.fromisoformat(j["at"])} for j in stored.get("judgments") or []]
            title = f"Per-conversation timeline ({scope_words(str(stored['scope']))})"
            timeline = stored.get("timeline") or []
            out.append((title, charts.skip_scope_timeline(str(stored["scope"]), messages, judgments, timeline)))
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):  # not of its shape: no chart
            pass
    return out
