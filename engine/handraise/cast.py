"""Who takes part in a hand-raise conversation (a catalog model and the profile it speaks with) and what
was said."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from engine.handraise.answers import DEFAULT_ANSWER_MODEL

# -- participants ------------------------------------------------------------------------------------


class Participant(BaseModel):
    """A voice in the conversation: a catalog model and the profile it speaks with. Several participants
    may share one model (three roles over the bundled Gemma, say)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    model_id: str
    name: str
    icon: str = "🙋"
    expertise: list[str] = Field(default_factory=list)
    role: str = ""
    # The model that writes this participant's answers; None: `model_id` (runs stored before answering models
    # were a setting). The judge is the conversation's (HandRaiseConfig.judge_model), whatever this says.
    answer_model: str | None = None

    def answering_model(self) -> str:
        return self.answer_model or self.model_id

    def profile_text(self) -> str:
        return f"{self.name}: {self.role}. Expertise: {', '.join(self.expertise) or 'general'}."


DEFAULT_CAST = [
    Participant(
        id="coder",
        model_id="gemma3-270m",
        name="Coder",
        icon="🧑‍💻",
        expertise=["Python", "debugging", "APIs", "databases"],
        role="writes and fixes code",
        answer_model=DEFAULT_ANSWER_MODEL,
    ),
    Participant(
        id="designer",
        model_id="gemma3-270m",
        name="Designer",
        icon="🎨",
        expertise=["UI", "UX", "colour", "typography"],
        role="shapes interfaces and visuals",
        answer_model=DEFAULT_ANSWER_MODEL,
    ),
    Participant(
        id="researcher",
        model_id="gemma3-270m",
        name="Researcher",
        icon="🔬",
        expertise=["statistics", "papers", "experiments", "evaluation"],
        role="checks evidence and methods",
        answer_model=DEFAULT_ANSWER_MODEL,
    ),
]


def default_cast(known: Iterable[str]) -> list[Participant]:
    """DEFAULT_CAST for a catalog of `known` model ids: an answering model the catalog lacks is left out (the
    participant's own model answers). The page preselects it and the CLI uses it, so both store one config."""
    ids = set(known)
    return [p if p.answer_model in ids else p.model_copy(update={"answer_model": None}) for p in DEFAULT_CAST]


@dataclass(frozen=True)
class Turn:
    """One message of the conversation as the judges see it."""

    speaker: str  # "user" or a participant id
    text: str
