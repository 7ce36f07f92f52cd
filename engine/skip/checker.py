"""The periodic checker: every check interval, each scope with eligible unreplied messages is skipped while its
cache is valid, else judged on its latest eligible message and the judgment cached (never a backend error, never
a flagged judgment); `delete_expired` runs on its own schedule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from engine.skip.cache import JudgmentCache, JudgmentCacheRepository
from engine.skip.config import FailurePolicy, ResponseConfig
from engine.skip.decisions import JudgmentResult, calculate_skip_seconds
from engine.skip.judges import Judge
from engine.skip.messages import Message, MessageSource, latest_eligible

if TYPE_CHECKING:
    from engine.events import Emit


@dataclass
class CheckReport:
    at: datetime
    judged: list[str]
    skipped: list[str]  # scopes whose cache was valid
    failed: list[str]
    responded: list[str]
    expired_deleted: int = 0


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
            cut = latest_eligible(history, now, cfg)
            if cut is None:
                continue
            # The scope is judged on its latest message that waited min_wait, with the conversation up
            # to it: a message that just arrived gets its own turn once it has waited too (and then
            # invalidates the cache). A conversation state is thus (scope, that message).
            latest = history[cut]
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
