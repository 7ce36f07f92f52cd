"""The `skip.simulate` run kind, called alike by the page and the CLI: a workload and a judge (a live model,
recorded judgments, or both) simulated without and with the cache as a stored run, with its trade-off sweep."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine import runctx
from engine.events import async_run_context
from engine.skip.config import ResponseConfig
from engine.skip.judges import Judge, JudgeOutcome, LikelihoodJudge, ModelJudge, ProbabilityJudge
from engine.skip.messages import Message
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import SimulationResult, check_count, compare_results, simulate
from engine.skip.sweep import TRADEOFF_DEFAULT_SKIP, TRADEOFF_HIGH_SKIP, sweep, sweep_configs
from engine.skip.workload import WorkloadSpec, generate_workload

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store


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
    checks = check_count(messages, config.response, hours)

    def follow(offset: int, label: str) -> Callable[[float], None]:
        return lambda share: runctx.progress(done=offset + round(share * checks), step=label)

    # The steps that run, in checks: both simulations, then the trade-off sweep's configurations (each a
    # simulation with the cache: about `checks` more), so the bar and the ETA include the sweep.
    configs = len(sweep_configs(config.response, TRADEOFF_HIGH_SKIP, TRADEOFF_DEFAULT_SKIP))

    def swept(k: int) -> None:
        runctx.progress(done=(2 + k) * checks, step=f"trade-off sweep: {k} of {configs} settings")

    async with async_run_context(store, "skip.simulate", config.model_dump(mode="json"), sinks=sinks) as run:
        runctx.progress(total=(2 + configs) * checks, step="without cache", unit="checks")
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
        runctx.progress(done=2 * checks, step=f"trade-off sweep: 0 of {configs} settings")
        comparison = compare_results(without, detail, config.response)
        grid = await sweep(
            messages, judge.records, config.response, hours, TRADEOFF_HIGH_SKIP, TRADEOFF_DEFAULT_SKIP, swept
        )
        runctx.progress(done=(2 + configs) * checks, step="compared")
        busiest = scope_timeline(messages, detail)
        if busiest:
            run.emit("skip_scope_timeline", **busiest)
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


def scope_timeline(messages: Sequence[Message], detail: SimulationResult) -> dict[str, Any]:
    """The busiest conversation's timeline with the cache (its messages, judgments, cache hits and replies), JSON
    ready: stored with the run (`skip_scope_timeline`) so its export and its page draw it without the simulation's
    detail, which only the process that ran it holds. {} without messages."""
    counts: dict[str, int] = {}
    for m in messages:
        counts[m.scope] = counts.get(m.scope, 0) + 1
    if not counts:
        return {}
    scope = max(counts, key=lambda k: (counts[k], k))
    return {
        "scope": scope,
        "messages": [
            {
                "id": m.id,
                "channel_id": m.channel_id,
                "thread_ts": m.thread_ts,
                "author": m.author,
                "text": m.text,
                "at": m.at.isoformat(),
                "is_bot": m.is_bot,
            }
            for m in messages
            if m.scope == scope
        ],
        "judgments": [
            {
                "scope": j.scope,
                "at": j.at.isoformat(),
                "should_respond": j.should_respond,
                "confidence": j.confidence,
                "skip_seconds": j.skip_seconds,
                "flags": list(j.flags),
            }
            for j in detail.judgments
            if j.scope == scope
        ],
        "timeline": [
            {"type": e["type"], "scope": scope, "t": e["t"]}
            for e in detail.timeline
            if e.get("scope") == scope and e.get("type") in ("cache_hit", "reply")
        ],
    }
