"""What a reader sees of page text that went through `dashboard.components.md` (backslash escapes and the
invisible word joiners that stop automatic links removed)."""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def shown(markdown: str) -> str:
    return _ESCAPE.sub(r"\1", markdown).replace("\u2060", "")
