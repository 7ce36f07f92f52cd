"""The line generator: how a model writes a character's next line. A small base model cannot follow "write a
line as やな", but it continues a pattern, so it gets a script (`script_prompt`) whose last lines are the
character's own, and a local model fills it in place with one of the character's own openers."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from engine.director.config import CharacterProfile

if TYPE_CHECKING:
    from models.base import ChatModel


class LineGenerator(Protocol):
    """Writes a character's next line; `feedback` carries a rejected draft's reasons and a suggestion, and
    `attempt` counts the tries of this turn (0 first), so a retry can vary its sampling."""

    async def __call__(
        self, profile: CharacterProfile, history: Sequence[tuple[str, str]], feedback: str | None, attempt: int
    ) -> str: ...


# How many of each character's own example lines open the script the generator continues (`ModelLineGenerator`).
SHOTS = 4
# A line's opening words as the character's examples start them ("えー、", "つまり、"): up to six characters
# before the first comma.
_OPENER = re.compile(r"^(.{1,6}?)、")
# Different openers tried when a local model's line repeats one already said (its greedy continuation copies).
FRESH_TRIES = 3


def line_openers(profile: CharacterProfile) -> list[str]:
    """How the character's example lines open, in the profile's order, each once."""
    found = [m.group(0) for m in map(_OPENER.match, profile.examples) if m is not None]
    return list(dict.fromkeys(found))


def _said(text: str) -> str:
    """A line's content for spotting a copy: after its opening words, without punctuation or spaces."""
    body = _OPENER.sub("", text.strip(), count=1)
    return re.sub(r"[\W_]+", "", body)


def script_prompt(
    profile: CharacterProfile,
    partner: CharacterProfile | None,
    history: Sequence[tuple[str, str]],
    scene: str,
    topic: str,
    shots: int = SHOTS,
) -> str:
    """The script a model continues with the character's next line: an earlier scene of the two characters (up
    to `shots` of each one's own example lines, taking turns, the partner first, so it ends on one of the
    character's own lines), today's scene as a stage direction, the conversation so far, then "name:"."""
    mine = [(profile.name, e) for e in profile.examples[: max(1, shots)]]
    theirs = [(partner.name, e) for e in partner.examples[: max(1, shots)]] if partner is not None else []
    opening = [line for pair in itertools.zip_longest(theirs, mine) for line in pair if line is not None]
    pair = f"{profile.name}と{partner.name}" if partner is not None else profile.name
    lines = [f"{speaker}: {text}" for speaker, text in opening]
    lines.append(f"（場面が変わって: {scene}。{pair}は{topic}について話している。）")
    lines += [f"{speaker}: {text}" for speaker, text in history[-6:]]
    return "\n".join(lines) + f"\n{profile.name}:"


class ModelLineGenerator:
    """A line generator for a chat model, in the character's voice: a small base model cannot follow "write a
    line as やな", but it continues a pattern, so it gets a script (`script_prompt`) whose last lines are the
    character's own.

    - A local model fills the script in place (`fill_template`): the script is the answer's fixed text, the
      line opens with the most likely of the character's own openers (`line_openers`) and goes on to the end
      of the line. A retry opens differently (an opener not tried this turn), and a line that only repeats
      one already said is written again with another opener (up to FRESH_TRIES).
    - Any other model is asked for the next line with the script in the prompt, sampled with a seed per try.
    `feedback` (a rejected draft's reasons, or a WARN line's instruction) goes in the instruction either way."""

    def __init__(
        self,
        model: ChatModel,
        scene: str,
        topic: str,
        partner: CharacterProfile | None = None,
        max_tokens: int = 60,
        *,
        shots: int = SHOTS,
    ) -> None:
        self.model = model
        self.scene = scene
        self.topic = topic
        self.partner = partner
        self.max_tokens = max_tokens
        self.shots = shots
        # The openers tried so far for each (character, turn): a retry opens with one not tried yet.
        self.tried: dict[tuple[str, int], list[str]] = {}

    async def __call__(
        self, profile: CharacterProfile, history: Sequence[tuple[str, str]], feedback: str | None, attempt: int = 0
    ) -> str:
        script = script_prompt(profile, self.partner, history, self.scene, self.topic, self.shots)
        if getattr(self.model, "template_capable", False):
            line = await self._fill_in_place(profile, history, feedback, script)
        else:
            line = await self._ask(profile, history, feedback, script, attempt)
        return re.sub(rf"^{re.escape(profile.name)}\s*[:：]\s*", "", line) or "……"

    def instruction(self, profile: CharacterProfile, feedback: str | None) -> str:
        text = (
            f"姉妹の会話の台本の続きを、{profile.name}の次の1行だけ書いてください。"
            f"場面: {self.scene}。話題: {self.topic}。"
        )
        return text + (f"\n注意: {feedback}" if feedback else "")

    async def _fill_in_place(
        self, profile: CharacterProfile, history: Sequence[tuple[str, str]], feedback: str | None, script: str
    ) -> str:
        """The script as the answer's fixed text, an opener not tried this turn, then the line to its end; a
        line that repeats one already said is written again with another opener (up to FRESH_TRIES)."""
        openers = line_openers(profile)
        used = self.tried.setdefault((profile.id, len(history)), [])
        said = {_said(t) for _, t in history} | {_said(e) for e in profile.examples}
        if self.partner is not None:
            said |= {_said(e) for e in self.partner.examples}
        line = ""
        for _ in range(FRESH_TRIES):
            options = [o for o in openers if o not in used] or openers
            parts: list[tuple[str, Any]] = [("text", script + " ")]
            parts += [("choice", options)] if options else []
            parts.append(("free", (self.max_tokens, "\n")))
            completion = await self.model.fill_template(self.instruction(profile, feedback), parts)
            line = completion.text[len(script) + 1 :].strip()
            used.extend(o for o in options if line.startswith(o))
            if _said(line) not in said:
                break
        return line

    async def _ask(
        self,
        profile: CharacterProfile,
        history: Sequence[tuple[str, str]],
        feedback: str | None,
        script: str,
        attempt: int,
    ) -> str:
        """The next line asked of a chat model, the script in the prompt. A retry carries the rejected draft's
        reasons (in `feedback`) and samples with its own seed: the same prompt and seed would give the same
        draft again."""
        completion = await self.model.complete(
            self.instruction(profile, feedback) + "\n" + script,
            temperature=0.7,
            max_tokens=self.max_tokens,
            seed=len(history) * 100 + attempt,
        )
        return next((ln.strip() for ln in completion.text.splitlines() if ln.strip()), "")
