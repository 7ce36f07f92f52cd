"""How the history names a director run (`engine.mechanism.RunHooks`): a script by its file, a dialogue by its
speakers and topic, a check by its line."""

from __future__ import annotations

from engine.mechanism import RunHooks
from engine.quoting import short_text
from engine.store import Run


def about(run: Run, first: str | None) -> str:
    cfg = run.config
    if cfg.get("source"):
        return f"script {str(cfg['source']).replace(chr(92), '/').rsplit('/', 1)[-1]}"
    if run.kind == "director.duo" and cfg.get("first"):
        return f"{cfg['first']} × {cfg.get('second')}: {cfg.get('topic', '')}".rstrip(": ")
    if run.kind == "director.check" and cfg.get("text"):
        return f"{cfg.get('character', '')}: “{short_text(str(cfg['text']), 78)}”".lstrip(": ")
    return ""


HOOKS = RunHooks(about)
