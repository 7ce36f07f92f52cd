"""The director's settings and its characters: `DirectorConfig` (every cut-off of the spec, each a setting with the
spec's value) and the `CharacterProfile` files in `data/characters/` (markers, vocabulary, style rule, setting
phrases)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from engine.config import ConfigError, load_yaml


class StyleRule(BaseModel):
    """§4.4: the character's style signal."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["short_exclaim", "polite_endings"]
    max_sentences: int = 2  # short_exclaim: at most this many sentences …
    marks: list[str] = Field(default_factory=lambda: ["！", "？"])  # … and one of these marks
    endings: list[str] = Field(default_factory=lambda: ["です", "ます", "でした", "ました"])
    min_count: int = 2  # polite_endings: sentence-final polite forms at least this often


class CharacterProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_-]+$")
    name: str
    description: str = ""
    markers: list[str] = Field(min_length=1, description="§4.2 sentence endings")
    vocab: list[str] = Field(min_length=1, description="§4.3 characteristic words")
    style: StyleRule
    setting_violations: list[str] = Field(default_factory=list, description="phrases that break the setting")
    praise_rule: bool = Field(
        True,
        description="§3/§5: the praise check applies to this character (the spec "
        "aims it at あゆ, the one who gives information); off, praise always passes",
    )
    partner: str | None = Field(
        None, pattern=r"^[a-z0-9_-]+$", description="the sister's id (a file name, never a path)"
    )
    max_line_chars: int = Field(
        80,
        strict=True,  # a count: `true` or "80" in a profile is refused, not read as 1 or 80
        ge=0,
        le=10_000,
        description="§3 (散漫検出): the seed advises a line within 50–80 characters; over this many (after the "
        "seed's normalisation) is a WARN — 0 turns the check off",
    )
    persona: str = Field("", description="how the generator should speak as this character")
    examples: list[str] = Field(default_factory=list, description="sample lines that open a generated script")


class DirectorConfig(BaseModel):
    """Every cut-off of the spec, each a setting with the spec's value."""

    model_config = ConfigDict(extra="forbid")

    format_retry_lines: int = Field(8, ge=1)
    format_warn_lines: int = Field(6, ge=1)
    scatter_retry_sentences: int = 4
    scatter_retry_topics: int = 3
    scatter_warn_sentences: int = 3
    scatter_warn_topics: int = 2
    tone_pass: int = Field(2, ge=0, le=3)
    tone_warn: int = Field(1, ge=0, le=3)
    rubric_pass: float = Field(4.0, ge=1, le=5)
    rubric_warn: float = Field(3.5, ge=1, le=5)
    rubric_temperature: float = Field(0.1, ge=0, le=1)
    loop_repeat: int = Field(3, ge=2, description="a content word this often in one line is a topic loop")
    loop_history: int = Field(3, ge=1, description="…or in this many of the last lines")
    early_change_depth: int = Field(2, ge=0, description="lines a topic needs before a change is not early")
    max_retries: int = Field(2, ge=0, le=10)
    on_retries_exhausted: Literal["accept_last", "drop", "mark"] = "mark"
    on_rubric_failure: Literal["warn", "pass", "retry"] = "warn"
    mend: bool = Field(
        True,
        description="§1's MODIFY: a line that passes but for what the director can mend itself (over the length "
        "advice, a praise word said alone, a stray repeated mark) is shown mended, status MODIFY; False: such a "
        "line is shown as written (PASS or WARN), as in the seed's three-status flow",
    )
    rubric_judge: Literal["generate", "likelihood", "signals"] = Field(
        "generate",
        description="generate: the model writes five scores as JSON; likelihood: each criterion is "
        "the expected value over 1-5 of the calibrated likelihood of the digits (models that can score); signals: "
        "each criterion from a signal the bundled Gemma and the multilingual embedder carry, through maps fitted "
        "on labelled lines (the default for the bundled model, `default_rubric_judge`)",
    )

    @model_serializer(mode="wrap")
    def _mend_only_when_off(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`mend` is stored only when off: a run's config — and its hash — stays what runs stored before MODIFY
        existed, so a recorded run replays under the same config."""
        out: dict[str, Any] = handler(self)
        if out.get("mend") is True:
            out.pop("mend")
        return out

    @model_validator(mode="after")
    def _ordered(self) -> DirectorConfig:
        if self.format_warn_lines > self.format_retry_lines:
            raise ValueError("format_warn_lines must not exceed format_retry_lines")
        if self.rubric_warn > self.rubric_pass:
            raise ValueError("rubric_warn must not exceed rubric_pass")
        if self.tone_warn > self.tone_pass:
            raise ValueError("tone_warn must not exceed tone_pass")
        return self


# The spec's cut-offs, shared by the functions whose `cfg` defaults to them (read, never changed).
SPEC_CONFIG = DirectorConfig()

CHARACTERS_DIR = Path(__file__).resolve().parents[2] / "data" / "characters"


def load_character(character_id: str, folder: Path | None = None) -> CharacterProfile:
    """A character from `data/characters/<id>.yaml`; errors name the file and the field."""

    folder = folder or CHARACTERS_DIR
    if not isinstance(character_id, str) or not re.fullmatch(r"[a-z0-9_-]+", character_id):
        raise ConfigError(f"{str(character_id)[:40]!r} is not a character id (letters a-z, digits, - and _)")
    path = folder / f"{character_id}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise ConfigError(f"{path}: no such character — known: {known}")
    profile = load_yaml(path, CharacterProfile)
    if profile.id != character_id:
        raise ConfigError(f"{path}: field 'id': '{profile.id}' does not match the file name")
    return profile


def list_characters(folder: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (folder or CHARACTERS_DIR).glob("*.yaml"))
