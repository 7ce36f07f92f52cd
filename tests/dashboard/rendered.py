"""What a reader sees of page text that went through `dashboard.components.md` (backslash escapes and the
invisible word joiners that stop automatic links removed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    return _ESCAPE.sub(r"\1", markdown).replace("\u2060", "")


def app_test(script: Callable[[], None], query: Mapping[str, str] | None = None, timeout_s: float = 60) -> Any:
    """An AppTest of `script` (a page's render, wrapped), opened at the URL query `query`."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(script, default_timeout=timeout_s)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at


def rerun_until(at: Any, done: Callable[[], Any], timeout_s: float = 60.0, what: str = "timed out") -> None:
    """Pages watch their runs (they never wait on them): rerun `at` until `done()`, failing on a page
    exception or after `timeout_s` (with `what`)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not done():
        assert not at.exception, at.exception
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
        at.run()


def settle_runs(at: Any, kind: str | None = None, timeout_s: float = 120.0) -> None:
    """Rerun `at` until no run (of `kind`) is running any more, then once more so the page shows the ended run."""
    from dashboard import state

    store = state.get_store()
    rerun_until(
        at, lambda: not any(r.status == "running" for r in store.list_runs(kind=kind)), timeout_s, "the run never ended"
    )
    at.run()
