"""The should-I-respond judges: the seed's prompt with structured output (`ModelJudge`), the next-token probability
of `true` (`ProbabilityJudge`) and the bundled base model by likelihood (`LikelihoodJudge`). Each gives a
`JudgeOutcome`: a judgment, or a backend error (never cached)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, Field

from engine import judgemaps
from engine.skip.decisions import JudgmentResult, parse_confidence, parse_judgment
from engine.skip.likelihood import SKIP, skip_features
from engine.skip.messages import Message
from models.errors import ModelError, StructuredOutputError

if TYPE_CHECKING:
    from models.base import ChatModel


SYSTEM_PROMPT_TEMPLATE = """あなたは会話への参加判断を行うアシスタントです。
以下の会話を分析し、{persona_name}として応答すべきかを判断してください。

現在時刻: {current_time}

判断基準：
1. 誰も反応していないメッセージがあるか
2. 困っている/寂しそうな状況か
3. 有用なアドバイスができそうか
4. 会話に割り込むのが適切か
5. メッセージからの経過時間（長時間放置されているか）

以下の場合は応答しないでください：
- 明らかな独り言
- 活発な会話に無理に割り込む場合

必ずJSON形式で回答してください。他のテキストは含めないでください。
回答形式：
{{"should_respond": true/false, "reason": "理由", "confidence": 0.0-1.0}}

confidence について：
- 1.0: 完全に確信（状況が明確で、今後も変わる可能性が低い）
- 0.7-0.9: かなり確信（多少の不確実性はあるが、ほぼ判断可能）
- 0.4-0.6: やや不確実（状況が変わる可能性がある）
- 0.0-0.3: 非常に不確実（追加情報が必要）"""


class JudgmentOutput(BaseModel):
    """Structured output of the judge; confidence may be left out (the seed: → 1.0; here a failed field)."""

    should_respond: bool
    reason: str = Field(max_length=200)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


def build_messages(persona_name: str, now: datetime, history: Sequence[Message]) -> list[dict[str, str]]:
    conversation = "\n".join(f"[{m.at:%Y-%m-%d %H:%M}] {m.author}: {m.text}" for m in history) or "（メッセージなし）"
    return [
        {
            "role": "system",
            "content": SYSTEM_PROMPT_TEMPLATE.format(persona_name=persona_name, current_time=f"{now:%Y-%m-%d %H:%M}"),
        },
        {"role": "user", "content": f"会話:\n{conversation}"},
    ]


@dataclass(frozen=True)
class JudgeOutcome:
    """A judgment, or a backend error (never both). Tokens and cost for the simulator's accounting."""

    result: JudgmentResult | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    call_id: int | None = None


class Judge(Protocol):
    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome: ...


class ModelJudge:
    """The seed's response judgment with any catalog model, through its structured output."""

    def __init__(self, model: ChatModel, persona_name: str = "myao", max_tokens: int = 120) -> None:
        self.model = model
        self.persona_name = persona_name
        self.max_tokens = max_tokens

    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome:

        messages = build_messages(self.persona_name, now, history)
        try:
            completion = await self.model.complete(
                messages, schema=JudgmentOutput, temperature=0.0, max_tokens=self.max_tokens
            )
        except StructuredOutputError as exc:
            # The model answered, but not validly: the seed's table, fail-safe (see parse_judgment).
            return JudgeOutcome(result=parse_judgment(exc.raw_text or "", truncated="truncated" in exc.flags))
        except ModelError as exc:
            return JudgeOutcome(result=None, error=f"{exc.kind}: {exc.message}")
        parsed = completion.parsed or {}
        confidence, failed = parse_confidence(parsed.get("confidence"))
        if failed and "invalid:confidence" in completion.flags:
            failed = "invalid:confidence"  # out of range: the validator left it out
        return JudgeOutcome(
            result=JudgmentResult(
                should_respond=parsed["should_respond"],
                reason=parsed["reason"],
                confidence=confidence,
                flags=[failed] if failed else [],
            ),
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
            cost=completion.cost,
            call_id=completion.call_id,
        )


class ProbabilityJudge:
    """The seed's prompt, judged by the model's next-token probability of `true` after
    `{"should_respond": ` instead of by the text it would write.

    For the bundled base model this is the judgment that carries signal: its generated JSON copies the
    prompt's example (`true`, "理由", 0.0) for every conversation, while p(true) moves with the content
    (e.g. 0.30 for a sleepy monologue, 0.53 for a help request). should_respond = p ≥ `threshold`;
    confidence = the probability of the decision taken, max(p, 1 − p)."""

    PREFIX = '{"should_respond": '

    def __init__(self, model: ChatModel, persona_name: str = "myao", threshold: float = 0.5) -> None:
        self.model = model
        self.persona_name = persona_name
        self.threshold = threshold

    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome:

        messages = build_messages(self.persona_name, now, history)
        try:
            scored = await self.model.choice_probabilities(messages, self.PREFIX, ["true", "false"])
        except ModelError as exc:
            return JudgeOutcome(result=None, error=f"{exc.kind}: {exc.message}")
        p = scored.probabilities["true"]
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            return JudgeOutcome(result=None, error=f"invalid probability {p!r}", call_id=scored.call_id)
        respond = p >= self.threshold
        return JudgeOutcome(
            result=JudgmentResult(
                should_respond=respond,
                confidence=round(max(p, 1 - p), 4),
                reason=f"p(respond) = {p:.2f} (next-token probability)",
            ),
            prompt_tokens=scored.prompt_tokens,
            completion_tokens=0,
            call_id=scored.call_id,
        )


class LikelihoodJudge:
    """The bundled base model's judgment by likelihood (`engine.skip.likelihood.skip_features`): a fitted map
    (`data/calibration/skip.likelihood.<model>.json`, learnt on a calibration split) turns the PMI features
    of its cues into p(respond); should_respond = p ≥ 0.5 and confidence = max(p, 1 − p), so a clearly idle chat gets
    a long skip and an open question a short one. Without a fitted map the feature is squashed by a plain
    sigmoid and every judgment is flagged `uncalibrated` (and so never cached)."""

    def __init__(self, model: ChatModel, history_limit: int = 5) -> None:
        self.model = model
        self.history_limit = history_limit

    async def judge(self, history: Sequence[Message], now: datetime) -> JudgeOutcome:

        try:
            features, scores = await skip_features(
                self.model, [(m.author, m.text) for m in list(history)[-self.history_limit :]]
            )
        except ModelError as exc:
            return JudgeOutcome(result=None, error=f"{exc.kind}: {exc.message}")
        if not all(math.isfinite(v) for v in features.values()):  # an option the model gave no probability
            return JudgeOutcome(
                result=None,
                error=f"invalid likelihood feature: {features}",
                prompt_tokens=scores.prompt_tokens,
                call_id=scores.call_id,
            )
        cal = judgemaps.load_calibration(SKIP, self.model.model_id)
        if cal is None:
            z = sum(features.values()) / len(features)
            p, flags = 1 / (1 + math.exp(-max(-700.0, z))), ["uncalibrated"]
        else:
            p, flags = cal.apply("respond", features), []
        return JudgeOutcome(
            result=JudgmentResult(
                should_respond=p >= 0.5,
                confidence=round(max(p, 1 - p), 4),
                flags=flags,
                reason=f"p(respond) = {p:.2f} (likelihood, PMI {features['pmi_need']:+.2f})",
            ),
            prompt_tokens=scores.prompt_tokens,
            completion_tokens=0,
            call_id=scores.call_id,
        )
