"""The test judgment `judgelab models check` and the Models page send: small, structured, checkable."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models.types import Message


class ProbeJudgment(BaseModel):
    """Should an assistant reply to a chat message?"""

    should_respond: bool = Field(description="true if the assistant should reply")
    reason: str = Field(max_length=160, description="one short sentence")
    confidence: float = Field(ge=0.0, le=1.0, description="0 = unsure, 1 = certain")


PROBE_MESSAGES = [
    Message(
        role="system",
        content="You decide whether an assistant should reply to a chat message. Answer with JSON only.",
    ),
    Message(
        role="user",
        content=(
            'Chat message: "Does anyone know how to reset my password? I have been stuck for an hour."\n'
            "Should the assistant reply? Give should_respond (true or false), a one-sentence reason, "
            "and confidence between 0 and 1."
        ),
    ),
]

# The Models page's free prompt as it opens: a task the bundled instruction-tuned model (SmolLM2-135M) answers
# readably. The judgment above is the structured output's (a 135M model writes no judgment worth reading as prose).
FREE_MESSAGES = [
    Message(
        role="system",
        content="You are a friendly assistant in a team chat. Answer in one or two short sentences.",
    ),
    Message(role="user", content="Write a friendly one-sentence welcome message for a new member of our team chat."),
]

STRUCTURED_SCHEMAS: dict[str, type[BaseModel]] = {"ProbeJudgment": ProbeJudgment}
FREE_TEXT = "Free text"  # the output choice beside the schemas: no schema (the Models page, its demo prefill)
