"""The trade-off sweep: a grid of skip windows re-simulated with the judgments a run recorded (no model call), with
the Pareto front of judge calls against staleness marked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.skip.config import JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.judges import JudgeOutcome
from engine.skip.messages import Message
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import simulate

SWEEP_HIGH_SKIP = (3600, 21600, 43200)
SWEEP_DEFAULT_SKIP = (120, 600, 1800)
# The grid a simulation run sweeps for its trade-off chart: wider than the default above, down to short windows,
# so a small workload (the demo's 3 channels over 2 hours) shows more than the two outcomes long windows give.
TRADEOFF_HIGH_SKIP = (600, 3600, 21600, 43200)
TRADEOFF_DEFAULT_SKIP = (0, 60, 600, 1800)


def sweep_configs(
    base: ResponseConfig, high_skip: Sequence[int] = SWEEP_HIGH_SKIP, default_skip: Sequence[int] = SWEEP_DEFAULT_SKIP
) -> list[tuple[int, int, ResponseConfig]]:
    """The trade-off grid around `base`: its confidence thresholds stay; the highest one skips `high_s`
    (the others at most that), and a decline below them skips `default_s`. (high_s, default_s, config)."""
    ordered = sorted(base.judgment_skip.thresholds, key=lambda t: -t.min_confidence)
    grid = []
    for high_s in high_skip:
        for default_s in default_skip:
            cfg = base.model_copy(deep=True)
            cfg.judgment_skip = JudgmentSkipConfig(
                thresholds=[
                    JudgmentSkipThreshold(
                        min_confidence=t.min_confidence, skip_seconds=high_s if i == 0 else min(t.skip_seconds, high_s)
                    )
                    for i, t in enumerate(ordered)
                ],
                default_skip_seconds=default_s,
            )
            grid.append((high_s, default_s, cfg))
    return grid


async def sweep(
    messages: Sequence[Message],
    records: dict[str, JudgeOutcome],
    base: ResponseConfig,
    hours: float | None = None,
    high_skip: Sequence[int] = SWEEP_HIGH_SKIP,
    default_skip: Sequence[int] = SWEEP_DEFAULT_SKIP,
    progress: Callable[[int], object] | None = None,
) -> list[dict[str, Any]]:
    """Every grid configuration re-simulated with the cache and the judgments a run recorded — no model
    call — with the Pareto front of judge calls against staleness p95 marked; `progress(k)` after the k-th."""
    rows: list[dict[str, Any]] = []
    for high_s, default_s, cfg in sweep_configs(base, high_skip, default_skip):
        if progress is not None and rows:
            progress(len(rows))
        out = (await simulate(messages, RecordedJudge(dict(records)), cfg, with_cache=True, hours=hours)).summary()
        rows.append(
            {
                "high skip s": high_s,
                "default skip s": default_s,
                "judge calls": out["judge_calls"],
                "staleness p95 s": out["staleness_p95_s"],
                "first-judgment delay p95 s": out["delay_p95_s"],
                "first-judgment delay max s": out["delay_max_s"],
                "misses": out["failures"],
            }
        )
    front = set(pareto_front([(r["judge calls"], r["staleness p95 s"]) for r in rows]))
    return [r | {"pareto": i in front} for i, r in enumerate(rows)]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated when both values are to be minimised (calls, delay)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for x2, y2 in points):
            front.append(i)
    return front
