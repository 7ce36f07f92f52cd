"""Workloads in simulated time: generated (conversation bursts per channel as a Poisson process, deterministic for
a seed) or loaded from JSONL, with every bad row named; `EPOCH` is where simulated time starts."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.inputs import InputError, Problems, iter_lines, problem_lines, read_text
from engine.skip.messages import Message

EPOCH = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # a Monday; simulated time starts here


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
                fraction = rng.random()
                start = day * 86400 + busy_start + fraction * busy_len
                if start >= horizon:  # the busy block lies past the end (a short or partial day): within it instead
                    start = _within_busy(fraction, horizon, busy_start, busy_len)
            else:
                start = rng.random() * horizon
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


def _within_busy(fraction: float, horizon: float, busy_start: float, busy_len: float) -> float:
    """The point `fraction` of the way through the busy time inside [0, horizon), or through the whole horizon when
    none of it is inside (a 4-hour workload from midnight): a busy burst is placed, never dropped, so a workload
    holds the bursts its rate asks for. The same draw as before: workloads whose busy blocks fit keep every message."""
    blocks = []
    for day in range(math.ceil(horizon / 86400)):
        start = day * 86400 + busy_start
        if start < horizon:
            blocks.append((start, min(start + busy_len, horizon)))
    total = sum(end - start for start, end in blocks)
    if total <= 0:
        return fraction * horizon
    left = fraction * total
    for start, end in blocks:
        if left < end - start:
            return start + left
        left -= end - start
    return blocks[-1][1] - 1e-6


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


def workload_words(workload: dict[str, Any]) -> str:
    """A generated workload in words (not its dict): '3 channels · 2 h · 1 burst per channel per hour · 3
    messages per burst · seed 7'."""
    return (
        f"{workload.get('channels')} channels · {float(workload.get('hours', 0)):g} h · "
        f"{float(workload.get('bursts_per_hour', 0)):g} burst(s) per channel per hour · "
        f"{float(workload.get('mean_burst_messages', 0)):g} messages per burst · seed {workload.get('seed')}"
    )


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
