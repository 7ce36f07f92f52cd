"""What a reader sees of page text that went through `dashboard.components.md` (backslash escapes and the
invisible word joiners that stop automatic links removed)."""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    return _ESCAPE.sub(r"\1", markdown).replace("\u2060", "")


def settle_runs(at: object, kind: str | None = None, timeout_s: float = 120.0) -> None:
    """Pages watch their runs (they never wait on them): rerun `at` until no run (of `kind`) is running any
    more, then once more so the page shows the ended run."""
    import time

    from dashboard import state

    deadline = time.monotonic() + timeout_s
    store = state.get_store()
    while any(r.status == "running" for r in store.list_runs(kind=kind)):
        assert not at.exception, at.exception  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.2)
        at.run()  # type: ignore[attr-defined]
    at.run()  # type: ignore[attr-defined]
