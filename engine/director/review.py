"""The director's review of one line: the hard rules first, the rubric only when they do not already say RETRY
(§7); the reasons and suggestion of every rule at WARN or worse; a WARN line's instruction for the next turn (§1).
`review_line` is the `director.check` run kind: one line judged as a stored run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from engine import runctx
from engine.director.config import CharacterProfile, DirectorConfig, load_character
from engine.director.rubric import DirectorRubric, RubricResult, named_rubric
from engine.director.rules import DirectorState, RuleResult, ToneScore, evaluate_rules
from engine.director.status import Status, worst
from engine.events import async_run_context

if TYPE_CHECKING:
    from engine.events import EventSink, ModelSource
    from engine.store import Store


class Review(BaseModel):
    """The director's verdict on one line."""

    status: Status
    rules_status: Status
    rules: list[RuleResult]
    tone: ToneScore
    rubric: RubricResult | None
    normalized: str
    reasons: list[str]
    suggestion: str
    # MODIFY (§1): the line as the director shows it, and each change in words; None and [] for any other status.
    mended: str | None = None
    changes: list[str] = Field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        """The documented JSON shape (`judgelab director check`); `mended` and `changes` only for MODIFY."""
        mended = {"mended": self.mended, "changes": list(self.changes)} if self.mended is not None else {}
        return {
            "status": self.status.name,
            **mended,
            "rules": [
                {"rule": r.rule, "status": r.status.name, "detail": r.detail, "matches": r.matches} for r in self.rules
            ],
            "tone": {
                "marker": self.tone.marker,
                "vocab": self.tone.vocab,
                "style": self.tone.style,
                "score": self.tone.score,
            },
            "rubric": None
            if self.rubric is None
            else self.rubric.model_dump(mode="json") | {"status": self.rubric.status.name},
            "normalized": self.normalized,
        }


SUGGESTIONS = {
    "format": "5行以内に収めてください。",
    "setting": "姉妹は一緒に暮らしています。設定に合う表現にしてください。",
    "praise": "相手を褒めるのではなく、情報や感想を短く伝えてください。",
    "scatter": "話題を一つに絞り、50〜80文字程度にまとめてください。",
    "line_length": "50〜80文字程度に短くまとめてください。",
    "logic": "二重否定を避け、言いたいことをそのまま言ってください。",
    "tone": "キャラクターの語尾・語彙・文体を使ってください。",
    "rubric": "直前の発言に応え、場面と関係性に沿った自然な一言にしてください。",
    # §8: the special cases only WARN; the next turn's instruction fixes them
    "script_form": "「」で囲まず、そのまま台詞として話してください。",
    "topic_loop": "同じ言葉を繰り返さず、話を一歩進めてください。",
    "early_topic_change": "今の話題をもう少し掘り下げてから次の話題に移ってください。",
}


def reasons_and_suggestion(rules: Sequence[RuleResult], rubric: RubricResult | None) -> tuple[list[str], str]:
    """The reasons of every rule at WARN or worse, and a suggestion for each (RETRY rules first)."""
    bad = [r for r in rules if r.status >= Status.WARN]
    reasons = [f"{r.rule}: {r.detail}" for r in bad]
    ranked = sorted(bad, key=lambda r: -r.status)
    tips = [(r.status, SUGGESTIONS[r.rule]) for r in ranked if r.rule in SUGGESTIONS]
    if rubric is not None and rubric.status >= Status.WARN:
        reasons.append(f"rubric: {rubric.comment or rubric.average}")
        tips.append((rubric.status, SUGGESTIONS["rubric"]))
    tips.sort(key=lambda t: -t[0])
    return reasons, " ".join(dict.fromkeys(tip for _, tip in tips))


def next_turn_instruction(review: Review) -> str | None:
    """§1: a WARN line is shown and fixed through the next turn's instruction — its reasons and
    suggestion, for the same character's next line. A MODIFY line was shown mended: the instruction says what was
    changed, so the next line needs no mending. None for PASS and RETRY."""
    if review.status == Status.MODIFY:
        text = "前回のあなたの発言は、ディレクターが直して表示しました。直した点: " + " / ".join(review.changes)
        text += f" 理由: {' / '.join(review.reasons)}" if review.reasons else ""  # a rubric WARN included
        return text + (f" 改善案: {review.suggestion}" if review.suggestion else "")
    if review.status != Status.WARN:
        return None
    text = "前回のあなたの発言は表示されましたが、注意があります。理由: " + " / ".join(review.reasons)
    return text + (f" 改善案: {review.suggestion}" if review.suggestion else "")


class Director:
    def __init__(
        self, profile: CharacterProfile, cfg: DirectorConfig | None = None, rubric: DirectorRubric | None = None
    ) -> None:
        self.profile = profile
        self.cfg = cfg or DirectorConfig()
        self.rubric = rubric

    async def review(
        self, line: str, state: DirectorState | None = None, *, scene: str = "", previous: str = ""
    ) -> Review:
        """Hard rules first; the rubric only when they do not already say RETRY (§7) — on the mended line when the
        rules say MODIFY (what would be shown), whose RETRY still sends the line back."""
        verdict = evaluate_rules(line, self.profile, self.cfg, state)
        rubric = None
        if self.rubric is not None and verdict.status < Status.RETRY:
            rubric = await self.rubric.score(verdict.judged(), self.profile, scene=scene, previous=previous)
        status = worst([verdict.status] + ([rubric.status] if rubric else []))
        reasons, suggestion = reasons_and_suggestion(verdict.rules, rubric)
        mend = verdict.mend if status == Status.MODIFY else None
        return Review(
            mended=mend.text if mend else None,
            changes=list(mend.changes) if mend else [],
            status=status,
            rules_status=verdict.status,
            rules=verdict.rules,
            tone=verdict.tone,
            rubric=rubric,
            normalized=verdict.normalized,
            reasons=reasons,
            suggestion=suggestion,
        )


# -- the `director.check` run kind ------------------------------------------------------------------------


class CheckConfig(BaseModel):
    """`director.check`: one line through the hard rules, and the rubric when a model is named."""

    model_config = ConfigDict(extra="forbid")

    character: str
    text: str = Field(min_length=1)
    scene: str = ""
    previous: str = Field("", description="the partner's previous line, for the rubric's connectivity criterion")
    model_id: str | None = Field(None, description="the rubric's model; None: hard rules only")
    director: DirectorConfig = Field(default_factory=DirectorConfig)


def review_json(review: Review) -> dict[str, Any]:
    """A review as stored and shown: the documented payload with the reasons and the suggestion."""
    return review.payload() | {"reasons": review.reasons, "suggestion": review.suggestion}


class CheckResult(BaseModel):
    run_id: str
    review: Review

    def payload(self) -> dict[str, Any]:
        return review_json(self.review)


async def review_line(
    config: CheckConfig, models: ModelSource | None, store: Store, *, sinks: list[EventSink] | None = None
) -> CheckResult:
    """Judge one line as a stored run of kind `director.check`. An unknown character is a ConfigError raised
    before the run opens."""

    profile = load_character(config.character)
    rubric = named_rubric(config.model_id, models, config.director)
    director = Director(profile, config.director, rubric)
    async with async_run_context(store, "director.check", config.model_dump(mode="json"), sinks=sinks) as run:
        runctx.progress(total=1, step="rules" + (" and rubric" if rubric else ""))
        review = await director.review(config.text, scene=config.scene, previous=config.previous)
        run.emit("director_verdict", **review_json(review))
        runctx.progress(advance=1, step=review.status.name)
        run.summary = {"status": review.status.name, "result": review_json(review)}
    return CheckResult(run_id=run.run_id, review=review)
