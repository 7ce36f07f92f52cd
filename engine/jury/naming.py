"""How the history names a jury run (`engine.mechanism.RunHooks`): by its case."""

from __future__ import annotations

from collections.abc import Mapping

from engine.mechanism import RunHooks
from engine.store import Run


def about(run: Run, first: str | None) -> str:
    """The case's title and id ("Password leak (pw-leak)")."""
    case = run.config.get("case")
    if not isinstance(case, Mapping):
        return ""
    title, cid = str(case.get("title") or ""), str(case.get("id") or "")
    return f"{title} ({cid})" if title and cid and title != cid else title or cid


def generic_names(run: Run) -> tuple[str, ...]:
    """`jury <case id>`: the name its entry point gives."""
    case = run.config.get("case")
    return (f"jury {case.get('id')}",) if isinstance(case, Mapping) else ()


HOOKS = RunHooks(about, generic_names=generic_names)
