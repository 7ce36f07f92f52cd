"""Plotly figure builders: pure functions, data in, figure out (tested without a browser).

Plotly renders a subset of HTML (<a href>, <br>, <b>, <span style>) in labels, legends and hover text;
every string that comes from data (roles, verdict labels, step names, factor names) goes in through
`plot_text`, so it is shown as written.

One module per mechanism (confidence, jury, director, skip, conversation, experiments, labels) over `base`
(palette, layout, export); every builder is re-exported here, so pages call `charts.<builder>`.
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
from dashboard.charts.confidence import (
    FACTOR_WORDS,
    breakdown_bars,
    confidence_gauge,
    factor_words,
    level_shares,
    penalty_waterfall,
    reliability_diagram,
    risk_coverage_curve,
    step_scores,
)
from dashboard.charts.conversation import (
    ABLATION_METRICS,
    SANKEY_COLORS,
    SANKEY_NODES,
    approval_flows,
    approval_sankey,
    context_ablation,
    will_histogram,
    will_per_turn,
)
from dashboard.charts.director import (
    HIT_COLORS,
    RUBRIC_GREEN,
    rubric_radar,
    rule_hit_rates,
)
from dashboard.charts.experiments import (
    BEST,
    TIED,
    experiment_heatmap,
    experiment_metric_vs,
    experiment_pareto,
)
from dashboard.charts.jury import (
    VERDICT_COLORS,
    jury_discussion_effect,
    jury_timeline,
    jury_trajectory,
    jury_verdicts,
)
from dashboard.charts.labels import (
    agreement_over_time,
)
from dashboard.charts.skip import (
    RESPOND,
    SILENT_COLOR,
    SKIP_ROWS,
    skip_scope_timeline,
    skip_tradeoff,
)

__all__ = [
    "ABLATION_METRICS",
    "BASE_COLOR",
    "BEST",
    "ERROR_BAR_CELLS",
    "EXPORT_TEMPLATE",
    "FACTOR_WORDS",
    "HIT_COLORS",
    "LEVEL_COLORS",
    "MUTED",
    "PALETTE",
    "RESPOND",
    "RUBRIC_GREEN",
    "SANKEY_COLORS",
    "SANKEY_NODES",
    "SILENT_COLOR",
    "SKIP_ROWS",
    "TIED",
    "VERDICT_COLORS",
    "agreement_over_time",
    "approval_flows",
    "approval_sankey",
    "breakdown_bars",
    "confidence_gauge",
    "context_ablation",
    "error_bars",
    "experiment_heatmap",
    "experiment_metric_vs",
    "experiment_pareto",
    "factor_words",
    "for_export",
    "jury_discussion_effect",
    "jury_timeline",
    "jury_trajectory",
    "jury_verdicts",
    "level_shares",
    "penalty_waterfall",
    "reliability_diagram",
    "rgba",
    "risk_coverage_curve",
    "rubric_radar",
    "rule_hit_rates",
    "series_colors",
    "skip_scope_timeline",
    "skip_tradeoff",
    "step_scores",
    "will_histogram",
    "will_per_turn",
    "words",
]
