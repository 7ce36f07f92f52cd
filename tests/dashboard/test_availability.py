"""The pages' model availability never waits behind run work, and a check that hangs degrades to "not checked"."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from dashboard import state


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    state._checked_availability.clear()
    yield
    state._checked_availability.clear()


def _hold(loop_runner, seconds: float) -> None:
    async def busy() -> None:
        time.sleep(seconds)  # a run that computes without awaiting: it holds its loop

    loop_runner.submit(busy())


def test_a_busy_run_loop_does_not_delay_the_availability_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "PROBE_TIMEOUT_S", 1.0)
    _hold(state.get_loop(), 3.0)
    got = state._live_availability(tuple(state.get_catalog().ids))
    assert set(got) == set(state.get_catalog().ids)
    assert not any("gave no answer" in a.reason for a in got.values())


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_check_that_hangs_makes_every_model_not_checked_for_this_rerun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "PROBE_TIMEOUT_S", 0.5)
    _hold(state._probe_loop(), 2.0)
    ids = tuple(state.get_catalog().ids)
    got = state._live_availability(ids)
    assert set(got) == set(ids) and not any(a.available for a in got.values())
    assert all("gave no answer within" in a.reason for a in got.values())
    time.sleep(2.0)  # the hang is over: the next rerun checks again (the timeout was never cached)
    assert not any("gave no answer" in a.reason for a in state._live_availability(ids).values())
