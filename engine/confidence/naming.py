"""How the history names a confidence run (`engine.mechanism.RunHooks`): an evaluation by its query, a labelled set
by its file."""

from __future__ import annotations

from engine.mechanism import RunHooks
from engine.quoting import short_text
from engine.store import Run


def about(run: Run, first: str | None) -> str:
    cfg = run.config
    if run.kind == "confidence.evaluate" and cfg.get("query"):
        return f"“{short_text(str(cfg['query']), 88)}”"
    if run.kind == "confidence.eval" and cfg.get("source"):
        return f"labelled answers {cfg['source']} ({cfg.get('self_eval', '')})".replace(" ()", "")
    if run.kind == "confidence.calibrate" and cfg.get("labels"):
        return f"labelled set {cfg['labels']}"
    return ""


HOOKS = RunHooks(about)
