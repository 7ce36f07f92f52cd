"""Who takes part in a hand-raise conversation (a catalog model and the profile it speaks with) and what
was said."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

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
    ),
    Participant(
        id="designer",
        model_id="gemma3-270m",
        name="Designer",
        icon="🎨",
        expertise=["UI", "UX", "colour", "typography"],
        role="shapes interfaces and visuals",
    ),
    Participant(
        id="researcher",
        model_id="gemma3-270m",
        name="Researcher",
        icon="🔬",
        expertise=["statistics", "papers", "experiments", "evaluation"],
        role="checks evidence and methods",
    ),
]


@dataclass(frozen=True)
class Turn:
    """One message of the conversation as the judges see it."""

    speaker: str  # "user" or a participant id
    text: str
