"""The hand raise in the mechanism registry (`engine.registry`): its facts, and a loader for each part of its code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.mechanism import (
    ExportTable,
    JudgeMapFacts,
    LabelHooks,
    LabelSpec,
    MechanismSpec,
    RefitHooks,
    RunHooks,
    ScorecardHooks,
    ScorecardRole,
)

if TYPE_CHECKING:
    from engine.experiments.adapters.base import ExperimentAdapter


def experiment() -> type[ExperimentAdapter]:
    # loaded when used
    from engine.handraise.experiment import HandRaiseAdapter

    return HandRaiseAdapter


def tables() -> Sequence[ExportTable]:
    # loaded when used
    from engine.handraise.exports import TABLES

    return TABLES


def scorecard() -> ScorecardHooks:
    # loaded when used
    from engine.handraise.scorecard import HOOKS

    return HOOKS


def labels() -> LabelHooks:
    # loaded when used
    from engine.handraise.labels import HOOKS

    return HOOKS


def refit() -> RefitHooks:
    # loaded when used
    from engine.handraise.label_refit import HOOKS

    return HOOKS


def runs() -> RunHooks:
    # loaded when used
    from engine.handraise.naming import HOOKS

    return HOOKS


SPEC = MechanismSpec(
    name="handraise",
    label="Hand raise",
    demo_page="handraise",
    experiment=experiment,
    experiment_cases="data/benchmarks/handraise.jsonl",
    experiment_space="threshold: {from: 0.4, to: 0.7, step: 0.1}\nmode: [focus, brainstorm]\n",
    tables=tables,
    scorecard=ScorecardRole(
        "f1", True, 0.7, "README goal for the hand-raise judge", scorecard, methods=("judge", "likelihood")
    ),
    labels=LabelSpec(
        ("speak", "skip"),  # should this participant speak now
        labels,
        positive="speak",
        map_name="handraise.likelihood",
        refit=refit,
        min_labels=10,
    ),
    runs=runs,
    maps=(  # its label is participant → should speak: top-1 against a random pick; the gate's is per dialogue
        JudgeMapFacts("handraise.likelihood", "handraise-calib.jsonl", "labels", figure="top1", family=True),
        JudgeMapFacts("handraise.gate", "handraise-calib.jsonl", "labels", figure="own_auc"),
    ),
)
