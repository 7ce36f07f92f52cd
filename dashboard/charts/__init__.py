"""Plotly figure builders: pure functions, data in, figure out (tested without a browser).

Plotly renders a subset of HTML (<a href>, <br>, <b>, <span style>) in labels, legends and hover text;
every string that comes from data (roles, verdict labels, step names, factor names) goes in through
`plot_text`, so it is shown as written.

The shared builders: `base` (palette, layout, export, a report's chart), `experiments`, `labels`, re-exported here so
pages call `charts.<builder>`. A mechanism's own builders are its dashboard half's (`dashboard/mechanisms/<name>/
charts.py`), imported from there.
"""

from __future__ import annotations

from dashboard.charts.base import (
    BASE_COLOR,
    ERROR_BAR_CELLS,
    EXPORT_TEMPLATE,
    LEVEL_COLORS,
    MUTED,
    PALETTE,
    error_bars,
    for_export,
    rgba,
    series_colors,
    words,
)
from dashboard.charts.experiments import (
    BEST,
    TIED,
    experiment_heatmap,
    experiment_metric_vs,
    experiment_pareto,
)
from dashboard.charts.labels import (
    agreement_over_time,
)

__all__ = [
    "BASE_COLOR",
    "BEST",
    "ERROR_BAR_CELLS",
    "EXPORT_TEMPLATE",
    "LEVEL_COLORS",
    "MUTED",
    "PALETTE",
    "TIED",
    "agreement_over_time",
    "error_bars",
    "experiment_heatmap",
    "experiment_metric_vs",
    "experiment_pareto",
    "for_export",
    "rgba",
    "series_colors",
    "words",
]
