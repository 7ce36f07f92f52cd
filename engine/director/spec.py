"""The director in the mechanism registry (`engine.registry`): its facts, and a loader for each part of its code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.mechanism import (
    ExportTable,
    JudgeMapFacts,
    LabelHooks,
    LabelSpec,
    MechanismSpec,
    RunHooks,
    ScorecardHooks,
    ScorecardRole,
)

if TYPE_CHECKING:
    from engine.experiments.adapters.base import ExperimentAdapter


def experiment() -> type[ExperimentAdapter]:
    # loaded when used
    from engine.director.experiment import DirectorAdapter

    return DirectorAdapter


def tables() -> Sequence[ExportTable]:
    # loaded when used
    from engine.director.exports import TABLES

    return TABLES


def scorecard() -> ScorecardHooks:
    # loaded when used
    from engine.director.scorecard import HOOKS

    return HOOKS


def labels() -> LabelHooks:
    # loaded when used
    from engine.director.labels import HOOKS

    return HOOKS


def runs() -> RunHooks:
    # loaded when used
    from engine.director.naming import HOOKS

    return HOOKS


SPEC = MechanismSpec(
    name="director",
    label="Director rubric",
    demo_page="director",
    experiment=experiment,
    experiment_cases="data/scripts/beach.jsonl",
    experiment_space="format_warn_lines: [2, 4]\ntone_pass: [1, 2]\n",
    tables=tables,
    scorecard=ScorecardRole(
        "agreement",
        True,
        0.6,
        "README goal for the director rubric",
        scorecard,
        methods=("signals", "generate", "likelihood"),  # DirectorConfig.rubric_judge
    ),
    labels=LabelSpec(("ok", "retry"), labels, positive="retry"),
    runs=runs,
    maps=(
        JudgeMapFacts(
            "director.signals",
            "director-calib.jsonl",
            "acceptable",
            {
                "frame": {"topic_pmi": +1, "topic_match": +1},
                "roleplay": {"voice_pmi": +1, "voice_match": +1},
                "connectivity": {"previous_pmi": +1, "previous_match": +1},
                "naturalness": {"variety": +1},
            },
        ),
    ),
)
