"""What a reader sees of page text that went through `dashboard.components.md` (backslash escapes, the
invisible word joiners that stop automatic links and the zero-width spaces of `breakable` removed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    return _ESCAPE.sub(r"\1", markdown).replace("\u2060", "").replace("\u200b", "")


def app_test(script: Callable[[], None], query: Mapping[str, str] | None = None, timeout_s: float = 60) -> Any:
    """An AppTest of `script` (a page's render, wrapped), opened at the URL query `query`."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(script, default_timeout=timeout_s)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at


# A page rerun is a whole script run (~0.2 s of CPU): rerunning while a background run works takes the CPU it needs.
RERUN_EVERY_S = 0.5


def rerun_until(
    at: Any, done: Callable[[], Any], timeout_s: float = 60.0, what: str = "timed out", every_s: float = RERUN_EVERY_S
) -> None:
    """Pages watch their runs (they never wait on them): rerun `at` until `done()`, failing on a page
    exception or after `timeout_s` (with `what`); the page reruns every `every_s`."""
    import time

    deadline = time.monotonic() + timeout_s
    next_rerun = time.monotonic() + every_s
    while not done():
        assert not at.exception, at.exception
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # `done` often reads the store: checked often; the page (a full script run) less so
        if time.monotonic() >= next_rerun:
            at.run()
            next_rerun = time.monotonic() + every_s


def run_ended(run_id: str) -> bool:
    """The run is stored as ended and its thread is done: the store records the end a moment before the
    registry's future completes, and a page offers a new run only once both have."""
    from dashboard import state

    run = state.get_store().get_run(run_id)
    return run is not None and run.status != "running" and not state.get_registry().is_live(run_id)


def settle_runs(at: Any, kind: str | None = None, timeout_s: float = 120.0) -> None:
    """Wait until no run (of `kind`) is running any more — stored and in the registry — rerunning `at` once a
    second meanwhile (a page exception fails at once), then once more so the page shows the ended run. The
    waiting reads the store, not the page: a rerun every 0.2 s would spend the CPU the run needs."""
    import time

    from dashboard import state

    store = state.get_store()
    registry = state.get_registry()
    deadline = time.monotonic() + timeout_s
    next_rerun = time.monotonic() + 1.0
    while any(r.status == "running" or registry.is_live(r.id) for r in store.list_runs(kind=kind)):
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.05)
        if time.monotonic() >= next_rerun:
            at.run()
            assert not at.exception, at.exception
            next_rerun = time.monotonic() + 1.0
    at.run()
