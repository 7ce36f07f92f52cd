"""The simulation: the periodic checker over a workload in simulated time (24 hours of checks in seconds; a
judge's own latency is not simulated time), with and without the cache, and what the cache saves (judge calls,
tokens, cost) against what it costs (the delay from a message's arrival to its first judgment)."""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from engine import stats
from engine.skip.cache import MemoryJudgmentCacheRepository
from engine.skip.checker import PeriodicChecker
from engine.skip.config import ResponseConfig
from engine.skip.judges import Judge
from engine.skip.messages import ListSource, Message
from engine.skip.workload import EPOCH


@dataclass
class Judgment:
    scope: str
    at: datetime
    target: str
    target_at: datetime
    should_respond: bool
    confidence: float
    skip_seconds: int | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    flags: list[str] = field(default_factory=list)  # a failed field: the judgment was not cached


@dataclass
class SimulationResult:
    with_cache: bool
    judgments: list[Judgment]
    cache_hits: list[tuple[str, datetime, float]]  # scope, when, age of the cached judgment (s)
    failures: list[tuple[str, datetime, str]]
    replies: int
    delays_s: list[float]  # arrival → first judgment, per judged message
    never_judged: int
    checks: int
    messages: int
    timeline: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.judgments)

    def summary(self) -> dict[str, Any]:
        delays = sorted(self.delays_s)
        ages = sorted(age for _, _, age in self.cache_hits)
        tokens = sum(j.prompt_tokens + j.completion_tokens for j in self.judgments)
        return {
            "with_cache": self.with_cache,
            "messages": self.messages,
            "checks": self.checks,
            "judge_calls": self.calls,
            "cache_hits": len(self.cache_hits),
            "failures": len(self.failures),
            "replies": self.replies,
            "tokens": tokens,
            "cost": sum(j.cost for j in self.judgments),
            "delay_median_s": statistics.median(delays) if delays else None,
            "delay_p95_s": _percentile(delays, 0.95) if delays else None,
            "delay_max_s": delays[-1] if delays else None,
            "never_judged": self.never_judged,
            # Judgments with a failed field (confidence missing, out of range, …): decided, never cached.
            "flagged_judgments": sum(1 for j in self.judgments if j.flags),
            # How old the judgment was whenever a check relied on the cache instead of judging: the
            # price of long skip windows (a waiting conversation is looked at again this late).
            "staleness_p95_s": _percentile(ages, 0.95) if ages else 0.0,
            "staleness_max_s": ages[-1] if ages else 0.0,
        }


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return float(sorted_values[rank - 1])


def end_seconds(messages: Sequence[Message], config: ResponseConfig, hours: float | None) -> float:
    """Where a simulation's checks stop: the end of the period, or later, once the last message could be judged."""
    drained = (max((m.at - EPOCH).total_seconds() for m in messages) if messages else 0) + (
        config.min_wait_seconds + config.check_interval_seconds
    )
    return max(hours * 3600 if hours is not None else 0.0, drained)


def check_count(messages: Sequence[Message], config: ResponseConfig, hours: float | None) -> int:
    """How many checks `simulate` makes, for an honest progress total."""
    return int(end_seconds(messages, config, hours) // config.check_interval_seconds) + 1


@dataclass
class _Tally:
    """What the checker's events of one simulation add up to (its `emit`), at the simulated time `now`."""

    arrival: dict[str, datetime]
    keep_timeline: bool
    now: datetime = EPOCH
    judgments: list[Judgment] = field(default_factory=list)
    hits: list[tuple[str, datetime, float]] = field(default_factory=list)
    failures: list[tuple[str, datetime, str]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    last_judged: dict[str, datetime] = field(default_factory=dict)

    def emit(self, type_: str, **p: Any) -> None:
        now = self.now
        if type_ == "judgment":
            self.judgments.append(
                Judgment(
                    scope=p["scope"],
                    at=now,
                    target=p["latest"],
                    target_at=self.arrival[p["latest"]],
                    should_respond=p["should_respond"],
                    confidence=p["confidence"],
                    skip_seconds=p["skip_seconds"],
                    prompt_tokens=p["prompt_tokens"],
                    completion_tokens=p["completion_tokens"],
                    cost=p["cost"],
                    flags=list(p.get("flags", [])),
                )
            )
            self.last_judged[p["scope"]] = now
        elif type_ == "cache_hit":
            self.hits.append((p["scope"], now, (now - self.last_judged.get(p["scope"], now)).total_seconds()))
        elif type_ == "judgment_failed":
            self.failures.append((p["scope"], now, p["error"]))
        if self.keep_timeline:
            self.timeline.append({"type": type_, "t": (now - EPOCH).total_seconds(), **p})


async def simulate(
    messages: Sequence[Message],
    judge: Judge,
    config: ResponseConfig | None = None,
    *,
    with_cache: bool = True,
    hours: float | None = None,
    keep_timeline: bool = False,
    progress: Callable[[float], None] | None = None,
) -> SimulationResult:
    """Run the periodic checker over the workload in simulated time; `progress` gets the share done
    (0–1) every 2 % of the checks, so a long simulation shows that it moves."""
    config = (config or ResponseConfig()).model_copy(deep=True)
    config.judgment_skip.enabled = with_cache
    # Checks run to the end of the period, then on until the last message could be judged.
    end_s = end_seconds(messages, config, hours)
    tally = _Tally(arrival={m.id: m.at for m in messages}, keep_timeline=keep_timeline)
    checker = PeriodicChecker(ListSource(messages), judge, MemoryJudgmentCacheRepository(), config, emit=tally.emit)
    checks = 0
    replies: list[tuple[str, datetime]] = []
    t = 0.0
    total_checks = check_count(messages, config, hours)
    every = max(1, total_checks // 50)
    while t <= end_s:
        now = tally.now = EPOCH + timedelta(seconds=t)
        report = await checker.check(now)
        checks += 1
        if checks % every == 0:
            if progress is not None:
                progress(checks / total_checks)
            # A check answered from the cache or a recording never awaits anything: hand the loop to the
            # dashboard's other work (its availability probes, other runs) now and then.
            await asyncio.sleep(0)
        for scope in report.responded:
            replies.append((scope, now))
            if keep_timeline:
                tally.timeline.append({"type": "reply", "t": t, "scope": scope})
        t += config.check_interval_seconds
    delays, never = _first_judgment_delays(messages, tally.judgments, replies)
    return SimulationResult(
        with_cache=with_cache,
        judgments=tally.judgments,
        cache_hits=tally.hits,
        failures=tally.failures,
        replies=sum(1 for j in tally.judgments if j.should_respond),
        delays_s=delays,
        never_judged=never,
        checks=checks,
        messages=len(messages),
        timeline=tally.timeline,
    )


def _first_judgment_delays(
    messages: Sequence[Message], judgments: Sequence[Judgment], replies: Sequence[tuple[str, datetime]]
) -> tuple[list[float], int]:
    """When each message was first dealt with: the first judgment of its scope on it or a later message,
    or a reply in its scope after it arrived (a reply answers the conversation so far)."""
    events: dict[str, list[tuple[datetime, datetime]]] = {}  # scope → (time, covers messages up to)
    for j in judgments:
        events.setdefault(j.scope, []).append((j.at, j.target_at))
    for scope, at in replies:
        events.setdefault(scope, []).append((at, at))
    for items in events.values():
        items.sort()
    delays, never = [], 0
    for m in messages:
        first = next((at for at, covers in events.get(m.scope, []) if covers >= m.at and at >= m.at), None)
        if first is None:
            never += 1
        else:
            delays.append((first - m.at).total_seconds())
    return delays, never


def delay_bound(summary: dict[str, Any], config: ResponseConfig | None = None) -> tuple[int, bool | None]:
    """The first-judgment delay bound (min wait + one check interval) and whether the slowest first
    judgment stayed within it — None (n/a) when nothing was judged, never a vacuous "within bound"."""
    config = config or ResponseConfig()
    bound = config.min_wait_seconds + config.check_interval_seconds
    worst = summary.get("delay_max_s")
    return bound, None if worst is None else worst <= bound


def bound_text(met: bool | None) -> str:
    return "n/a (nothing was judged)" if met is None else "within bound" if met else "over bound"


async def compare(
    messages: Sequence[Message],
    judge: Judge,
    config: ResponseConfig | None = None,
    hours: float | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> dict[str, Any]:
    """With and without the cache on the same workload and judge: what the cache saves, what it costs,
    and whether the cache kept every first judgment within the delay bound (None: nothing judged).
    `progress(label, share)` follows each of the two simulations."""

    def follow(label: str) -> Callable[[float], None] | None:
        return None if progress is None else (lambda share: progress(label, share))

    without = await simulate(messages, judge, config, with_cache=False, hours=hours, progress=follow("without cache"))
    with_ = await simulate(messages, judge, config, with_cache=True, hours=hours, progress=follow("with cache"))
    return compare_results(without, with_, config)


def compare_results(
    without: SimulationResult, with_: SimulationResult, config: ResponseConfig | None = None
) -> dict[str, Any]:
    """What the cache saved (calls, tokens, cost) and whether it kept every first judgment within the bound."""
    a, b = without.summary(), with_.summary()
    saved = 1 - b["judge_calls"] / a["judge_calls"] if a["judge_calls"] else 0.0
    bound, met = delay_bound(b, config)
    return {
        "without_cache": a,
        "with_cache": b,
        "calls_saved_pct": round(100 * saved, 2),
        "calls_saved_pct_ci": calls_saved_interval(without, with_),
        "conversations": len({j.scope for j in without.judgments}),
        "tokens_saved": a["tokens"] - b["tokens"],
        "cost_saved": a["cost"] - b["cost"],
        "delay_bound_s": bound,
        "delay_bound_met": met,
    }


def calls_saved_interval(without: SimulationResult, with_: SimulationResult) -> list[float] | None:
    """95 % interval of the share of judge calls saved, in percent, from a seeded bootstrap over conversation
    scopes (a scope's calls depend on each other through its cache window; scopes do not). None with fewer
    than two scopes: one conversation says nothing about the next."""
    scopes = sorted({j.scope for j in without.judgments})
    if len(scopes) < 2:
        return None
    before = Counter(j.scope for j in without.judgments)
    after = Counter(j.scope for j in with_.judgments)
    base = np.array([before[s] for s in scopes], dtype=float)
    kept = np.array([after[s] for s in scopes], dtype=float)
    interval = stats.bootstrap(stats.w_ratio(kept, base))[1]  # the share of calls kept
    return [round(100 * (1 - interval.high), 2), round(100 * (1 - interval.low), 2)] if interval else None
