"""The `director.eval` run kind: a labelled file of lines (`{"id", "character", "topic", "previous", "text",
"acceptable"}` a line) each reviewed as `director check` reviews one — the hard rules, then the rubric with the topic
and the partner's previous line — in one stored run with an event per line. Its totals (AUC of the rubric mean
against "acceptable" on the lines the hard rules pass, by character, with its interval, and the statuses by label)
are computed from those lines only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from engine import runctx, stats
from engine.director.config import DirectorConfig, load_character
from engine.director.review import Director
from engine.director.rubric import RUBRIC_CRITERIA, named_rubric
from engine.director.status import Status
from engine.events import async_run_context
from engine.inputs import InputError, first_problems, labelled_records, read_text

if TYPE_CHECKING:
    from engine.events import ModelSource
    from engine.store import Store

MAX_LINES = 5000


class LabelledLine(BaseModel):
    """One labelled line. `kind` (optional) says which criterion an unacceptable line fails — what the signals'
    maps are fitted on (`data/calibration/director-calib.jsonl`); an evaluation does not read it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=200)
    character: str = Field(pattern=r"^[a-z0-9_-]+$", max_length=64)
    topic: str = Field("", max_length=2000)
    previous: str = Field("", max_length=2000)
    text: str = Field(min_length=1, max_length=2000)
    acceptable: bool
    kind: str = Field("", max_length=40)


class LineFileError(ValueError):
    """A labelled file that cannot be read; the message names the file and each bad line."""


def parse_lines(text: str, source: str) -> list[LabelledLine]:
    """Every line checked (and every character found) before any is judged; LineFileError lists each problem."""
    out, problems = labelled_records(text, LabelledLine)
    for character in sorted({x.character for x in out}):
        try:
            load_character(character)
        except Exception as exc:  # ConfigError for an unknown or broken character file
            problems.append(f"character {character!r}: {str(exc).rsplit('/', 1)[-1]}")
    if problems:
        raise LineFileError(first_problems(source, problems))
    if not out:
        raise LineFileError(f"{source}: no labelled lines")
    if len(out) > MAX_LINES:
        raise LineFileError(f"{source}: {len(out)} lines; at most {MAX_LINES} a run")
    return out


def load_lines(path: Path) -> list[LabelledLine]:
    try:
        text = read_text(path)
    except InputError as exc:
        raise LineFileError(str(exc)) from None
    return parse_lines(text, path.name)


class DirectorEvalConfig(BaseModel):
    """`director.eval`: the labelled lines (the input, stored with the run), the rubric's model and settings."""

    model_config = ConfigDict(extra="forbid")

    source: str
    lines: list[LabelledLine]
    model_id: str
    director: DirectorConfig = Field(default_factory=DirectorConfig)


def _counts(lines: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {"acceptable": {}, "unacceptable": {}}
    for x in lines:
        side = out["acceptable" if x["acceptable"] else "unacceptable"]
        side[x["status"]] = side.get(x["status"], 0) + 1
    return out


def _auc_part(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scored = [x for x in lines if x["rubric_score"] is not None and x["rules_status"] == "PASS"]
    figure = stats.auc_summary([x["rubric_score"] for x in scored], [bool(x["acceptable"]) for x in scored]) or {}
    return {"n": len(lines), "scored": len(scored), "auc": figure.get("auc"), "auc_ci": figure.get("auc_ci")}


def director_eval_totals(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """AUC of the rubric mean against `acceptable` on the lines the hard rules pass (bootstrap interval over lines),
    by character; the statuses by label; how many rubrics failed or read as a flat scale."""
    characters = sorted({str(x["character"]) for x in lines})
    return _auc_part(lines) | {
        "status_counts": _counts(lines),
        "rules_caught": sum(x["rules_status"] != "PASS" for x in lines),
        "rubric_failed": sum(bool(x["rubric_failed"]) for x in lines),
        "flat_scale": sum("flat_scale" in x["flags"] for x in lines),
        "by_character": {c: _auc_part([x for x in lines if x["character"] == c]) for c in characters},
    }


async def evaluate_lines(
    store: Store,
    config: DirectorEvalConfig,
    models: ModelSource,
    *,
    on_item: Callable[[dict[str, Any]], object] | None = None,
    sinks: list[Any] | None = None,
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Review every labelled line as one stored run of kind `director.eval`; returns (run id, lines, totals)."""
    rubric = named_rubric(config.model_id, models, config.director)
    directors = {c: Director(load_character(c), config.director, rubric) for c in {x.character for x in config.lines}}
    out: list[dict[str, Any]] = []
    name = f"director eval {config.source} ({config.director.rubric_judge})"
    async with async_run_context(store, "director.eval", config.model_dump(mode="json"), name=name, sinks=sinks) as run:
        runctx.progress(total=len(config.lines), step="lines", unit="lines")
        for line in config.lines:
            review = await directors[line.character].review(line.text, scene=line.topic, previous=line.previous)
            result = review.rubric
            item = {
                "id": line.id,
                "character": line.character,
                "acceptable": line.acceptable,
                "status": review.status.name,
                "rules_status": review.rules_status.name,
                "scores": {k: result.scores.get(k) for k in RUBRIC_CRITERIA} if result and result.scores else {},
                "rubric_score": result.average if result is not None and not result.failed else None,
                "rubric_status": result.status.name if result is not None else None,
                "rubric_failed": bool(result is not None and result.failed),
                "flags": list(result.flags) if result is not None else [],
                "comment": result.comment if result is not None else "",
                "retry_from_rubric": bool(
                    result is not None and result.status == Status.RETRY and review.rules_status < Status.RETRY
                ),
            }
            out.append(item)
            run.emit("director_eval_item", **item)
            if on_item:
                on_item(item)
            runctx.progress(advance=1)
        totals = director_eval_totals(out)
        run.summary = totals
    return run.run_id, out, totals
