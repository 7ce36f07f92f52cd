"""Judgments recorded per conversation state: `RecordedJudge` re-runs a workload under other thresholds with no
model call, and `record_alongside` records another judge on the very states a recording holds."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from engine.inputs import InputError, Problems, iter_lines, read_text
from engine.skip.config import ResponseConfig
from engine.skip.decisions import JudgmentResult
from engine.skip.judges import Judge, JudgeOutcome
from engine.skip.messages import Message
from engine.skip.simulation import simulate
from engine.skip.workload import WorkloadError
from models.files import write_atomic
from models.secrets import redact


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
        """Write the recording (an export: keys a reason may echo are redacted), whole or not at all: a kill
        while it is written every few judgments leaves the previous one, which a resumed recording reads."""

        lines = [
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
            + "\n"
            for key, o in sorted(self.records.items())
            if o.result is not None
        ]
        write_atomic(path, redact("".join(lines)))

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
