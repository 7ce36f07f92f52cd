"""What every chart shares: the palette (Dark2), the layout, the export template, legends below, error bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

LEVEL_COLORS = {"SILENT": "#1B9E77", "NOTIFY": "#66A61E", "CONFIRM": "#E6AB02", "ESCALATE": "#D95F02"}


BASE_COLOR = "#1B6E5A"


MUTED = "#B8C4BE"


# Series colours (participants, jurors, stages): colour-blind-safe Dark2 first, then Paired's darker half.
PALETTE = ("#1B9E77", "#D95F02", "#7570B3", "#E7298A", "#66A61E", "#E6AB02", "#A6761D", "#1F78B4", "#666666", "#B15928")


# An export draws on this explicit light template: the dashboard's own ("streamlit") holds placeholder colours
# (#000001…#000030) that only the Streamlit front end replaces, so in a plain HTML file they are black.
EXPORT_TEMPLATE = "plotly_white"


def series_colors(names: Sequence[Any]) -> dict[str, str]:
    """One colour per name (a participant, a juror, a stage), the same in every chart that shows the same set:
    the names sorted, the palette taken in order. Keys are the names as text."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted({str(n) for n in names}))}


def rgba(color: str, alpha: float) -> str:
    """`#RRGGBB` at the given opacity (Sankey links, bands)."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def for_export(fig: go.Figure) -> go.Figure:
    """A copy of `fig` for a file that opens outside the dashboard: every colour explicit (the export template
    in full, on white), never the dashboard theme's placeholders."""
    out = go.Figure(fig)
    out.update_layout(template=pio.templates[EXPORT_TEMPLATE], paper_bgcolor="white", plot_bgcolor="white")
    return out


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.0, "font": {"size": 15}},
        # The toolbar (shown on hover) stands down the right edge, not across the top, where it covered the
        # title of a figure in a narrow column.
        modebar={"orientation": "v"},
        height=height,
        margin={"l": 10, "r": 10, "t": 48, "b": 10},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig


def _legend_below(fig: go.Figure) -> go.Figure:
    """A horizontal legend under the plot: in a narrow column (the Replay page's side-by-side compare) a legend
    at the right would cover the plot and the neighbouring figure's."""
    fig.update_layout(
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
        margin={"l": 10, "r": 10, "t": 48, "b": 80},
    )
    return fig


def words(name: str) -> str:
    """A parameter or metric identifier as words on a chart: "thresholds.notify" → "thresholds notify"."""
    return str(name).replace("_", " ").replace(".", " ").strip()


ERROR_BAR_CELLS = 100  # above this, one bar per cell hides the cells: the tie band and colours say it instead


def error_bars(rows: Sequence[Mapping[str, Any]], metric: str, color: str) -> dict[str, Any]:
    """Each cell's 95 % interval as asymmetric error bars (none where a cell has no interval)."""
    plus, minus = [], []
    for r in rows:
        ci, value = r.get(f"{metric}_ci"), float(r[metric])
        low, high = (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else (value, value)
        plus.append(high - value)
        minus.append(value - low)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": color, "thickness": 1}


def small(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    """A run report's chart: its title in the figure, a fixed height, small margins."""
    fig.update_layout(
        title={"text": title, "x": 0.0, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 48, "b": 10},
    )
    return fig


def metric_bars(summary: Mapping[str, Any], names: tuple[str, ...], title: str) -> list[tuple[str, go.Figure]]:
    """A run's headline rates (its summary's) as bars, each with its stored 95 % interval (`<metric>_ci`) as an
    error bar and in its label, "0.50 (0.27–0.73)"."""
    present = [n for n in names if isinstance(summary.get(n), int | float)]
    if not present:
        return []

    def label(name: str) -> str:
        ci = summary.get(f"{name}_ci")
        spread = f" ({ci[0]:.2f}–{ci[1]:.2f})" if isinstance(ci, list) and len(ci) == 2 else ""
        return f"{summary[name]:.2f}{spread}"

    rows = [{"value": summary[n], "value_ci": summary.get(f"{n}_ci")} for n in present]
    fig = go.Figure(
        go.Bar(
            x=list(present),
            y=[summary[n] for n in present],
            marker_color=BASE_COLOR,
            text=[label(n) for n in present],
            textposition="outside",
            error_y=error_bars(rows, "value", "#555555"),
        )
    )
    fig.update_yaxes(range=[0, 1.1])
    return [(title, small(fig, title))]
