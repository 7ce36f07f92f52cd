"""The confidence score as experiments see it: the labelled set's recorded factors scored again under each
cell's settings, with no call."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.confidence.factors import parse_factors
from engine.confidence.levels import InterventionLevel, decide_level
from engine.confidence.score import calculate
from engine.confidence.settings import ConfidenceSettings
from engine.experiments.adapters.base import ExperimentAdapter, nested
from engine.experiments.definition import Experiment
from engine.experiments.evidence import OUTCOMES, score_outcomes
from engine.inputs import iter_lines, read_text
from engine.reliability import calibrate


@dataclass
class ConfidenceRecording:
    ids: list[str]
    factors: list[Any]
    correct: list[bool]


class ConfidenceAdapter(ExperimentAdapter):
    """The labelled set's recorded factors (search, sources, tools, self-confidence, coverage) scored again under
    each cell's weights, inclusion conditions, penalties and level thresholds — `engine.confidence.calculate`,
    pure: no cell makes a call. Metrics: ECE and AURC of the score against correctness, the Brier score, and
    how the levels split (proceed: SILENT/NOTIFY; the share of wrong answers stopped at CONFIRM/ESCALATE)."""

    name: str = "confidence"
    decision: frozenset[str] = frozenset(
        {
            "search_good_max",
            "search_max_weight",
            "search_avg_weight",
            "variance_penalty_factor",
            "variance_penalty_cap",
            "weight_search_quality",
            "weight_tool_success",
            "weight_source_agreement",
            "weight_self_confidence",
            "weight_query_coverage",
            "include_search_quality_above",
            "include_agreement_min_sources",
            "include_self_confidence_above",
            "include_query_coverage_above",
            "penalty_search_no_results",
            "penalty_tool_base",
            "penalty_tool_slope",
            "penalty_no_sources",
            "no_sources_exempt_self_confidence",
            "thresholds.silent",
            "thresholds.notify",
            "thresholds.confirm",
        }
    )
    metrics: tuple[str, ...] = (
        "ece",
        "aurc",
        "brier",
        "accuracy",
        "proceed_rate",
        "proceed_precision",
        "wrong_stopped",
        "calls",
    )
    default_metric: str = "wrong_stopped"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = nested({**base, **params})
        if isinstance(merged.get("thresholds"), dict):
            merged["thresholds"] = {**nested(dict(base)).get("thresholds", {}), **merged["thresholds"]}
        return ConfidenceSettings.model_validate(merged)

    def load_cases(self, definition: Experiment) -> list[Any]:

        path = definition.case_path()
        rows = []
        for number, line in iter_lines(read_text(path)):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                rows.append((str(data["id"]), parse_factors(data["factors"]), bool(data["correct"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
        return rows[: definition.limit] if definition.limit else rows

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> ConfidenceRecording:
        return ConfidenceRecording(
            ids=[c[0] for c in cases], factors=[c[1] for c in cases], correct=[c[2] for c in cases]
        )

    def decide(
        self, definition: Experiment, recording: ConfidenceRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        settings = self.config(definition.base, decision_params)
        scores = [calculate(f, settings).score for f in recording.factors]
        levels = [decide_level(v, settings.thresholds) for v in scores]
        report = calibrate(scores, recording.correct)
        proceed = [lv in (InterventionLevel.SILENT, InterventionLevel.NOTIFY) for lv in levels]
        proceeded = [c for c, p in zip(recording.correct, proceed, strict=True) if p]
        wrong = [p for c, p in zip(recording.correct, proceed, strict=True) if not c]
        n = len(scores)
        return {
            "ece": round(report.ece, 4),
            "aurc": round(report.aurc, 4),
            "brier": round(sum((v - c) ** 2 for v, c in zip(scores, recording.correct, strict=True)) / n, 4),
            "accuracy": round(report.accuracy, 4),
            "proceed_rate": round(sum(proceed) / n, 4),
            "proceed_precision": round(sum(proceeded) / len(proceeded), 4) if proceeded else None,
            "wrong_stopped": round(sum(not p for p in wrong) / len(wrong), 4) if wrong else None,
            "calls": 0,
            OUTCOMES: score_outcomes(scores, recording.correct, proceed, recording.ids),
        }

    def recording_json(self, recording: ConfidenceRecording) -> dict[str, Any]:
        return {
            "cases": [
                {"id": i, "factors": f.model_dump(mode="json"), "correct": c}
                for i, f, c in zip(recording.ids, recording.factors, recording.correct, strict=True)
            ]
        }
