"""The skip cache as experiments see it: the periodic checker run in simulated time against recorded
judgments, under each cell's thresholds and windows, with no call."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.experiments.adapters.base import ExperimentAdapter, Loc, error_location, error_message
from engine.experiments.definition import Experiment
from engine.skip.config import JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import simulate
from engine.skip.workload import EPOCH, WorkloadSpec, generate_workload


def _run_sync(coro: Any) -> Any:
    """Run a coroutine to its end from sync code, inside a running event loop or not."""

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class SkipRecording:
    messages: list[Any]
    records: dict[str, Any]
    hours: float
    baseline: dict[str, Any]


class SkipAdapter(ExperimentAdapter):
    """The skip cache's windows over a workload, judged by recorded judgments (`cases`: a recording of
    `skip simulate --record`, made on the default generated workload): a cell sets the skip thresholds and
    windows, and the periodic checker runs in simulated time against the recording — no model call; a state
    the recording lacks is counted as a failure (`replay_misses`), never judged live. Metrics against the same
    workload without the cache: calls saved, delays to the first judgment, staleness of cached judgments."""

    name: str = "skip"
    decision: frozenset[str] = frozenset(
        {"high_confidence", "high_skip_seconds", "mid_confidence", "mid_skip_seconds", "default_skip_seconds"}
    )
    metrics: tuple[str, ...] = (
        "calls_saved_pct",
        "judge_calls",
        "replies",
        "delay_p95_s",
        "delay_max_s",
        "staleness_p95_s",
        "never_judged",
        "replay_misses",
        "tokens",
        "calls",
    )
    default_metric: str = "calls_saved_pct"
    base_keys: frozenset[str] = frozenset({"hours", "workload"})

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = {
            "high_confidence": 0.9,
            "high_skip_seconds": 43200,
            "mid_confidence": 0.7,
            "mid_skip_seconds": 3600,
            "default_skip_seconds": 600,
            **{k: v for k, v in base.items() if k not in self.base_keys},
            **params,
        }
        thresholds = [
            JudgmentSkipThreshold(min_confidence=merged["high_confidence"], skip_seconds=merged["high_skip_seconds"]),
            JudgmentSkipThreshold(min_confidence=merged["mid_confidence"], skip_seconds=merged["mid_skip_seconds"]),
        ]
        if thresholds[1].min_confidence > thresholds[0].min_confidence:
            raise ValueError("mid_confidence must not be above high_confidence")
        return ResponseConfig.model_validate(
            {
                "judgment_skip": JudgmentSkipConfig(
                    thresholds=thresholds, default_skip_seconds=merged["default_skip_seconds"]
                )
            }
        )

    def spec(self, definition: Experiment) -> Any:

        return WorkloadSpec.model_validate(definition.base.get("workload") or {})

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = super().checks(definition, source)
        try:
            self.spec(definition)
        except ValidationError as exc:
            problems.append((("base", "workload") + error_location(exc), error_message(exc)))
        hours = definition.base.get("hours")
        if hours is not None and not (isinstance(hours, int | float) and hours > 0):
            problems.append((("base", "hours"), "hours: a positive number"))
        return problems

    def load_cases(self, definition: Experiment) -> list[Any]:

        path = definition.case_path()
        if not path.is_file():
            raise ValueError(f"{path}: no such recording")
        spec = self.spec(definition)
        hours = float(definition.base.get("hours", spec.hours))

        messages = [m for m in generate_workload(spec) if (m.at - EPOCH).total_seconds() < hours * 3600]
        return [(messages, RecordedJudge.load(path).records, hours)]

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> SkipRecording:

        messages, records, hours = cases[0]
        baseline = await simulate(
            messages, RecordedJudge(dict(records)), ResponseConfig.model_validate({}), with_cache=False, hours=hours
        )
        return SkipRecording(messages=messages, records=records, hours=hours, baseline=baseline.summary())

    def decide(
        self, definition: Experiment, recording: SkipRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        result = _run_sync(
            simulate(
                recording.messages, RecordedJudge(recording.records), config, with_cache=True, hours=recording.hours
            )
        )
        summary = result.summary()
        base_calls = recording.baseline["judge_calls"]
        return {
            "calls_saved_pct": round(100 * (1 - summary["judge_calls"] / base_calls), 2) if base_calls else None,
            "judge_calls": summary["judge_calls"],
            "replies": summary["replies"],
            "delay_p95_s": summary["delay_p95_s"],
            "delay_max_s": summary["delay_max_s"],
            "staleness_p95_s": summary["staleness_p95_s"],
            "never_judged": summary["never_judged"],
            "replay_misses": summary["failures"],
            "tokens": summary["tokens"],
            "calls": 0,
        }

    def recording_json(self, recording: SkipRecording) -> dict[str, Any]:
        return {
            "messages": len(recording.messages),
            "recorded_states": len(recording.records),
            "hours": recording.hours,
            "without_cache": recording.baseline,
        }
