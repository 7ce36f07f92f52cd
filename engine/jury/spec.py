"""The jury in the mechanism registry (`engine.registry`): its facts, and a loader for each part of its code."""

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
    from engine.jury.experiment import JuryAdapter

    return JuryAdapter


def tables() -> Sequence[ExportTable]:
    # loaded when used
    from engine.jury.exports import TABLES

    return TABLES


def scorecard() -> ScorecardHooks:
    # loaded when used
    from engine.jury.scorecard import HOOKS

    return HOOKS


def labels() -> LabelHooks:
    # loaded when used
    from engine.jury.labels import HOOKS

    return HOOKS


def runs() -> RunHooks:
    # loaded when used
    from engine.jury.naming import HOOKS

    return HOOKS


SPEC = MechanismSpec(
    name="jury",
    label="Jury",
    demo_page="jury",
    experiment=experiment,
    experiment_cases="data/benchmarks/jury.jsonl",
    experiment_space="consensus_threshold: [0.5, 0.67, 1.0]\nstagnation_rounds: [1, 2]\n",
    tables=tables,
    scorecard=ScorecardRole(
        "accuracy", True, 0.6, "README goal for the jury", scorecard, methods=("generate", "likelihood")
    ),
    labels=LabelSpec(None, labels, map_name="jury.likelihood"),  # any verdict of the case's own set
    runs=runs,
    maps=(
        JudgeMapFacts(
            "jury.likelihood",
            "jury-calib.jsonl",
            "gold",
            {"unsafe_fail": {"channel_unsafe_fail": +1}},
            figure="accuracy",
            family=True,
        ),
    ),
)
