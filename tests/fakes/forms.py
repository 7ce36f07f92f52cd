"""Finding a form's widget in an AppTest: a page keeps a form's values under its own keys and draws each widget
under a key of its own (`dashboard.formstate`), renewed whenever the page moves the value itself."""

from __future__ import annotations

import re
from typing import Any


def wkey(at: Any, key: str) -> str:
    """The key the widget for the page's `key` is drawn under now."""
    try:
        generation = at.session_state[key + ".gen"]
    except KeyError:
        generation = 0
    return f"{key}.w{generation}"


def form_key(widget: str) -> str:
    """The page's key a widget key belongs to (`director.rubric_judge.w2` → `director.rubric_judge`)."""
    return re.sub(r"\.w\d+$", "", widget)
