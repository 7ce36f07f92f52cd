"""Text a spreadsheet would run as a formula (OWASP CSV injection): the one test, shared by every CSV writer (run
and experiment exports, label exports)."""

from __future__ import annotations

import unicodedata

# What a spreadsheet takes as the start of a formula (OWASP CSV injection); their full-width and small forms
# are caught by NFKC (＝ → =). A cell starting with a tab or a carriage return is neutralised whatever follows.
FORMULA_CHARS = frozenset("=+-@")


FORMULA_LEAD = ("\t", "\r")


# What a spreadsheet may skip before it reads a formula: any whitespace, controls, and the invisible format
# characters (zero-width space U+200B, word joiner U+2060, BOM U+FEFF, bidi marks …).
SKIPPED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


def is_formula(text: str) -> bool:
    """Whether a spreadsheet could read the text as a formula: it starts with a tab or a carriage return, or
    its first character that is not whitespace, a control or invisible is = + - @ in any width."""
    if text.startswith(FORMULA_LEAD):
        return True
    for ch in text:
        if unicodedata.normalize("NFKC", ch)[:1] in FORMULA_CHARS:
            return True
        if not (ch.isspace() or unicodedata.category(ch) in SKIPPED_CATEGORIES):
            return False
    return False


__all__ = ["FORMULA_CHARS", "FORMULA_LEAD", "SKIPPED_CATEGORIES", "is_formula"]
