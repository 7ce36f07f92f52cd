"""A raised hand's reason in words: the expertise item the judge scored, tied to the part of the message it
answers ("asks “how do I debug it?” — my area: debugging"). The likelihood and embedding judges store a machine
reason (`closest expertise: debugging (PMI +5.27, best +6.26)`, kept in the telemetry and events); this is the
sentence a card shows. A judge that writes its own reason (the batched judge, self-judgment) keeps it."""

from __future__ import annotations

import re

EXPERTISE_PREFIX = "closest expertise: "
_MACHINE = re.compile(r"^closest expertise: (?P<item>.+?)(?: \(PMI [^)]*\))?$")
# Clause ends: Latin and Japanese sentence marks, dashes, semicolons (a comma splits too many phrases).
_CLAUSES = re.compile(r"(?<=[?？!！。.;；])\s*|\s+[—–-]\s+|\s*[—–]\s*")
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
MAX_WORDS = 12
MAX_CHARS = 90


def expertise_reason(item: str, pmi_mean: float | None = None, pmi_max: float | None = None) -> str:
    """The machine reason a likelihood or embedding judge stores for a participant (telemetry, events)."""
    if pmi_mean is None or pmi_max is None:
        return f"{EXPERTISE_PREFIX}{item}"
    return f"{EXPERTISE_PREFIX}{item} (PMI {pmi_mean:+.2f}, best {pmi_max:+.2f})"


def scored_item(reason: str) -> str | None:
    """The expertise item of a machine reason (`expertise_reason`), or None for a reason a judge wrote."""
    found = _MACHINE.match(reason.strip())
    return found.group("item").strip() if found else None


def _stems(text: str) -> set[str]:
    """Word stems for a loose match ("debugging" ~ "debug", "statistics" ~ "statistical"): the first five
    letters of each word of three or more; CJK text, without spaces, is matched by its characters."""
    words = {w.lower()[:5] for w in _WORD.findall(text)}
    return words | {ch for ch in text if "\u3040" <= ch <= "\u9fff"}


def _excerpt(message: str, item: str) -> str:
    """The clause of the message that is closest to the item (most shared stems), else its question, else its
    first clause; cut at a word to MAX_WORDS / MAX_CHARS."""
    clauses = [c.strip() for c in _CLAUSES.split(" ".join(message.split())) if c and c.strip(" -—–")]
    if not clauses:
        return ""
    wanted = _stems(item)
    best = max(clauses, key=lambda c: (len(_stems(c) & wanted), c.endswith(("?", "？"))))
    words = best.split()
    if len(words) > MAX_WORDS:
        best = " ".join(words[:MAX_WORDS]) + "…"
    if len(best) > MAX_CHARS:
        best = best[:MAX_CHARS].rsplit(" ", 1)[0] + "…"
    return best


def reason_sentence(reason: str, message: str) -> str:
    """What a hand card says: for a machine reason, what the message asks or mentions (quoted, shortened) and the
    scored expertise as "my area"; a reason a judge wrote is shown as written; no reason gives ""."""
    item = scored_item(reason)
    if item is None:
        return reason.strip()
    excerpt = _excerpt(message, item)
    if not excerpt:
        return f"my area: {item}"
    verb = "asks" if excerpt.endswith(("?", "？")) else "mentions"
    return f"{verb} “{excerpt}” — my area: {item}"
