"""Judgment skip cache: a should-I-respond judgment's confidence sets how long its conversation scope is
not judged again; a new message in the scope invalidates it.

Layers:
1. Config — the seed's `JudgmentSkipThreshold` / `JudgmentSkipConfig` and its `response:` settings.
2. Decisions — `calculate_skip_seconds`, `JudgmentCache.is_valid`, `parse_judgment` (the seed's parsing
   table), `eligible_messages`. Pure.
3. Orchestration — the repository (protocol, SQLModel/SQLite, in-memory), `ModelJudge` (the seed's
   prompt with structured output), the failure policy and `PeriodicChecker`.

Differences from the origin, on purpose:
- A judgment whose confidence did not parse cleanly (missing, out of range, NaN, not a number, the
  answer cut off at max_tokens, or no JSON at all) is never cached. The seed counts a missing
  confidence as 1.0 and clamps 7 to 1.0: either gave a 12-hour skip on a broken answer. Here such a
  confidence is a failed field (0.0, flagged) and the scope is judged again at the next check.
- A backend error (model unreachable, timeout, rate limit) is never cached. The origin turned such an
  error into "don't respond" with confidence 0 and cached it. Here the failure policy is explicit:
  nothing is cached and the scope is judged again at the next check (or after a back-off).
- `delete_expired` is scheduled by the checker (the origin never called it).
- The checker judges a scope once per check, on its latest eligible message (unreplied, waited
  min_wait, younger than max age), instead of once per unreplied message: with several unreplied
  messages in one scope, per-message judging made each message invalidate the cache the previous one
  had just written, so nothing was ever skipped.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Index, UniqueConstraint, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field as SQLField
from sqlmodel import Session, SQLModel, col, delete, select

from engine import judgemaps
from engine.likelihood import SKIP, skip_features
from engine.store import aware, table_of
from models.errors import ModelError, StructuredOutputError
from models.secrets import redact
from models.structured import FLOAT_LIKE

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Engine

    from engine.events import Emit
    from models.base import ChatModel


# -- config ---------------------------------------------------------------------------------------


class JudgmentSkipThreshold(BaseModel):
    """Apply `skip_seconds` when confidence ≥ `min_confidence`."""

    model_config = ConfigDict(extra="forbid")

    min_confidence: float = Field(ge=0.0, le=1.0)
    skip_seconds: int = Field(ge=0)


def _default_thresholds() -> list[JudgmentSkipThreshold]:
    return [
        JudgmentSkipThreshold(min_confidence=0.9, skip_seconds=43200),  # 12 hours
        JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),  # 1 hour
    ]


class JudgmentSkipConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    thresholds: list[JudgmentSkipThreshold] = Field(default_factory=_default_thresholds)
    default_skip_seconds: int = Field(600, ge=0)  # 10 minutes


class FailurePolicy(StrEnum):
    """What a backend error does. Never: cache it as a judgment."""

    RETRY_NEXT_CHECK = "retry_next_check"  # nothing cached; the scope is judged again at the next check
    BACKOFF = "backoff"  # nothing cached; the scope waits `backoff_seconds` before the next try


class ResponseConfig(BaseModel):
    """The seed's `response:` section."""

    model_config = ConfigDict(extra="forbid")

    check_interval_seconds: int = Field(60, gt=0)
    min_wait_seconds: int = Field(300, ge=0)
    message_limit: int = Field(20, gt=0)
    max_message_age_seconds: int = Field(43200, gt=0)
    cleanup_interval_seconds: int = Field(86400, gt=0, description="how often delete_expired runs")
    judgment_skip: JudgmentSkipConfig = Field(default_factory=JudgmentSkipConfig)
    failure_policy: FailurePolicy = FailurePolicy.RETRY_NEXT_CHECK
    backoff_seconds: int = Field(300, ge=0)
    persona_name: str = "myao"


# -- decisions ------------------------------------------------------------------------------------


class JudgmentResult(BaseModel):
    should_respond: bool
    reason: str
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    # A failed field (`missing:confidence`, `invalid:confidence`, `truncated`, `unparseable`, …): the
    # judgment still decides whether to respond, but it is never cached.
    flags: list[str] = Field(default_factory=list)

    @property
    def cacheable(self) -> bool:
        """Only a judgment whose every field parsed cleanly may set a skip window."""
        return not self.flags


def calculate_skip_seconds(confidence: float, config: JudgmentSkipConfig) -> int:
    """The first threshold (highest first, sorted at lookup) the confidence reaches, else the default."""
    for threshold in sorted(config.thresholds, key=lambda t: t.min_confidence, reverse=True):
        if confidence >= threshold.min_confidence:
            return threshold.skip_seconds
    return config.default_skip_seconds


@dataclass(frozen=True)
class JudgmentCache:
    channel_id: str
    thread_ts: str | None
    should_respond: bool
    confidence: float
    reason: str
    latest_message_ts: str
    next_check_at: datetime
    created_at: datetime
    updated_at: datetime

    @property
    def scope_key(self) -> str:
        return scope_key(self.channel_id, self.thread_ts)

    def is_valid(self, current_time: datetime, current_latest_message_ts: str) -> bool:
        """True (skip) while before `next_check_at` and no newer message arrived in the scope."""
        if current_time >= self.next_check_at:
            return False
        return current_latest_message_ts == self.latest_message_ts


def scope_key(channel_id: str, thread_ts: str | None) -> str:
    return f"{channel_id}:{thread_ts or 'top'}"


_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")


def _confidence(value: object) -> tuple[float, str | None]:
    """(confidence, the flag of a failed field): a number in [0, 1], else the fallback 0.0."""
    if value is None:
        return 0.0, "missing:confidence"
    if isinstance(value, bool):
        return 0.0, "invalid:confidence"
    try:
        if not isinstance(value, FLOAT_LIKE):  # what float() refuses with a TypeError
            raise TypeError(type(value).__name__)
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0, "invalid:confidence"
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        return 0.0, "invalid:confidence"
    return number, None


def parse_judgment(response: str, *, truncated: bool = False) -> JudgmentResult:
    """The seed's parsing table, made fail-safe. A confidence in [0, 1] is used. A missing one (the seed:
    1.0), an out-of-range one (the seed: clamped), NaN, infinite or not a number is a failed field:
    confidence 0.0, flagged `missing:confidence` / `invalid:confidence`. A `should_respond` that is not a
    JSON boolean is `false`, flagged. An answer cut off at max_tokens, or unparseable, is "don't respond"
    with confidence 0.0, flagged. A flagged judgment is never cached (the origin's 12-hour skip)."""
    if truncated:
        return JudgmentResult(
            should_respond=False, reason="the answer was cut off at max_tokens", confidence=0.0, flags=["truncated"]
        )
    try:
        match = _FLAT_OBJECT.search(response)
        data = json.loads(match.group() if match else response)
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
    except (json.JSONDecodeError, TypeError, ValueError, RecursionError) as exc:
        return JudgmentResult(
            should_respond=False, reason=f"Failed to parse LLM response: {exc}", confidence=0.0, flags=["unparseable"]
        )
    flags: list[str] = []
    respond = data.get("should_respond", False)
    if not isinstance(respond, bool):
        flags.append("invalid:should_respond")
        respond = False
    confidence, failed = _confidence(data.get("confidence"))
    if failed:
        flags.append(failed)
    return JudgmentResult(
        should_respond=respond, reason=str(data.get("reason", "")), confidence=confidence, flags=flags
    )


# -- messages -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    id: str
    channel_id: str
    thread_ts: str | None
    author: str
    text: str
    at: datetime
    is_bot: bool = False

    @property
    def scope(self) -> str:
        return scope_key(self.channel_id, self.thread_ts)


def unreplied(messages: Sequence[Message]) -> list[Message]:
    """Messages of one scope after the bot's last message there."""
    for i in range(len(messages) - 1, -1, -1):  # the bot's last message, from the end: none follows it
        if messages[i].is_bot:
            return list(messages[i + 1 :])
    return list(messages)


def eligible(messages: Sequence[Message], now: datetime, cfg: ResponseConfig) -> list[Message]:
    """Unreplied messages older than min_wait and not older than max_message_age."""
    low, high = cfg.min_wait_seconds, cfg.max_message_age_seconds
    return [m for m in unreplied(messages) if low <= (now - m.at).total_seconds() <= high]


# -- repository -----------------------------------------------------------------------------------


class JudgmentCacheModel(SQLModel, table=True):
    __tablename__ = "judgment_caches"
    __table_args__ = (
        UniqueConstraint("channel_id", "thread_ts", name="uq_channel_thread"),
        # SQL treats NULLs as distinct, so the constraint above lets top-level rows (thread NULL)
        # duplicate; this partial index closes that gap.
        Index(
            "uq_channel_top",
            "channel_id",
            unique=True,
            sqlite_where=text("thread_ts IS NULL"),
            postgresql_where=text("thread_ts IS NULL"),
        ),
    )

    id: int | None = SQLField(default=None, primary_key=True)
    channel_id: str = SQLField(index=True)
    thread_ts: str | None = SQLField(default=None, index=True)
    should_respond: bool
    confidence: float
    reason: str
    latest_message_ts: str
    next_check_at: datetime = SQLField(index=True)
    created_at: datetime = SQLField(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = SQLField(default_factory=lambda: datetime.now(UTC))


_CACHE_FIELDS = tuple(f.name for f in fields(JudgmentCache))  # each is a column of JudgmentCacheModel too
_SCOPE_AND_BIRTH = frozenset({"channel_id", "thread_ts", "created_at"})  # what an update of a row keeps


def _to_entity(row: JudgmentCacheModel) -> JudgmentCache:
    values = {name: getattr(row, name) for name in _CACHE_FIELDS}
    return JudgmentCache(**values | {k: aware(values[k]) for k in ("next_check_at", "created_at", "updated_at")})


class JudgmentCacheRepository(Protocol):
    async def save(self, cache: JudgmentCache) -> None: ...

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None: ...

    async def delete_expired(self, before: datetime) -> int: ...

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None: ...


class SQLJudgmentCacheRepository:
    """The repository on any SQLAlchemy engine (SQLite by default): upsert per (channel, thread)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        JudgmentCacheModel.metadata.create_all(engine, tables=[table_of(JudgmentCacheModel)])

    @staticmethod
    def _scope(channel_id: str, thread_ts: str | None) -> ColumnElement[bool]:
        thread = col(JudgmentCacheModel.thread_ts)
        return (col(JudgmentCacheModel.channel_id) == channel_id) & (
            thread.is_(None) if thread_ts is None else thread == thread_ts
        )

    async def save(self, cache: JudgmentCache) -> None:

        cache = replace(cache, reason=redact(cache.reason))  # a model's reason can echo a key
        for _ in range(2):  # a concurrent insert of the same scope turns the second try into an update
            with Session(self.engine) as session:
                row = session.exec(
                    select(JudgmentCacheModel).where(self._scope(cache.channel_id, cache.thread_ts))
                ).first()
                if row is None:
                    row = JudgmentCacheModel(**{name: getattr(cache, name) for name in _CACHE_FIELDS})
                else:
                    for name in set(_CACHE_FIELDS) - _SCOPE_AND_BIRTH:
                        setattr(row, name, getattr(cache, name))
                session.add(row)
                try:
                    session.commit()
                    return
                except IntegrityError:
                    session.rollback()
        raise RuntimeError(f"could not save the judgment cache of {cache.scope_key}")

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None:
        with Session(self.engine) as session:
            row = session.exec(select(JudgmentCacheModel).where(self._scope(channel_id, thread_ts))).first()
            return _to_entity(row) if row else None

    async def delete_expired(self, before: datetime) -> int:
        with Session(self.engine) as session:
            result = session.exec(delete(JudgmentCacheModel).where(col(JudgmentCacheModel.next_check_at) < before))
            session.commit()
            return int(result.rowcount or 0)

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None:
        with Session(self.engine) as session:
            session.exec(delete(JudgmentCacheModel).where(self._scope(channel_id, thread_ts)))
            session.commit()

    async def count(self) -> int:
        with Session(self.engine) as session:
            return len(session.exec(select(JudgmentCacheModel.id)).all())


class MemoryJudgmentCacheRepository:
    """The same contract in a dict: for simulations of many simulated hours in seconds."""

    def __init__(self) -> None:
        self.rows: dict[str, JudgmentCache] = {}

    async def save(self, cache: JudgmentCache) -> None:
        existing = self.rows.get(cache.scope_key)
        self.rows[cache.scope_key] = replace(cache, created_at=existing.created_at) if existing else cache

    async def find_by_scope(self, channel_id: str, thread_ts: str | None) -> JudgmentCache | None:
        return self.rows.get(scope_key(channel_id, thread_ts))

    async def delete_expired(self, before: datetime) -> int:
        expired = [k for k, v in self.rows.items() if v.next_check_at < before]
        for key in expired:
            del self.rows[key]
        return len(expired)

    async def delete_by_scope(self, channel_id: str, thread_ts: str | None) -> None:
        self.rows.pop(scope_key(channel_id, thread_ts), None)

    async def count(self) -> int:
        return len(self.rows)


# -- the judge ------------------------------------------------------------------------------------

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
        confidence, failed = _confidence(parsed.get("confidence"))
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
    """The bundled base model's judgment by likelihood (engine/likelihood.py `skip_features`): a fitted map
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


# -- the checker ----------------------------------------------------------------------------------


@dataclass
class CheckReport:
    at: datetime
    judged: list[str]
    skipped: list[str]  # scopes whose cache was valid
    failed: list[str]
    responded: list[str]
    expired_deleted: int = 0


class MessageSource(Protocol):
    def scopes(self, now: datetime) -> list[str]: ...

    def history(self, scope: str, now: datetime) -> list[Message]: ...

    def post_reply(self, scope: str, now: datetime, reason: str) -> None: ...


class PeriodicChecker:
    """Every `check_interval_seconds`: for each scope with eligible unreplied messages, skip it while its
    cache is valid, else judge it on its latest message and cache the result (never a backend error)."""

    def __init__(
        self,
        source: MessageSource,
        judge: Judge,
        repository: JudgmentCacheRepository,
        config: ResponseConfig | None = None,
        emit: Emit | None = None,
    ) -> None:
        self.source = source
        self.judge = judge
        self.repository = repository
        self.config = config or ResponseConfig()
        self.emit = emit
        self._backoff_until: dict[str, datetime] = {}
        self._last_cleanup: datetime | None = None

    async def check(self, now: datetime) -> CheckReport:
        cfg = self.config
        report = CheckReport(at=now, judged=[], skipped=[], failed=[], responded=[])
        if self._last_cleanup is None or (now - self._last_cleanup).total_seconds() >= cfg.cleanup_interval_seconds:
            report.expired_deleted = await self.repository.delete_expired(now)
            self._last_cleanup = now
        for scope in self.source.scopes(now):
            history = self.source.history(scope, now)
            ready = eligible(history, now, cfg)
            if not ready:
                continue
            # The scope is judged on its latest message that waited min_wait, with the conversation up
            # to it: a message that just arrived gets its own turn once it has waited too (and then
            # invalidates the cache). A conversation state is thus (scope, that message).
            latest = ready[-1]
            # its place by identity, from the end (where it almost always is): `index` would compare
            # messages field by field from the start of the scope
            cut = next(i for i in range(len(history) - 1, -1, -1) if history[i] is latest)
            history = history[: cut + 1]
            if await self._should_skip(latest, now):
                report.skipped.append(scope)
                self._emit("cache_hit", scope=scope, latest=latest.id)
                continue
            if scope in self._backoff_until and now < self._backoff_until[scope]:
                report.skipped.append(scope)
                continue
            outcome = await self.judge.judge(history[-cfg.message_limit :], now)
            if outcome.result is None:
                report.failed.append(scope)
                if cfg.failure_policy == FailurePolicy.BACKOFF:
                    self._backoff_until[scope] = now + timedelta(seconds=cfg.backoff_seconds)
                self._emit(
                    "judgment_failed",
                    scope=scope,
                    latest=latest.id,
                    error=outcome.error,
                    policy=cfg.failure_policy.value,
                )
                continue
            report.judged.append(scope)
            if outcome.result.cacheable:
                self._backoff_until.pop(scope, None)
            elif cfg.failure_policy == FailurePolicy.BACKOFF:  # a failed confidence is a failure too
                self._backoff_until[scope] = now + timedelta(seconds=cfg.backoff_seconds)
            skip = await self._cache(latest, outcome.result, now)
            self._emit(
                "judgment",
                scope=scope,
                latest=latest.id,
                **outcome.result.model_dump(),
                skip_seconds=skip,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                cost=outcome.cost,
                call_id=outcome.call_id,
            )
            if outcome.result.should_respond:
                report.responded.append(scope)
                self.source.post_reply(scope, now, outcome.result.reason)
        return report

    async def _should_skip(self, latest: Message, now: datetime) -> bool:
        if not self.config.judgment_skip.enabled:
            return False
        cache = await self.repository.find_by_scope(latest.channel_id, latest.thread_ts)
        return cache is not None and cache.is_valid(now, latest.id)

    async def _cache(self, latest: Message, result: JudgmentResult, now: datetime) -> int | None:
        skip_config = self.config.judgment_skip
        if not skip_config.enabled or not result.cacheable:
            return None
        skip = calculate_skip_seconds(result.confidence, skip_config)
        await self.repository.save(
            JudgmentCache(
                channel_id=latest.channel_id,
                thread_ts=latest.thread_ts,
                should_respond=result.should_respond,
                confidence=result.confidence,
                reason=result.reason,
                latest_message_ts=latest.id,
                next_check_at=now + timedelta(seconds=skip),
                created_at=now,
                updated_at=now,
            )
        )
        return skip

    def _emit(self, type_: str, **payload: object) -> None:
        if self.emit is not None:
            self.emit(type_, **payload)


class ListSource:
    """Messages held in memory, per scope, in arrival order; the bot's replies are added as messages.
    What the simulator and the tests feed the checker."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._by_scope: dict[str, list[Message]] = {}
        self._replies = 0
        for message in sorted(messages, key=lambda m: m.at):
            self.add(message)

    def add(self, message: Message) -> None:
        bisect.insort(self._by_scope.setdefault(message.scope, []), message, key=lambda m: m.at)

    def scopes(self, now: datetime) -> list[str]:
        return [s for s, msgs in self._by_scope.items() if msgs and msgs[0].at <= now]

    def history(self, scope: str, now: datetime) -> list[Message]:
        msgs = self._by_scope.get(scope, [])  # kept in arrival order: the messages up to `now` are a prefix
        return msgs[: bisect.bisect_right(msgs, now, key=lambda m: m.at)]

    def post_reply(self, scope: str, now: datetime, reason: str) -> None:
        channel, thread = scope.split(":", 1)
        self._replies += 1
        self.add(
            Message(
                id=f"bot-{self._replies}",
                channel_id=channel,
                thread_ts=None if thread == "top" else thread,
                author="bot",
                text=reason,
                at=now,
                is_bot=True,
            )
        )
