"""The skip-cache simulator: a channel workload in simulated time, the periodic checker with and without
the cache, and what the cache saves (judge calls, tokens, cost) against what it costs (the delay from a
message's arrival to its first judgment).

Simulated time: 24 hours of checks run in seconds; a judge's own latency is not simulated time.
Judges: any model (`ModelJudge`), or judgments recorded per conversation state (`RecordedJudge`), which
re-runs a workload under other thresholds with no model call (the Pareto sweep).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine import runctx, stats
from engine.calibration import rank_auc
from engine.events import async_run_context
from engine.inputs import InputError, Problems, iter_lines, problem_lines, read_text
from engine.skipcache import (
    Judge,
    JudgeOutcome,
    JudgmentResult,
    JudgmentSkipConfig,
    JudgmentSkipThreshold,
    LikelihoodJudge,
    ListSource,
    MemoryJudgmentCacheRepository,
    Message,
    ModelJudge,
    PeriodicChecker,
    ProbabilityJudge,
    ResponseConfig,
)
from models.secrets import redact

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store

EPOCH = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # a Monday; simulated time starts here


# -- workloads ------------------------------------------------------------------------------------


MAX_MESSAGES = 50_000  # messages a workload may hold, loaded or generated (the default one has ~900)


class WorkloadSpec(BaseModel):
    """A generated workload: conversation bursts arrive per channel as a Poisson process; a burst is a
    run of messages with exponential gaps, in the channel or in a new thread."""

    model_config = ConfigDict(extra="forbid")

    channels: int = Field(50, ge=1, le=5000)
    hours: float = Field(24.0, gt=0, le=24 * 14)
    bursts_per_hour: float = Field(0.25, gt=0, description="per channel")
    mean_burst_messages: float = Field(3.0, ge=1)
    mean_gap_seconds: float = Field(90.0, gt=0)
    burstiness: float = Field(0.5, ge=0, le=1, description="share of bursts in a busy block of the day")
    thread_share: float = Field(0.3, ge=0, le=1)
    seed: int = 7

    @model_validator(mode="after")
    def _bounded(self) -> WorkloadSpec:
        expected = self.channels * self.hours * self.bursts_per_hour * self.mean_burst_messages
        if expected > MAX_MESSAGES:
            raise ValueError(
                f"these settings would generate about {expected:,.0f} messages; the limit is "
                f"{MAX_MESSAGES:,} — lower channels, hours or the burst rate"
            )
        return self


TEXTS = {
    "question": [
        "誰かこのエラーの直し方わかる？",
        "デプロイってどうやるんだっけ？",
        "Does anyone know how to reset the VPN?",
        "明日の会議って何時からですか？",
        "Where do I find the design doc?",
        "このライブラリおすすめある？",
    ],
    "chatter": [
        "それな",
        "了解です！",
        "lol same",
        "お昼なに食べる？",
        "ナイス！",
        "Sounds good to me",
        "今日は暑いね",
        "あとで見ておきます",
    ],
    "monologue": ["眠い…", "やっと終わった", "hmm", "コーヒー飲もう", "今日も一日がんばろう"],
    "help": ["ずっと詰まってて困ってます…", "I've been stuck on this for an hour, help?", "誰も反応してくれない…"],
}
AUTHORS = ["aki", "ben", "chika", "dan", "emi", "fumi", "gus", "hana"]


def generate_workload(spec: WorkloadSpec) -> list[Message]:
    """Deterministic for a seed."""
    rng = random.Random(spec.seed)
    horizon = spec.hours * 3600
    busy_start, busy_len = 9 * 3600, 9 * 3600  # 09:00–18:00 carries `burstiness` of the bursts
    messages: list[Message] = []
    kinds = list(TEXTS)
    weights = [0.35, 0.4, 0.15, 0.1]
    for c in range(spec.channels):
        channel = f"C{c:03d}"
        expected = spec.bursts_per_hour * spec.hours
        count = _poisson(rng, expected)
        for b in range(count):
            if rng.random() < spec.burstiness:
                day = rng.randrange(max(1, math.ceil(spec.hours / 24)))
                start = day * 86400 + busy_start + rng.random() * busy_len
            else:
                start = rng.random() * horizon
            if start >= horizon:
                continue
            thread = f"{channel}-t{b}" if rng.random() < spec.thread_share else None
            n = 1 + _poisson(rng, spec.mean_burst_messages - 1)
            t = start
            kind = rng.choices(kinds, weights)[0]
            for i in range(n):
                if t >= horizon:
                    break
                messages.append(
                    Message(
                        id=f"{channel}-{b}-{i}",
                        channel_id=channel,
                        thread_ts=thread,
                        author=rng.choice(AUTHORS),
                        text=rng.choice(TEXTS[kind if i == 0 else rng.choice(["chatter", kind])]),
                        at=EPOCH + timedelta(seconds=round(t)),
                    )
                )
                t += rng.expovariate(1 / spec.mean_gap_seconds)
    return sorted(messages, key=lambda m: (m.at, m.id))


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:  # normal approximation keeps big workloads fast
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


class WorkloadError(ValueError):
    def __init__(self, problems: list[str], header: str | None = "bad rows, nothing imported:") -> None:

        self.problems = problems
        super().__init__(problem_lines(problems, header))  # header None: the whole file is unusable


def load_workload(path: Path) -> list[Message]:
    """JSONL of {t (seconds), channel, thread (or null), id, author, text}; bad rows named by line."""

    try:
        content = read_text(path)
    except InputError as exc:
        raise WorkloadError([str(exc)], header=None) from None
    return parse_workload(content, str(path))


MAX_T_S = 366 * 24 * 3600.0  # a workload spans at most a year of simulated time


def parse_workload(content: str, source: str = "workload") -> list[Message]:

    messages, problems, seen = [], Problems(), set()
    for number, line in iter_lines(content):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("expected an object")
            try:
                t = float(row["t"])
            except (TypeError, ValueError):
                raise ValueError(f"'t' must be a number of seconds, not {row['t']!r}") from None
            if not math.isfinite(t) or not 0 <= t <= MAX_T_S:
                raise ValueError(f"'t' must be seconds from 0 to {MAX_T_S:.0f} (a year), not {row['t']!r}")
            message_id = str(row["id"])
            if message_id in seen:
                raise ValueError(f"duplicate id {message_id}")
            seen.add(message_id)
            thread = row.get("thread")
            messages.append(
                Message(
                    id=message_id,
                    channel_id=str(row["channel"]),
                    thread_ts=None if thread in (None, "") else str(thread),
                    author=str(row.get("author", "user")),
                    text=str(row.get("text", "")),
                    at=EPOCH + timedelta(seconds=t),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{source}:{number}: {exc if not isinstance(exc, KeyError) else f'missing {exc}'}")
        if len(messages) > MAX_MESSAGES:  # refused at once: the rest of a huge file is never parsed
            raise WorkloadError(
                [
                    f"{source}:{number}: more than {MAX_MESSAGES:,} messages; a workload holds at most "
                    f"{MAX_MESSAGES:,} — split it by channel or by time"
                ],
                header=None,
            )
    if problems:
        raise WorkloadError(problems)
    if not messages:
        raise WorkloadError([f"{source}: no messages"], header=None)
    if len(messages) > MAX_MESSAGES:
        raise WorkloadError(
            [
                f"{source}: {len(messages):,} messages; a workload holds at most {MAX_MESSAGES:,} "
                "— split it by channel or by time"
            ],
            header=None,
        )
    return sorted(messages, key=lambda m: (m.at, m.id))


def dump_workload(messages: Sequence[Message], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for m in messages:
            fh.write(
                json.dumps(
                    {
                        "t": (m.at - EPOCH).total_seconds(),
                        "channel": m.channel_id,
                        "thread": m.thread_ts,
                        "id": m.id,
                        "author": m.author,
                        "text": m.text,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )


# -- judges over recorded states -------------------------------------------------------------------


def state_key(history: Sequence[Message]) -> str:
    """A conversation state: the scope and the message it is judged on."""
    return f"{history[-1].scope}|{history[-1].id}"


class RecordedJudgment(BaseModel):
    """One line of a recording (`skip simulate --record`)."""

    state: str
    should_respond: bool
    reason: str
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    cost: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    call_id: int | None = None
    flags: list[str] = Field(default_factory=list)


class RecordedJudge:
    """Judgments recorded per conversation state; a state judged again gets the same judgment and is
    counted as a call with the tokens and cost it had. States never recorded go to `fallback`."""

    def __init__(self, records: dict[str, JudgeOutcome], fallback: Judge | None = None) -> None:
        self.records = records
        self.fallback = fallback
        self.live_calls = 0

    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome:
        key = state_key(history)
        if key in self.records:
            return self.records[key]
        if self.fallback is None:
            return JudgeOutcome(result=None, error=f"ReplayMiss: state {key} was not recorded")
        outcome = await self.fallback.judge(history, now)
        self.live_calls += 1
        if outcome.result is not None:
            self.records[key] = outcome
        return outcome

    def dump(self, path: Path) -> None:
        """Write the recording (an export: keys a reason may echo are redacted)."""

        with path.open("w", encoding="utf-8") as fh:
            for key, o in sorted(self.records.items()):
                if o.result is not None:
                    fh.write(
                        redact(
                            json.dumps(
                                {
                                    "state": key,
                                    **o.result.model_dump(),
                                    "prompt_tokens": o.prompt_tokens,
                                    "completion_tokens": o.completion_tokens,
                                    "cost": o.cost,
                                    "call_id": o.call_id,
                                },
                                ensure_ascii=False,
                            )
                        )
                        + "\n"
                    )

    @classmethod
    def load(cls, path: Path, fallback: Judge | None = None) -> RecordedJudge:
        """Recorded judgments, one JSON object a line; any bad line is a WorkloadError naming it."""

        try:
            content = read_text(path)
        except InputError as exc:
            raise WorkloadError([str(exc)], header=None) from None
        records, problems = {}, Problems()
        for number, line in iter_lines(content):
            if not line.strip():
                continue
            try:
                row = RecordedJudgment.model_validate_json(line)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                problems.append(f"{path}:{number}: {where + ': ' if where else ''}{err['msg']}")
                continue
            records[row.state] = JudgeOutcome(
                result=JudgmentResult(
                    should_respond=row.should_respond, reason=row.reason, confidence=row.confidence, flags=row.flags
                ),
                prompt_tokens=row.prompt_tokens,
                completion_tokens=row.completion_tokens,
                cost=row.cost,
                call_id=row.call_id,
            )
        if problems:
            raise WorkloadError(problems, header="not a recording of judgments, nothing loaded:")
        if not records:
            raise WorkloadError([f"{path}: no recorded judgments"], header=None)
        return cls(records, fallback)


# -- running --------------------------------------------------------------------------------------


class ShadowJudge:
    """A second judge beside a recording: the recorded judgments drive the simulation (so it reaches the same
    conversation states, with the same replies before them), while `shadow` judges each state it reaches once.
    What `shadow` said is kept in `records`; `on_new` hears of each new one (to write it out as it goes)."""

    def __init__(
        self,
        driver: RecordedJudge,
        shadow: Judge,
        records: dict[str, JudgeOutcome] | None = None,
        on_new: Callable[[], None] | None = None,
    ) -> None:
        self.driver = driver
        self.shadow = shadow
        self.records: dict[str, JudgeOutcome] = records if records is not None else {}
        self.on_new = on_new
        self.live_calls = 0

    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome:
        key = state_key(history)
        if key not in self.records:
            outcome = await self.shadow.judge(history, now)
            self.live_calls += 1
            if outcome.result is not None:
                self.records[key] = outcome
                if self.on_new is not None:
                    self.on_new()
        return await self.driver.judge(history, now)


async def record_alongside(
    messages: Sequence[Message],
    recording: Path,
    shadow: Judge,
    output: Path,
    config: ResponseConfig | None = None,
    *,
    hours: float | None = None,
    write_every: int = 25,
    progress: Callable[[float], None] | None = None,
) -> tuple[int, int]:
    """Another judge's recording of the very states `recording` holds: both simulations (without and with the
    cache) driven by `recording`, `shadow` judging every state they reach. `output` is written every
    `write_every` new judgments and at the end, and a partial `output` is resumed, so a long recording can be
    made a few minutes at a time. Returns (judgments now in `output`, live calls made)."""
    driver = RecordedJudge.load(recording)
    records = RecordedJudge.load(output).records if output.is_file() else {}
    pending = 0

    def written() -> None:
        nonlocal pending
        pending += 1
        if pending >= write_every:
            RecordedJudge(records).dump(output)
            pending = 0

    judge = ShadowJudge(driver, shadow, records, on_new=written)
    try:
        for share, with_cache in ((0.0, False), (0.5, True)):
            step = None if progress is None else (lambda done, at=share: progress(at + done / 2))
            await simulate(messages, judge, config, with_cache=with_cache, hours=hours, progress=step)
    finally:
        RecordedJudge(records).dump(output)
    return len(records), judge.live_calls


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
    start = EPOCH
    # Checks run to the end of the period, then on until the last message could be judged.
    drained = (max((m.at - EPOCH).total_seconds() for m in messages) if messages else 0) + (
        config.min_wait_seconds + config.check_interval_seconds
    )
    end_s = max(hours * 3600 if hours is not None else 0.0, drained)
    source = ListSource(messages)
    judgments: list[Judgment] = []
    hits: list[tuple[str, datetime, float]] = []
    last_judged: dict[str, datetime] = {}
    failures: list[tuple[str, datetime, str]] = []
    timeline: list[dict[str, Any]] = []
    arrival = {m.id: m.at for m in messages}

    def emit(type_: str, **p: Any) -> None:
        if type_ == "judgment":
            judgments.append(
                Judgment(
                    scope=p["scope"],
                    at=now,
                    target=p["latest"],
                    target_at=arrival[p["latest"]],
                    should_respond=p["should_respond"],
                    confidence=p["confidence"],
                    skip_seconds=p["skip_seconds"],
                    prompt_tokens=p["prompt_tokens"],
                    completion_tokens=p["completion_tokens"],
                    cost=p["cost"],
                    flags=list(p.get("flags", [])),
                )
            )
            last_judged[p["scope"]] = now
        elif type_ == "cache_hit":
            hits.append((p["scope"], now, (now - last_judged.get(p["scope"], now)).total_seconds()))
        elif type_ == "judgment_failed":
            failures.append((p["scope"], now, p["error"]))
        if keep_timeline:
            timeline.append({"type": type_, "t": (now - start).total_seconds(), **p})

    checker = PeriodicChecker(source, judge, MemoryJudgmentCacheRepository(), config, emit=emit)
    checks = 0
    replies: list[tuple[str, datetime]] = []
    t = 0.0
    total_checks = int(end_s // config.check_interval_seconds) + 1
    every = max(1, total_checks // 50)
    while t <= end_s:
        now = start + timedelta(seconds=t)
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
                timeline.append({"type": "reply", "t": t, "scope": scope})
        t += config.check_interval_seconds
    delays, never = _first_judgment_delays(messages, judgments, replies)
    return SimulationResult(
        with_cache=with_cache,
        judgments=judgments,
        cache_hits=hits,
        failures=failures,
        replies=sum(1 for j in judgments if j.should_respond),
        delays_s=delays,
        never_judged=never,
        checks=checks,
        messages=len(messages),
        timeline=timeline,
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
) -> list[dict[str, Any]]:
    """Every grid configuration re-simulated with the cache and the judgments a run recorded — no model
    call — with the Pareto front of judge calls against staleness p95 marked."""
    rows = []
    for high_s, default_s, cfg in sweep_configs(base, high_skip, default_skip):
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


# -- how good is the judge? ------------------------------------------------------------------------------

SHOULD_ANSWER = frozenset({"question", "help"})


def generated_labels(messages: Sequence[Message]) -> dict[str, bool]:
    """For a generated workload: message id → whether its conversation burst should get an answer
    (the burst was opened by a question or a help request; chatter and monologues should not)."""
    kind_of = {text: kind for kind, texts in TEXTS.items() for text in texts}
    by_id = {m.id: m for m in messages}
    labels = {}
    for m in messages:
        opener = by_id.get(m.id.rsplit("-", 1)[0] + "-0")
        if opener is not None and opener.text in kind_of:
            labels[m.id] = kind_of[opener.text] in SHOULD_ANSWER
    return labels


def judged_states(judge: RecordedJudge, labels: dict[str, bool]) -> dict[str, tuple[float, bool]]:
    """Each recorded state whose message has a label: p(respond) (= confidence when it responds, 1 − confidence
    when it declines) and the label; what two judges are compared on, state by state."""
    out = {}
    for key, outcome in judge.records.items():
        mid = key.rsplit("|", 1)[-1]
        if outcome.result is None or mid not in labels:
            continue
        r = outcome.result
        out[key] = (r.confidence if r.should_respond else 1 - r.confidence, labels[mid])
    return out


def judge_quality(judge: RecordedJudge, labels: dict[str, bool]) -> dict[str, Any]:
    """How recorded judgments rank and decide against labels: AUC of p(respond) (= confidence when it
    responds, 1 − confidence when it declines), accuracy, and the share of judgments with confidence
    ≥ 0.7 (the seed's first threshold below which every decline gets the default window)."""
    scored = []
    for key, outcome in judge.records.items():
        mid = key.rsplit("|", 1)[-1]
        if outcome.result is None or mid not in labels:
            continue
        r = outcome.result
        p = r.confidence if r.should_respond else 1 - r.confidence
        scored.append((p, labels[mid], r.should_respond, r.confidence))
    pos = [p for p, y, *_ in scored if y]
    neg = [p for p, y, *_ in scored if not y]
    auc = rank_auc(pos, neg)
    n = len(scored)
    right = sum(d == y for _, y, d, _ in scored)
    auc_ci = stats.bootstrap(stats.w_auc([p for p, *_ in scored], [y for _, y, *_ in scored]))[1] if n else None
    accuracy_ci = stats.wilson(right, n)
    return {
        "judged_states": n,
        "auc": None if auc is None else round(auc, 3),
        "auc_ci": auc_ci.as_list(3) if auc_ci else None,
        "accuracy": round(right / n, 3) if n else None,
        "accuracy_ci": accuracy_ci.as_list(3) if accuracy_ci else None,
        "share_confidence_ge_0_7": round(sum(c >= 0.7 for *_, c in scored) / n, 3) if n else None,
    }


# -- the entry point: one simulation run, called alike by the page and the CLI ------------------------------

LiveMethod = Literal["likelihood", "structured", "probability"]


class FileRef(BaseModel):
    """A file by name and content: the same file whether a page uploaded it or the CLI read its path."""

    model_config = ConfigDict(extra="forbid")

    name: str
    sha256: str
    messages: int = Field(ge=0)

    @classmethod
    def of(cls, name: str, content: str, messages: int) -> FileRef:

        return cls(name=Path(name).name, sha256=hashlib.sha256(content.encode("utf-8")).hexdigest(), messages=messages)


class SimulationConfig(BaseModel):
    """`skip.simulate`: a workload (generated from a spec, or a file whose parsed messages come along), a
    judge (a live model, recorded judgments, or both: the recording first), and the checker's settings."""

    model_config = ConfigDict(extra="forbid")

    workload: WorkloadSpec | None = Field(None, description="a generated workload")
    workload_file: FileRef | None = Field(None, description="a workload file; its messages go to the run")
    hours: float | None = Field(
        None,
        gt=0,
        description="simulated period; default: a generated workload's "
        "hours, else until the last message could be judged",
    )
    model_id: str | None = Field(None, description="a live judge for every state the recording lacks")
    method: LiveMethod = "likelihood"
    recording: str | None = Field(None, description="recorded judgments (JSONL), stored as an absolute path")
    response: ResponseConfig = Field(default_factory=ResponseConfig)

    @model_validator(mode="after")
    def _complete(self) -> SimulationConfig:
        if (self.workload is None) == (self.workload_file is None):
            raise ValueError("give either a generated workload or a workload file")
        if self.model_id is None and self.recording is None:
            raise ValueError("choose a judge: a model, or recorded judgments")
        if self.recording is not None:
            self.recording = str(Path(self.recording).resolve())
        return self

    @property
    def period_hours(self) -> float | None:
        if self.hours is not None:
            return self.hours
        return self.workload.hours if self.workload is not None else None


@dataclass
class SimulationReport:
    """Both simulations compared, the with-cache one in detail (timeline kept), and the judgments made."""

    run_id: str
    comparison: dict[str, Any]
    detail: SimulationResult
    messages: list[Message]
    records: dict[str, JudgeOutcome]
    live_calls: int
    sweep: list[dict[str, Any]] = field(default_factory=list)  # the trade-off grid (`sweep`)


def _check_count(messages: Sequence[Message], config: ResponseConfig, hours: float | None) -> int:
    """How many checks `simulate` makes (its own formula), for an honest progress total."""
    drained = (max((m.at - EPOCH).total_seconds() for m in messages) if messages else 0) + (
        config.min_wait_seconds + config.check_interval_seconds
    )
    end_s = max(hours * 3600 if hours is not None else 0.0, drained)
    return int(end_s // config.check_interval_seconds) + 1


async def run_simulation(
    config: SimulationConfig,
    models: ModelSource | None,
    store: Store,
    *,
    messages: Sequence[Message] | None = None,
    sinks: list[EventSink] | None = None,
) -> SimulationReport:
    """Simulate without and then with the cache as a stored run of kind `skip.simulate`; progress counts
    the checks of both. Then the trade-off grid (`TRADEOFF_*_SKIP`) re-simulated with the judgments just made
    (no model call), kept in the run's summary under "sweep" so a page shows it without computing anything.
    A broken recording is a WorkloadError before the run opens."""

    if config.workload is not None:
        messages = generate_workload(config.workload)
    elif messages is None:
        raise ValueError(
            f"the messages of {config.workload_file.name if config.workload_file else 'the workload'} are needed"
        )
    live: Judge | None = None
    if config.model_id is not None:
        if models is None:
            raise ValueError("a live judge needs a model source")
        kinds = {"likelihood": LikelihoodJudge, "probability": ProbabilityJudge, "structured": ModelJudge}
        live = kinds[config.method](models(config.model_id))
    judge = RecordedJudge.load(Path(config.recording), live) if config.recording else RecordedJudge({}, live)
    hours = config.period_hours
    checks = _check_count(messages, config.response, hours)

    def follow(offset: int, label: str) -> Callable[[float], None]:
        return lambda share: runctx.progress(done=offset + round(share * checks), step=label)

    async with async_run_context(store, "skip.simulate", config.model_dump(mode="json"), sinks=sinks) as run:
        runctx.progress(total=2 * checks, step="without cache")
        without = await simulate(
            messages, judge, config.response, with_cache=False, hours=hours, progress=follow(0, "without cache")
        )
        runctx.progress(done=checks, step="with cache")
        detail = await simulate(
            messages,
            judge,
            config.response,
            with_cache=True,
            hours=hours,
            keep_timeline=True,
            progress=follow(checks, "with cache"),
        )
        runctx.progress(done=2 * checks, step="trade-off sweep over the recorded judgments")
        comparison = compare_results(without, detail, config.response)
        grid = await sweep(messages, judge.records, config.response, hours, TRADEOFF_HIGH_SKIP, TRADEOFF_DEFAULT_SKIP)
        runctx.progress(done=2 * checks, step="compared")
        run.summary = {
            "calls_saved_pct": comparison["calls_saved_pct"],
            "live_calls": judge.live_calls,
            "result": comparison,
            "sweep": grid,
        }
    return SimulationReport(
        run_id=run.run_id,
        comparison=comparison,
        detail=detail,
        messages=list(messages),
        records=judge.records,
        live_calls=judge.live_calls,
        sweep=grid,
    )
