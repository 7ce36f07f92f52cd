"""Batches: every line of a script through the hard rules, each character keeping its conversation state, and
the rubric when a model is named. The per-rule hit rates with their Wilson intervals, the retune of a batch under
other cut-offs without a model call, and `run_script`, the `director.batch` run kind."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from engine import runctx, stats
from engine.director.config import SPEC_CONFIG, CharacterProfile, DirectorConfig, load_character
from engine.director.japanese import normalize
from engine.director.review import reasons_and_suggestion
from engine.director.rubric import DirectorRubric, RubricResult, named_rubric, rubric_status
from engine.director.rules import (
    EMPTY_STATE,
    DirectorState,
    RuleResult,
    RulesVerdict,
    apply_state,
    evaluate_rules,
    retune,
)
from engine.director.scripts import ScriptLine
from engine.director.status import Status
from engine.events import async_run_context

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource, RunHandle
    from engine.store import Store


def hit_rate(warn: int, retry: int, total: int) -> dict[str, Any]:
    """One rule's shares of lines at WARN and at RETRY, each with its 95 % Wilson interval (`warn_ci`,
    `retry_ci`: a rule that fired on 2 of 40 lines may fire on 1 % or 17 % of the next script's)."""
    out: dict[str, Any] = {}
    for name, hits in (("warn", warn), ("retry", retry)):
        interval = stats.wilson(hits, total)
        out[name] = hits / total if total else 0.0
        out[f"{name}_ci"] = interval.as_list() if interval else None
    return out


def share_text(rate: Mapping[str, Any], name: str) -> str:
    """'5% (1–17%)': a hit rate with its interval, as the page, the CLI and the export say it."""
    value, interval = rate.get(name), rate.get(f"{name}_ci")
    if not isinstance(value, int | float):
        return "–"
    if isinstance(interval, list | tuple) and len(interval) == 2:
        return f"{value:.0%} ({interval[0]:.0%}–{interval[1]:.0%})"
    return f"{value:.0%}"


def hit_rates(verdicts: Sequence[RulesVerdict]) -> dict[str, dict[str, Any]]:
    """Per rule: the share of lines at WARN and at RETRY, with their Wilson intervals (`hit_rate`)."""
    if not verdicts:
        return {}
    names = [r.rule for r in verdicts[0].rules]
    total = len(verdicts)
    return {
        name: hit_rate(
            sum(1 for v in verdicts for r in v.rules if r.rule == name and r.status == Status.WARN),
            sum(1 for v in verdicts for r in v.rules if r.rule == name and r.status == Status.RETRY),
            total,
        )
        for name in names
    }


class ScriptConfig(BaseModel):
    """`director.batch`: every line of a script through the rules (each character keeping its conversation
    state, so the loop and early-topic rules fire), and the rubric when a model is named."""

    model_config = ConfigDict(extra="forbid")

    lines: list[ScriptLine] = Field(min_length=1)
    character: str = Field(description="the character of lines that name none")
    source: str = Field("", description="the script's file name")
    scene: str = ""
    model_id: str | None = Field(None, description="the rubric's model; None: hard rules only")
    director: DirectorConfig = Field(default_factory=DirectorConfig)

    def stored(self) -> dict[str, Any]:
        """The run's config: the settings, and the script as one JSONL text (`script`, a line each, read back by
        `parse_script(..., "jsonl")`) with its line count (`lines`) — one string instead of a dict per line,
        which for a 700 000-line script was most of the run's memory."""
        script = "\n".join(
            json.dumps({"id": ln.id, "text": ln.text, "character": ln.character}, ensure_ascii=False)
            for ln in self.lines
        )
        return self.model_dump(mode="json", exclude={"lines"}) | {"lines": len(self.lines), "script": script}


@dataclass(frozen=True, slots=True)
class ScriptVerdict:
    """One script line and its rules verdict (the facts a retune re-decides)."""

    id: str
    character: str
    text: str
    verdict: RulesVerdict


def script_verdicts(
    lines: Sequence[ScriptLine],
    character: str,
    cfg: DirectorConfig | None = None,
    profiles: dict[str, CharacterProfile] | None = None,
) -> list[ScriptVerdict]:
    """The hard rules for every line in order, each character keeping its own conversation state: a
    RETRY line leaves it as it was (§9), any other advances the topic depth and the loop memory (§8)."""
    return list(iter_script_verdicts(lines, character, cfg, profiles))


def iter_script_verdicts(
    lines: Sequence[ScriptLine],
    character: str,
    cfg: DirectorConfig | None = None,
    profiles: dict[str, CharacterProfile] | None = None,
) -> Iterator[ScriptVerdict]:
    """`script_verdicts` one line at a time (nothing kept but each character's state), with a cancellation
    check every 256 lines."""
    cfg = cfg or SPEC_CONFIG
    profiles = profiles if profiles is not None else {}
    states: dict[str, DirectorState] = {}
    for i, line in enumerate(lines):
        if i % 256 == 255:
            runctx.checkpoint()
        cid = line.character or character
        if cid not in profiles:
            profiles[cid] = load_character(cid)
        current = states.get(cid, EMPTY_STATE)
        verdict = evaluate_rules(line.text, profiles[cid], cfg, current)
        states[cid] = apply_state(current, normalize(verdict.shown(line.text)), verdict.status)
        yield ScriptVerdict(line.id, cid, line.text, verdict)


def retune_rule(verdict: RulesVerdict, name: str, cfg: DirectorConfig) -> Status:
    """One rule of a stored verdict re-decided under other cut-offs."""
    rule = next(r for r in verdict.rules if r.rule == name)
    return retune(RulesVerdict(status=rule.status, rules=[rule], tone=verdict.tone, normalized="", speech=""), cfg)


def script_status(verdict: RulesVerdict, average: float | None, cfg: DirectorConfig) -> Status:
    """A batch line's status: the rules at these cut-offs, then the rubric average where one was scored (a
    line the rules already RETRY is not scored, as in a live review; a failed rubric leaves the rules)."""
    status = retune(verdict, cfg)
    if average is not None and status < Status.RETRY:
        status = max(status, rubric_status(average, cfg))
    return status


RETUNED_RULES = ("format", "scatter", "tone")  # the rules whose cut-offs a batch retune moves


def retune_script(
    verdicts: Sequence[ScriptVerdict],
    averages: dict[str, float | None],
    cfg: DirectorConfig,
    base: DirectorConfig | None = None,
) -> list[dict[str, Any]]:
    """The batch table under `cfg`, without a model call: per line the tuned status beside its status under
    `base` (default: the spec's cut-offs), the rubric average, and every rule (the retunable ones re-decided)."""
    base = base or SPEC_CONFIG
    rows = []
    for v in verdicts:
        average = averages.get(v.id)
        status = script_status(v.verdict, average, cfg)
        rows.append(
            {
                "id": v.id,
                "character": v.character,
                "text": v.text,
                "mended": v.verdict.shown(v.text, status) if status == Status.MODIFY else None,
                "status": status.name,
                "default status": script_status(v.verdict, average, base).name,
                "rubric avg": average,
                **{r.rule: r.status.name for r in v.verdict.rules if r.rule not in RETUNED_RULES},
                **{name: retune_rule(v.verdict, name, cfg).name for name in RETUNED_RULES},
                "tone score": v.verdict.tone.score,
            }
        )
    return rows


STATUS_NAMES = ("PASS", "WARN", "MODIFY", "RETRY")


@functools.lru_cache(maxsize=4096)
def _rules_mapping(pairs: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(pairs)


def _shared_rules(rules: Sequence[RuleResult]) -> dict[str, str]:
    """A row's rule → status mapping, one shared dict per combination (a script repeats a few of them over
    and over; the rows are read, never changed)."""
    return _rules_mapping(tuple((r.rule, r.status.name) for r in rules))


@functools.lru_cache(maxsize=4096)
def _reasons_list(reasons: tuple[str, ...]) -> list[str]:
    return list(reasons)


def _shared_reasons(reasons: list[str]) -> list[str]:
    """A row's reasons, one shared list per wording (read, never changed), as `_shared_rules`."""
    return _reasons_list(tuple(reasons))


@dataclasses.dataclass(slots=True)
class ScriptRow:
    """One line of a batch's table: a plain slotted dataclass (made here, never validated: a pydantic one kept
    four more objects a row), its rules mapping and reasons shared with every row that has the same — a script
    of 700 000 lines keeps 700 000 of them."""

    id: str
    character: str
    text: str
    status: str
    rules_status: str
    rules: dict[str, str]
    tone: int
    rubric: float | None = None
    rubric_failed: bool = False
    reasons: list[str] = dataclasses.field(default_factory=list)
    mended: str | None = None  # MODIFY: the line as the director shows it, and what it changed (a tuple: no
    changes: tuple[str, ...] = ()  # list object a row for the 700 000 rows that have none)

    def event(self) -> dict[str, Any]:
        """The row as its `director_line` event: `mended` and `changes` only on a MODIFY line."""
        out = dataclasses.asdict(self)
        if self.mended is None:
            del out["mended"], out["changes"]
        else:
            out["changes"] = list(self.changes)
        return out


class ScriptResult(BaseModel):
    run_id: str
    rows: list[ScriptRow]
    status_counts: dict[str, int]
    hit_rates: dict[str, dict[str, Any]] = Field(
        description="rule → warn, retry (shares of lines) and warn_ci, retry_ci (95 % Wilson intervals)"
    )
    averages: dict[str, float | None] = Field(
        default_factory=dict, description="line id → rubric average (None: the rubric failed), for the lines scored"
    )

    def stored(self) -> dict[str, Any]:
        """The run's summary["result"]: the counts, hit rates and averages. The rows are the run's
        `director_line` events (one each), not repeated here: a 700 000-line script would otherwise hold
        its table three more times in memory while the summary is written."""
        return self.model_dump(mode="json", exclude={"run_id", "rows"})


async def run_script(
    config: ScriptConfig, models: ModelSource | None, store: Store, *, sinks: list[EventSink] | None = None
) -> ScriptResult:
    """Judge a script as a stored run of kind `director.batch`: an event per line, the table and the hit
    rates as its result. Unknown characters are a ConfigError before the run opens."""

    profiles = {
        cid: load_character(cid) for cid in dict.fromkeys(ln.character or config.character for ln in config.lines)
    }
    rubric = named_rubric(config.model_id, models, config.director)
    async with async_run_context(store, "director.batch", config.stored(), name=config.source, sinks=sinks) as run:
        runctx.progress(total=len(config.lines), step="rules", unit="lines")
        tally = ScriptTally()
        # an event a line, written to the store a few hundred at a time (one commit a line took 2 ms a line)
        with run.bus.batched():
            await judge_script(config, profiles, rubric, run, tally)
        result = tally.result(run.run_id)
        run.summary = {
            "lines": len(tally.rows),
            "status_counts": result.status_counts,
            "scored": len(tally.averages),
            "result": result.stored(),
        }
    return result


@dataclasses.dataclass(slots=True)
class ScriptTally:
    """What a batch keeps as it goes: the rows, the rubric averages of the lines scored, and per rule the
    [warn, retry] counts (`hit_rates`, without keeping the verdicts)."""

    rows: list[ScriptRow] = dataclasses.field(default_factory=list)
    averages: dict[str, float | None] = dataclasses.field(default_factory=dict)
    hits: dict[str, list[int]] = dataclasses.field(default_factory=dict)

    def count(self, rules: Sequence[RuleResult]) -> None:
        for r in rules:
            counts = self.hits.setdefault(r.rule, [0, 0])
            counts[0] += r.status == Status.WARN
            counts[1] += r.status == Status.RETRY

    def result(self, run_id: str) -> ScriptResult:
        rows = self.rows
        return ScriptResult(
            run_id=run_id,
            rows=rows,
            averages=self.averages,
            status_counts={s: sum(1 for r in rows if r.status == s) for s in STATUS_NAMES},
            hit_rates={rule: hit_rate(w, r, len(rows)) for rule, (w, r) in self.hits.items()},
        )


async def judge_script(
    config: ScriptConfig,
    profiles: dict[str, CharacterProfile],
    rubric: DirectorRubric | None,
    run: RunHandle,
    tally: ScriptTally,
) -> None:
    """Every line in order: its rules verdict counted, the rubric scored where the rules do not already say
    RETRY (the previous line as its context), its row kept and emitted as a `director_line` event."""
    cfg = config.director
    previous = ""
    for i, v in enumerate(iter_script_verdicts(config.lines, config.character, cfg, profiles)):
        if i % 256 == 255:  # let a cancel (Cancel, SIGTERM: the task is cancelled) land within 2 s
            await asyncio.sleep(0)
        tally.count(v.verdict.rules)
        scored: RubricResult | None = None
        if rubric is not None and v.verdict.status < Status.RETRY:
            scored = await rubric.score(
                v.verdict.judged(), profiles[v.character], scene=config.scene, previous=previous
            )
            tally.averages[v.id] = scored.average
        previous = v.verdict.shown(v.text)
        row = script_row(v, scored, cfg)
        tally.rows.append(row)
        run.emit("director_line", **row.event())
        runctx.progress(advance=1, step=f"{v.id}: {row.status}")


def script_row(v: ScriptVerdict, scored: RubricResult | None, cfg: DirectorConfig) -> ScriptRow:
    """A batch line's row: its status under `cfg` (the rules, then the rubric average where one was scored)."""
    average = scored.average if scored is not None else None
    status = script_status(v.verdict, average, cfg)
    mend = v.verdict.mend if status == Status.MODIFY else None
    return ScriptRow(
        id=v.id,
        character=v.character,
        text=v.text,
        mended=mend.text if mend else None,
        changes=tuple(mend.changes) if mend else (),
        status=status.name,
        rules_status=v.verdict.status.name,
        rules=_shared_rules(v.verdict.rules),
        tone=v.verdict.tone.score,
        rubric=average,
        rubric_failed=bool(scored and scored.failed),
        reasons=_shared_reasons(reasons_and_suggestion(v.verdict.rules, None)[0]),
    )
