"""Characters a terminal (or a reader of one line) could act on, made visible as their `\\u001b` escapes: the one
definition behind the CLI's output (`terminal_safe`) and the paths an error names (`one_line`). JSON reads such an
escape as the very character, so JSON output stays valid and means the same."""

from __future__ import annotations

import re

# What a terminal may act on: C0 controls but newline and tab (ESC opens the sequences that retitle the
# window, OSC 0, or write the clipboard, OSC 52; CR and backspace overwrite what was shown), DEL, the C1
# controls (U+009B is a one-character CSI) and the bidi overrides and isolates (they reorder what is shown).
TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The same, and whatever breaks a line: newline, tab, the Unicode line and paragraph separators.
LINE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal_safe(text: str) -> str:
    """Text with every character a terminal could act on made visible; newlines and tabs (layout) kept."""
    return TERMINAL_CONTROLS.sub(_escape, text)


def one_line(text: str) -> str:
    """Text on one line whatever it holds (a file name with a newline, an ESC): every control shown as its escape."""
    return LINE_CONTROLS.sub(_escape, text)
