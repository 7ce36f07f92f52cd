"""How the history names a skip run (`engine.mechanism.RunHooks`): a simulation by its workload."""

from __future__ import annotations

from collections.abc import Mapping

from engine.mechanism import RunHooks
from engine.store import Run


def about(run: Run, first: str | None) -> str:
    workload = run.config.get("workload")
    if run.kind != "skip.simulate" or not isinstance(workload, Mapping):
        return ""
    return f"{workload.get('channels', '?')} channels × {workload.get('hours', '?')} h"


HOOKS = RunHooks(about)
