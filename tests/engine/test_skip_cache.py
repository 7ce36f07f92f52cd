"""Judgment skip cache: every row of the seed's four test tables, the repository on real SQLite, the
checker on a hand-built workload with exact call counts, and the failure policy."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.skip.cache import JudgmentCache, MemoryJudgmentCacheRepository, SQLJudgmentCacheRepository
from engine.skip.checker import PeriodicChecker
from engine.skip.config import FailurePolicy, JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.decisions import JudgmentResult, calculate_skip_seconds, parse_judgment
from engine.skip.judges import JudgeOutcome, ModelJudge
from engine.skip.messages import ListSource, Message
from models.types import RawResult

T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def run(coro):
    return asyncio.run(coro)


def cache(
    thread: str | None = "1700.1",
    latest: str = "m1",
    next_check: datetime | None = None,
    channel: str = "C1",
    confidence: float = 0.8,
) -> JudgmentCache:
    return JudgmentCache(
        channel_id=channel,
        thread_ts=thread,
        should_respond=False,
        confidence=confidence,
        reason="r",
        latest_message_ts=latest,
        next_check_at=next_check or T0 + timedelta(hours=1),
        created_at=T0,
        updated_at=T0,
    )


# -- table 1: JudgmentCache ---------------------------------------------------------------------------
def test_entity_created_with_all_fields() -> None:
    c = cache()
    assert (c.channel_id, c.thread_ts, c.should_respond, c.confidence, c.reason, c.latest_message_ts) == (
        "C1",
        "1700.1",
        False,
        0.8,
        "r",
        "m1",
    )


def test_scope_key_with_and_without_thread() -> None:
    assert cache(thread="1700.1").scope_key == "C1:1700.1"
    assert cache(thread=None).scope_key == "C1:top"


def test_is_valid_before_next_check_with_same_message() -> None:
    assert cache().is_valid(T0 + timedelta(minutes=59), "m1") is True


def test_is_valid_false_at_or_after_next_check() -> None:
    assert cache().is_valid(T0 + timedelta(hours=1), "m1") is False
    assert cache().is_valid(T0 + timedelta(hours=2), "m1") is False


def test_is_valid_false_with_a_new_message() -> None:
    assert cache().is_valid(T0 + timedelta(minutes=1), "m2") is False


# -- table 2: repository, on a real SQLite file and a real PostgreSQL server ------------------------------
@pytest.fixture
def repo(db_url: str) -> SQLJudgmentCacheRepository:
    from engine.store import Store

    return SQLJudgmentCacheRepository(Store(db_url).engine)  # the partial unique index exists on both


def test_save_new_and_find(repo: SQLJudgmentCacheRepository) -> None:
    run(repo.save(cache()))
    found = run(repo.find_by_scope("C1", "1700.1"))
    assert found == cache()


def test_save_existing_scope_updates(repo: SQLJudgmentCacheRepository) -> None:
    run(repo.save(cache(latest="m1")))
    run(repo.save(cache(latest="m2", confidence=0.95)))
    found = run(repo.find_by_scope("C1", "1700.1"))
    assert found is not None and (found.latest_message_ts, found.confidence) == ("m2", 0.95)
    assert run(repo.count()) == 1


def test_top_level_rows_do_not_duplicate(repo: SQLJudgmentCacheRepository) -> None:
    run(repo.save(cache(thread=None, latest="m1")))
    run(repo.save(cache(thread=None, latest="m2")))
    assert run(repo.count()) == 1
    assert run(repo.find_by_scope("C1", None)).latest_message_ts == "m2"
    # the database refuses a second top-level row even when written behind the repository's back
    from sqlalchemy.exc import IntegrityError
    from sqlmodel import Session

    from engine.skip.cache import JudgmentCacheModel

    with Session(repo.engine) as session, pytest.raises(IntegrityError):
        session.add(
            JudgmentCacheModel(
                channel_id="C1",
                thread_ts=None,
                should_respond=True,
                confidence=1,
                reason="x",
                latest_message_ts="m3",
                next_check_at=T0,
            )
        )
        session.commit()


def test_find_missing_scope_is_none(repo: SQLJudgmentCacheRepository) -> None:
    run(repo.save(cache()))
    assert run(repo.find_by_scope("C1", "other")) is None
    assert run(repo.find_by_scope("C2", "1700.1")) is None
    assert run(repo.find_by_scope("C1", None)) is None


def test_delete_expired_removes_only_expired(repo: SQLJudgmentCacheRepository) -> None:
    run(repo.save(cache(channel="old", next_check=T0 - timedelta(minutes=1))))
    run(repo.save(cache(channel="new", next_check=T0 + timedelta(minutes=1))))
    assert run(repo.delete_expired(T0)) == 1
    assert run(repo.find_by_scope("old", "1700.1")) is None
    assert run(repo.find_by_scope("new", "1700.1")) is not None
    run(repo.delete_by_scope("new", "1700.1"))
    assert run(repo.count()) == 0


def test_memory_repository_keeps_the_same_contract() -> None:
    mem = MemoryJudgmentCacheRepository()
    run(mem.save(cache(thread=None, latest="m1")))
    run(mem.save(cache(thread=None, latest="m2")))
    assert run(mem.count()) == 1 and run(mem.find_by_scope("C1", None)).latest_message_ts == "m2"
    assert run(mem.delete_expired(T0 + timedelta(hours=2))) == 1


# -- table 3: parsing the judgment -------------------------------------------------------------------------
# The seed's table, fail-safe: a missing confidence (seed: 1.0) and an out-of-range one (seed: clamped to
# 1.0) are failed fields — confidence 0.0, flagged, never cached (see the checker tests below).
@pytest.mark.parametrize(
    ("text", "should", "confidence", "flags"),
    [
        ('{"should_respond": true, "reason": "質問がある", "confidence": 0.85}', True, 0.85, []),  # given
        ('{"should_respond": false, "reason": "独り言"}', False, 0.0, ["missing:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": 1.7}', True, 0.0, ["invalid:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": -0.2}', True, 0.0, ["invalid:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": NaN}', True, 0.0, ["invalid:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": 1e400}', True, 0.0, ["invalid:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": true}', True, 0.0, ["invalid:confidence"]),
        ('{"should_respond": true, "reason": "x", "confidence": "0.9"}', True, 0.9, []),
        ('{"confidence": "high"}', False, 0.0, ["invalid:confidence"]),
        ('{"should_respond": "false", "reason": "x", "confidence": 0.5}', False, 0.5, ["invalid:should_respond"]),
        ('The answer: {"should_respond": true, "reason": "x", "confidence": 0.4} ok', True, 0.4, []),
    ],
)
def test_parse_judgment_confidence(text: str, should: bool, confidence: float, flags: list[str]) -> None:
    result = parse_judgment(text)
    assert (result.should_respond, result.confidence, result.flags) == (should, confidence, flags)
    assert result.cacheable == (not flags)


@pytest.mark.parametrize("text", ["not json", '{"should_respond": tru', "[1, 2]", "[" * 5000])
def test_parse_failure_is_do_not_respond_with_zero_confidence(text: str) -> None:
    result = parse_judgment(text)
    assert (result.should_respond, result.confidence, result.flags) == (False, 0.0, ["unparseable"])
    assert result.reason.startswith("Failed to parse LLM response") and not result.cacheable


def test_an_answer_cut_at_max_tokens_is_do_not_respond_and_never_cached() -> None:
    result = parse_judgment('{"should_respond": true, "reason": "x", "confidence": 0.9}', truncated=True)
    assert (result.should_respond, result.confidence, result.flags) == (False, 0.0, ["truncated"])


# -- table 4: the use case (checker) ------------------------------------------------------------------------
class CountingJudge:
    def __init__(self, results: Sequence[JudgmentResult | None] | JudgmentResult) -> None:
        self.results = results
        self.calls: list[tuple[str, datetime]] = []

    async def judge(self, history, now) -> JudgeOutcome:
        self.calls.append((history[-1].id, now))
        result = self.results if isinstance(self.results, JudgmentResult) else self.results[len(self.calls) - 1]
        if result is None:
            return JudgeOutcome(result=None, error="ServerError: boom")
        return JudgeOutcome(result=result, prompt_tokens=100, completion_tokens=20)


def msg(i: int, minutes: float, channel: str = "C1", thread: str | None = None) -> Message:
    return Message(
        id=f"m{i}",
        channel_id=channel,
        thread_ts=thread,
        author="u",
        text=f"message {i}",
        at=T0 + timedelta(minutes=minutes),
    )


def checker(messages: list[Message], judge, **cfg) -> tuple[PeriodicChecker, MemoryJudgmentCacheRepository]:
    repo = MemoryJudgmentCacheRepository()
    return PeriodicChecker(ListSource(messages), judge, repo, ResponseConfig(**cfg)), repo


def no(confidence: float) -> JudgmentResult:
    return JudgmentResult(should_respond=False, reason="様子見", confidence=confidence)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_skip_disabled_always_judges() -> None:
    judge = CountingJudge(no(0.95))
    chk, repo = checker([msg(1, 0)], judge, judgment_skip=JudgmentSkipConfig(enabled=False))
    for minute in (5, 6, 7):
        run(chk.check(at(minute)))
    assert len(judge.calls) == 3 and run(repo.count()) == 0


def test_no_cache_first_judgment_is_made_and_cached() -> None:
    judge = CountingJudge(no(0.85))
    chk, repo = checker([msg(1, 0)], judge)
    report = run(chk.check(at(5)))
    assert report.judged == ["C1:top"] and len(judge.calls) == 1
    saved = run(repo.find_by_scope("C1", None))
    assert saved is not None and saved.latest_message_ts == "m1"
    assert saved.next_check_at == at(5) + timedelta(seconds=3600)


def test_valid_cache_skips_the_judgment() -> None:
    judge = CountingJudge(no(0.85))
    chk, _ = checker([msg(1, 0)], judge)
    run(chk.check(at(5)))
    report = run(chk.check(at(6)))
    assert report.skipped == ["C1:top"] and len(judge.calls) == 1


def test_expired_cache_is_judged_again_and_updated() -> None:
    judge = CountingJudge(no(0.5))  # 10 minutes
    chk, repo = checker([msg(1, 0)], judge)
    run(chk.check(at(5)))
    run(chk.check(at(14)))
    assert len(judge.calls) == 1
    run(chk.check(at(15)))  # 5 + 10 minutes: next_check_at reached
    assert len(judge.calls) == 2
    assert run(repo.find_by_scope("C1", None)).next_check_at == at(25)


def test_new_message_invalidates_and_re_judges() -> None:
    judge = CountingJudge(no(0.95))
    chk, repo = checker([msg(1, 0), msg(2, 10)], judge)
    run(chk.check(at(5)))
    run(chk.check(at(11)))  # m2 arrived but has not waited min_wait: the cache of m1 still holds
    assert [c[0] for c in judge.calls] == ["m1"]
    run(chk.check(at(15)))  # m2 has waited: the new message invalidates the cache
    assert [c[0] for c in judge.calls] == ["m1", "m2"]
    assert run(repo.find_by_scope("C1", None)).latest_message_ts == "m2"


@pytest.mark.parametrize(
    ("confidence", "seconds"), [(0.9, 43200), (0.95, 43200), (0.8, 3600), (0.7, 3600), (0.5, 600), (0.0, 600)]
)
def test_confidence_sets_the_skip_window(confidence: float, seconds: int) -> None:
    assert calculate_skip_seconds(confidence, JudgmentSkipConfig()) == seconds
    judge = CountingJudge(no(confidence))
    chk, repo = checker([msg(1, 0)], judge)
    run(chk.check(at(5)))
    assert run(repo.find_by_scope("C1", None)).next_check_at == at(5) + timedelta(seconds=seconds)


def test_thresholds_are_sorted_at_lookup() -> None:
    unsorted = JudgmentSkipConfig(
        thresholds=[
            JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),
            JudgmentSkipThreshold(min_confidence=0.9, skip_seconds=43200),
        ]
    )
    assert calculate_skip_seconds(0.95, unsorted) == 43200


# -- checker semantics on a hand-built workload: exact call counts ------------------------------------------
def test_hand_built_workload_exact_counts() -> None:
    """Two scopes over 40 minutes, checks every minute.
    C1 top: m1 at 0, m2 at 20 → judged at 5 (0.8 → 1 h), re-judged at 25 once m2 has waited 5 minutes
    (a new message invalidates the cache) → 2 calls.
    C1 thread T: m3 at 2 → judged at 7 (0.5 → 10 min), 17, 27, 37 → 4 calls.
    Without the cache: every minute while eligible: C1 from 5..40 (36) + T from 7..40 (34) = 70 calls."""
    messages = [msg(1, 0), msg(2, 20), msg(3, 2, thread="T")]

    def answers(history, now):
        return no(0.8) if history[-1].thread_ts is None else no(0.5)

    class ScopeJudge(CountingJudge):
        async def judge(self, history, now):
            self.calls.append((history[-1].id, now))
            return JudgeOutcome(result=answers(history, now))

    with_cache = ScopeJudge(no(0))
    chk, _ = checker(messages, with_cache)
    for minute in range(0, 41):
        run(chk.check(at(minute)))
    assert [(mid, (t - T0).total_seconds() / 60) for mid, t in with_cache.calls] == [
        ("m1", 5),
        ("m3", 7),
        ("m3", 17),
        ("m2", 25),
        ("m3", 27),
        ("m3", 37),
    ]
    without = ScopeJudge(no(0))
    chk, _ = checker(messages, without, judgment_skip=JudgmentSkipConfig(enabled=False))
    for minute in range(0, 41):
        run(chk.check(at(minute)))
    assert len(without.calls) == 70


def test_responding_replies_and_stops_judging_the_scope() -> None:
    judge = CountingJudge(JudgmentResult(should_respond=True, reason="help", confidence=0.6))
    chk, _ = checker([msg(1, 0)], judge, judgment_skip=JudgmentSkipConfig(enabled=False))
    for minute in range(5, 15):
        report = run(chk.check(at(minute)))
        if minute == 5:
            assert report.responded == ["C1:top"]
    assert len(judge.calls) == 1  # the bot replied; nothing is unreplied any more


def test_messages_older_than_max_age_are_not_judged() -> None:
    judge = CountingJudge(no(0.5))
    chk, _ = checker([msg(1, 0)], judge, max_message_age_seconds=600, judgment_skip=JudgmentSkipConfig(enabled=False))
    for minute in (5, 10, 11, 12):
        run(chk.check(at(minute)))
    assert [(t - T0).total_seconds() / 60 for _, t in judge.calls] == [5, 10]


# -- failure policy ------------------------------------------------------------------------------------------
def test_backend_error_is_never_cached_and_retried_next_check() -> None:
    judge = CountingJudge([None, no(0.95)])
    chk, repo = checker([msg(1, 0)], judge)
    report = run(chk.check(at(5)))
    assert report.failed == ["C1:top"] and run(repo.count()) == 0
    run(chk.check(at(6)))
    assert len(judge.calls) == 2 and run(repo.find_by_scope("C1", None)).confidence == 0.95


def test_backoff_policy_waits_before_retrying() -> None:
    judge = CountingJudge([None, no(0.95)])
    chk, repo = checker([msg(1, 0)], judge, failure_policy=FailurePolicy.BACKOFF, backoff_seconds=300)
    run(chk.check(at(5)))
    for minute in (6, 7, 8, 9):
        run(chk.check(at(minute)))
    assert len(judge.calls) == 1 and run(repo.count()) == 0
    run(chk.check(at(10)))
    assert len(judge.calls) == 2


def test_unparseable_model_output_is_the_seed_default_not_an_error() -> None:
    from tests.engine.test_director import ScriptedModel

    outcome = run(ModelJudge(ScriptedModel(["I would rather not say."])).judge([msg(1, 0)], at(5)))
    assert outcome.error is None and outcome.result == JudgmentResult(
        should_respond=False, reason=outcome.result.reason, confidence=0.0, flags=["unparseable"]
    )
    missing = run(ModelJudge(ScriptedModel(['{"should_respond": true, "reason": "質問"}'])).judge([msg(1, 0)], at(5)))
    assert (missing.result.confidence, missing.result.flags) == (0.0, ["missing:confidence"])
    for bad in ("7", "NaN", "-1", "true", '"lots"'):
        out = run(
            ModelJudge(ScriptedModel([f'{{"should_respond": true, "reason": "q", "confidence": {bad}}}'])).judge(
                [msg(1, 0)], at(5)
            )
        )
        assert out.result.should_respond and out.result.confidence == 0.0
        assert out.result.flags == ["invalid:confidence"], bad


def _judge_replying(reply: str | RawResult) -> Any:
    from tests.fakes.scripted import FnModel

    return ModelJudge(FnModel(lambda r: reply))


@pytest.mark.parametrize(
    ("reply", "flag"),
    [
        ('{"should_respond": false, "reason": "様子見", "confidence": NaN}', "invalid:confidence"),
        ('{"should_respond": false, "reason": "様子見", "confidence": 7}', "invalid:confidence"),
        ('{"should_respond": false, "reason": "様子見"}', "missing:confidence"),
        ("not json", "unparseable"),
        ("truncated", "truncated"),
    ],
)
def test_a_failed_confidence_is_never_cached_so_no_long_skip(reply: str | RawResult, flag: str) -> None:
    """The origin's bug class: NaN (clamped before the NaN check) or a truncated answer without confidence
    became 1.0 and a 12-hour skip. Here the judgment decides, flagged, and the scope is judged again."""
    if reply == "truncated":  # the model stopped at max_tokens right before its confidence
        reply = RawResult(text='{"should_respond": false, "reason": "様子見です、念のため', finish_reason="length")
    events: list[tuple[str, dict]] = []
    source = ListSource([msg(1, 0)])
    repo = MemoryJudgmentCacheRepository()
    chk = PeriodicChecker(
        source, _judge_replying(reply), repo, ResponseConfig(), emit=lambda t, **p: events.append((t, p))
    )
    report = run(chk.check(at(5)))
    assert report.judged == ["C1:top"] and run(repo.count()) == 0
    judged = [p for t, p in events if t == "judgment"]
    assert judged[0]["flags"] == [flag] and judged[0]["skip_seconds"] is None and judged[0]["confidence"] == 0.0
    run(chk.check(at(6)))  # judged again at the next check, not 12 hours later
    assert sum(t == "judgment" for t, _ in events) == 2


def test_cleanup_is_scheduled() -> None:
    judge = CountingJudge(no(0.5))
    chk, repo = checker([msg(1, 0, channel="A")], judge, cleanup_interval_seconds=3600)
    run(chk.check(at(5)))  # first check runs the cleanup, then caches A until 15
    assert run(repo.count()) == 1
    report = run(chk.check(at(70)))  # an hour later: cleanup runs again and removes the expired row
    assert report.expired_deleted == 1


@pytest.mark.model
def test_probability_judge_with_the_bundled_model(store) -> None:
    from engine.skip.judges import ProbabilityJudge
    from models.catalog import load_catalog
    from models.registry import ModelHub

    judge = ProbabilityJudge(ModelHub(load_catalog(), call_log=store).get("gemma3-270m"))
    sleepy = run(
        judge.judge([Message(id="a", channel_id="C", thread_ts=None, author="aki", text="眠い…", at=T0)], at(10))
    )
    asking = run(
        judge.judge(
            [
                Message(
                    id="b",
                    channel_id="C",
                    thread_ts=None,
                    author="ben",
                    text="Does anyone know how to reset the VPN?",
                    at=T0,
                )
            ],
            at(10),
        )
    )
    for outcome in (sleepy, asking):
        assert outcome.error is None and outcome.result is not None
        assert 0.5 <= outcome.result.confidence <= 1.0
        assert outcome.call_id is not None and outcome.prompt_tokens > 0
    # the probabilities carry the content: a monologue is less of a call to speak than a question
    p = [float(o.result.reason.split("= ")[1].split(" ")[0]) for o in (sleepy, asking)]
    assert p[0] < p[1]


def test_probability_judge_failure_is_an_error_outcome() -> None:
    from engine.skip.judges import ProbabilityJudge
    from models.catalog import ModelSpec, Profile
    from models.registry import build_model

    spec = ModelSpec(
        id="x",
        backend="openai",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        needs_key=False,
        profile=Profile(name="x"),
    )
    outcome = run(ProbabilityJudge(build_model(spec)).judge([msg(1, 0)], at(5)))
    assert outcome.result is None and "ModelUnavailable" in (outcome.error or "")
