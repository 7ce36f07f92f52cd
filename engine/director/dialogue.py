"""The retry loop and the duo: a character's line is generated and reviewed, and on RETRY sent back with the
director's reasons, at most `max_retries` times (§1, §9); `duo_dialogue` has two characters take turns, a WARN
line's reasons going into that character's next instruction. `run_duo` is the `director.duo` run kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine import runctx
from engine.director.config import DirectorConfig, load_character
from engine.director.generator import LineGenerator, ModelLineGenerator
from engine.director.japanese import normalize
from engine.director.review import Director, Review, next_turn_instruction, review_json
from engine.director.rubric import DirectorRubric
from engine.director.rules import DirectorState, apply_state
from engine.director.status import Status
from engine.events import async_run_context
from engine.quoting import quote

if TYPE_CHECKING:
    from engine.events import Emit, EventSink, ModelSource
    from engine.store import Store


class Attempt(BaseModel):
    text: str
    review: Review
    # What the generator was told with this draft: the previous draft's reasons and suggestion (a retry), or a
    # WARN line's instruction carried to this turn; None for a first try with nothing carried.
    feedback: str | None = None


class Turn(BaseModel):
    """One accepted (or dropped, or marked) line with every rejected draft before it. `text` is the line as shown:
    for MODIFY the director's mended line (the draft as written is the last attempt's)."""

    speaker: str
    text: str | None
    status: Status
    attempts: list[Attempt]
    outcome: Literal["accepted", "accepted_after_retries", "accepted_last", "dropped", "marked"]
    instruction: str | None = None  # carried from the character's previous WARN line (§1), if any


def retry_feedback(draft: str, review: Review, instruction: str | None = None) -> str:
    """§1: a rejected draft goes back with the director's reasons and suggestion (理由と改善案を添えて), and the
    draft itself, so the next try knows what not to write again. A carried WARN instruction stays."""
    text = (
        f"前の案 {quote(draft)} は却下されました。理由: "
        + " / ".join(review.reasons or [review.status.name])
        + f" 改善案: {review.suggestion or '別の言い方で書き直してください。'}"
    )
    return text + (f"\n{instruction}" if instruction else "")


async def run_turn(
    director: Director,
    generate: LineGenerator,
    history: Sequence[tuple[str, str]],
    state: DirectorState,
    *,
    scene: str = "",
    emit: Emit | None = None,
    instruction: str | None = None,
) -> tuple[Turn, DirectorState]:
    """Generate, review, and on RETRY send the reasons back, at most `max_retries` times (§1, §9).
    `instruction` (a previous WARN line's reasons, `next_turn_instruction`) goes with every attempt."""
    attempts: list[Attempt] = []
    feedback: str | None = instruction
    previous = history[-1][1] if history else ""
    for attempt in range(director.cfg.max_retries + 1):
        text = await generate(director.profile, history, feedback, attempt)
        review = await director.review(text, state, scene=scene, previous=previous)
        attempts.append(Attempt(text=text, review=review, feedback=feedback))
        if emit:
            emit_verdict(emit, director, attempt, attempts[-1])
        if review.status < Status.RETRY:
            outcome = "accepted" if attempt == 0 else "accepted_after_retries"
            shown = review.mended or text  # MODIFY: the director's mended line is what is said
            turn = Turn(
                speaker=director.profile.id,
                text=shown,
                status=review.status,
                attempts=attempts,
                outcome=outcome,
                instruction=instruction,
            )
            return turn, apply_state(state, normalize(shown), review.status)
        feedback = retry_feedback(text, review, instruction)
    # A line shown despite RETRY still changes no state (§9): the next line is judged as if it were absent.
    return retries_exhausted(director, attempts, instruction), state


def emit_verdict(emit: Emit, director: Director, attempt: int, draft: Attempt) -> None:
    """A `director_verdict` event: one draft of a turn with its review and the feedback it was written with."""
    emit(
        "director_verdict",
        speaker=director.profile.id,
        attempt=attempt,
        text=draft.text,
        feedback=draft.feedback,
        **draft.review.payload(),
        reasons=draft.review.reasons,
    )


def retries_exhausted(director: Director, attempts: list[Attempt], instruction: str | None) -> Turn:
    """The turn after every try said RETRY, under `on_retries_exhausted`: the line dropped, or the last draft
    shown (`accept_last`) or shown and marked (`mark`), its status RETRY either way."""
    policy = director.cfg.on_retries_exhausted
    if policy == "drop":
        text, outcome = None, "dropped"
    else:
        text, outcome = attempts[-1].text, "accepted_last" if policy == "accept_last" else "marked"
    return Turn(
        speaker=director.profile.id,
        text=text,
        status=Status.RETRY,
        attempts=attempts,
        outcome=outcome,
        instruction=instruction,
    )


async def duo_dialogue(
    first: Director,
    second: Director,
    generators: Mapping[str, LineGenerator],
    *,
    turns: int = 6,
    scene: str = "",
    emit: Emit | None = None,
) -> list[Turn]:
    """Two characters take turns; every line goes through its director, retries included. A line
    accepted with WARN is shown, and its reasons go into that character's next instruction (§1)."""
    history: list[tuple[str, str]] = []
    states = {first.profile.id: DirectorState(), second.profile.id: DirectorState()}
    notes: dict[str, str | None] = {first.profile.id: None, second.profile.id: None}
    transcript: list[Turn] = []
    for i in range(turns):
        director = first if i % 2 == 0 else second
        pid = director.profile.id
        turn, states[pid] = await run_turn(
            director, generators[pid], history, states[pid], scene=scene, emit=emit, instruction=notes[pid]
        )
        transcript.append(turn)
        if turn.outcome in ("accepted", "accepted_after_retries"):  # else the note in force stays
            notes[pid] = next_turn_instruction(turn.attempts[-1].review)
        if emit:
            emit(
                "director_turn",
                index=i,
                speaker=pid,
                text=turn.text,
                status=turn.status.name,
                outcome=turn.outcome,
                attempts=len(turn.attempts),
                instruction=turn.instruction,
                next_instruction=notes[pid],
            )
        if turn.text is not None:
            history.append((director.profile.name, turn.text))
        runctx.progress(advance=1, step=f"turn {i + 1} of {turns}: {pid} {turn.outcome}")
    return transcript


# -- the `director.duo` run kind ----------------------------------------------------------------------------


class DuoConfig(BaseModel):
    """`director.duo`: two characters talk, every line through its director (retries included)."""

    model_config = ConfigDict(extra="forbid")

    first: str
    second: str
    model_id: str
    topic: str = "夏の思い出"
    scene: str = "海辺の散歩"
    turns: int = Field(4, ge=1, le=20)
    rubric: bool = Field(False, description="score the LLM rubric on every line")
    director: DirectorConfig = Field(default_factory=DirectorConfig)

    @model_validator(mode="after")
    def _two(self) -> DuoConfig:
        if self.first == self.second:
            raise ValueError("the duo needs two different characters")
        return self


def turn_json(turn: Turn) -> dict[str, Any]:
    """A duo turn as stored and shown: statuses by name, every attempt with its review and reasons."""
    return turn.model_dump(mode="json", exclude={"attempts"}) | {
        "status": turn.status.name,
        "attempts": [{"text": a.text, "review": review_json(a.review), "feedback": a.feedback} for a in turn.attempts],
    }


class DuoResult(BaseModel):
    run_id: str
    turns: list[Turn]

    def transcript(self) -> list[dict[str, Any]]:
        return [turn_json(t) for t in self.turns]


async def run_duo(
    config: DuoConfig, models: ModelSource, store: Store, *, sinks: list[EventSink] | None = None
) -> DuoResult:
    """The duo as a stored run: a `director_verdict` event per draft, a `director_turn` per turn."""

    first, second = load_character(config.first), load_character(config.second)
    model = models(config.model_id)
    cfg = config.director
    rubric = DirectorRubric(model, cfg) if config.rubric else None
    generators = {
        first.id: ModelLineGenerator(model, config.scene, config.topic, second),
        second.id: ModelLineGenerator(model, config.scene, config.topic, first),
    }
    async with async_run_context(store, "director.duo", config.model_dump(mode="json"), sinks=sinks) as run:
        runctx.progress(total=config.turns, step="talking", unit="turns")
        transcript = await duo_dialogue(
            Director(first, cfg, rubric),
            Director(second, cfg, rubric),
            generators,
            turns=config.turns,
            scene=config.scene,
            emit=run.emit,
        )
        result = DuoResult(run_id=run.run_id, turns=transcript)
        run.summary = {
            "turns": len(transcript),
            "retries": sum(len(t.attempts) - 1 for t in transcript),
            "result": result.transcript(),
        }
    return result
