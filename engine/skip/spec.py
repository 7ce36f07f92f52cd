"""The judgment skip cache in the mechanism registry (`engine.registry`): its facts, and a loader for each part of its
code."""

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
    from engine.skip.experiment import SkipAdapter

    return SkipAdapter


def tables() -> Sequence[ExportTable]:
    # loaded when used
    from engine.skip.exports import TABLES

    return TABLES


def scorecard() -> ScorecardHooks:
    # loaded when used
    from engine.skip.scorecard import HOOKS

    return HOOKS


def labels() -> LabelHooks:
    # loaded when used
    from engine.skip.labels import HOOKS

    return HOOKS


def runs() -> RunHooks:
    # loaded when used
    from engine.skip.naming import HOOKS

    return HOOKS


SPEC = MechanismSpec(
    name="skip",
    label="Skip judge",
    demo_page="skip",
    experiment=experiment,
    experiment_cases="data/recordings/skipcache-default.jsonl",
    experiment_space="high_confidence: [0.8, 0.9]\ndefault_skip_seconds: [300, 600]\n",
    tables=tables,
    scorecard=ScorecardRole("auc", True, 0.75, "README goal for the skip judge", scorecard, per_model=False),
    labels=LabelSpec(
        ("reply", "no_reply"),  # should have replied / should not
        labels,
        positive="reply",
        map_name="skip.likelihood",
    ),
    runs=runs,
    maps=(
        JudgeMapFacts(
            "skip.likelihood", "skip-calib.jsonl", "should_respond", {"respond": {"pmi_need": +1, "pmi_should": +1}}
        ),
    ),
)
