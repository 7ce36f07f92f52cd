"""The jurors' and the final judge's prompts, and the structured answers asked of them. What a case or a
juror wrote reaches another prompt only quoted (`engine.quoting`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from engine.jury.config import JuryCase, Rubric
from engine.jury.decisions import DiscussionRound, JurorEvaluation, JurorSeat
from engine.quoting import DATA_NOTE, quote


@lru_cache(maxsize=64)
def output_schemas(
    verdicts: tuple[str, ...], axes: tuple[str, ...]
) -> tuple[type[BaseModel], type[BaseModel], type[BaseModel]]:
    """(evaluation, statement, final) output models for a rubric; cached so request hashes are stable."""
    verdict_t = Literal[verdicts]  # type: ignore[valid-type]  # the rubric's labels, known only at run time
    score_f = (int, Field(ge=0, le=100))
    axis_fields: dict[str, Any] = {a: score_f for a in axes}
    axes_model = create_model("JuryAxes", **axis_fields)
    evaluation = create_model(
        "JurorEvaluationOutput",
        reasoning=(str, Field(max_length=600)),
        verdict=(verdict_t, ...),
        score=score_f,
        axes=(axes_model, ...),
        confidence=(float, Field(ge=0.0, le=1.0)),
    )
    statement = create_model(
        "JurorStatementOutput",
        statement=(str, Field(max_length=600)),
        verdict=(verdict_t, ...),
        score=score_f,
        axes=(axes_model, ...),
        confidence=(float, Field(ge=0.0, le=1.0)),
    )
    final = create_model(
        "FinalJudgmentOutput", reasoning=(str, Field(max_length=800)), verdict=(verdict_t, ...), score=score_f
    )
    return evaluation, statement, final


def _system(seat: JurorSeat, rubric: Rubric, n: int) -> str:
    return (
        f"You are {seat.role_name}, one of {n} jurors on a review panel.\n"
        + (f"Your focus: {seat.role_focus}\n" if seat.role_focus else "")
        + f"{rubric.instructions}\n{rubric.describe()}\n"
        "Confidence is 0.0-1.0: how sure you are of your verdict. Answer only with the JSON object asked for."
    )


def _case_text(case: JuryCase) -> str:
    """The case as quoted data: a transcript may hold anything, fake evaluations included."""
    return (
        f"Case {quote(case.id)}"
        + (f": {quote(case.title)}" if case.title else "")
        + f"\n{DATA_NOTE}\nThe case to judge, quoted:\n{quote(case.content)}"
    )


def _evaluation_line(e: JurorEvaluation) -> str:
    """One juror's evaluation for another prompt: the validated facts as plain text, what the juror wrote
    as a quoted string (a reasoning cannot forge another juror's line). A failed juror has no position."""
    who = quote(e.role_name or e.juror_id)
    if e.fallback:
        return f"- {who}: no evaluation (this juror failed and does not vote)"
    return f"- {who}: {e.verdict}, score {e.score:.0f}, confidence {e.confidence:.2f}. Reasoning: {quote(e.reasoning)}"


def _statement_lines(rounds: Sequence[DiscussionRound]) -> list[str]:
    return [
        f"- {quote(st.juror_id)} ({st.position}{', changed' if st.position_changed else ''}): {quote(st.statement)}"
        for rnd in rounds
        for st in rnd.statements
    ]


def evaluation_messages(seat: JurorSeat, case: JuryCase, rubric: Rubric, n: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": _system(seat, rubric, n)},
        {
            "role": "user",
            "content": _case_text(case) + "\n\nEvaluate this case on your own. Give your "
            "reasoning, verdict, overall score, a score per axis and your confidence as JSON.",
        },
    ]


def statement_messages(
    seat: JurorSeat,
    case: JuryCase,
    rubric: Rubric,
    n: int,
    round_number: int,
    phase1: Sequence[JurorEvaluation],
    rounds: Sequence[DiscussionRound],
    current: JurorEvaluation,
) -> list[dict[str, str]]:
    said = _statement_lines(rounds)
    position = (
        "You have no position yet (your earlier answer failed)."
        if current.fallback
        else f"Your current position: {current.verdict}, score {current.score:.0f}."
    )
    return [
        {"role": "system", "content": _system(seat, rubric, n)},
        {
            "role": "user",
            "content": _case_text(case)
            + "\n\nPhase 1, every juror's independent evaluation (one a line; what a juror wrote is quoted):\n"
            + "\n".join(_evaluation_line(e) for e in phase1)
            + ("\n\nThe discussion so far (one statement a line, quoted):\n" + "\n".join(said) if said else "")
            + f"\n\n{position}\n"
            f"Discussion round {round_number}: every juror speaks now, at the same time. Answer the others' "
            "strongest points in a short statement. Keep your verdict if you still hold it; change your verdict "
            "and scores if the arguments convinced you. Give your statement, verdict, overall score, a score per "
            "axis and your confidence as JSON.",
        },
    ]


def final_messages(case: JuryCase, rubric: Rubric, result_so_far: Mapping[str, Any]) -> list[dict[str, str]]:
    phase1 = result_so_far["phase1"]
    rounds = result_so_far["rounds"]
    latest = result_so_far["latest"]
    said = _statement_lines(rounds)
    return [
        {
            "role": "system",
            "content": "You are the final judge of a review panel. Read the case, the jurors' "
            f"evaluations and their discussion, then give the panel's final verdict.\n{rubric.instructions}\n"
            f"{rubric.describe()}\n{DATA_NOTE}\nAnswer only with JSON: reasoning, verdict, score.",
        },
        {
            "role": "user",
            "content": _case_text(case)
            + "\n\nPhase 1 evaluations (one a line; what a juror wrote is quoted):\n"
            + "\n".join(_evaluation_line(e) for e in phase1)
            + ("\n\nDiscussion (one statement a line, quoted):\n" + "\n".join(said) if said else "\n\n(no discussion)")
            + "\n\nFinal positions:\n"
            + "\n".join(_evaluation_line(e) for e in latest),
        },
    ]
