"""The confidence score in the mechanism registry (`engine.registry`): its facts, and a loader for each part of its
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
    from engine.confidence.experiment import ConfidenceAdapter

    return ConfidenceAdapter


def tables() -> Sequence[ExportTable]:
    # loaded when used
    from engine.confidence.exports import TABLES

    return TABLES


def scorecard() -> ScorecardHooks:
    # loaded when used
    from engine.confidence.scorecard import HOOKS

    return HOOKS


def labels() -> LabelHooks:
    # loaded when used
    from engine.confidence.labels import HOOKS

    return HOOKS


def runs() -> RunHooks:
    # loaded when used
    from engine.confidence.naming import HOOKS

    return HOOKS


SPEC = MechanismSpec(
    name="confidence",
    label="Confidence",
    demo_page="confidence",
    experiment=experiment,
    experiment_cases="data/benchmarks/confidence.jsonl",
    experiment_space="thresholds.notify: [0.6, 0.7, 0.8]\nweight_self_confidence: [0.1, 0.3]\n",
    tables=tables,
    scorecard=ScorecardRole("ece", False, 0.1, "seed 004: a calibrated score", scorecard, per_model=False),
    labels=LabelSpec(  # the answer was right / wrong
        ("right", "wrong"), labels, positive="right", map_name="confidence.likelihood"
    ),
    runs=runs,
    maps=(
        JudgeMapFacts(
            "confidence.likelihood", "confidence-calib.jsonl", "supported", {"supported": {"pmi_supported": +1}}
        ),
        JudgeMapFacts(
            "confidence.signals",
            "confidence-calib.jsonl",
            "supported",
            {
                "supported_with_sources": {"source_match": +1, "source_words": +1, "source_gain": +1},
                "supported_without_sources": {"answer_pmi": +1, "p_true": +1, "own_agreement": +1},
                "covers_question": {"question_match": +1},
            },
        ),
    ),
)
