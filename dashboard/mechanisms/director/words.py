"""A director verdict as the page shows it: the status badge, why a line is WARN, MODIFY or RETRY in words, the tone
rule's parts, and the line with each rule's matches on its status colour."""

from __future__ import annotations

from typing import Any

from dashboard.components import md
from engine.director.status import Status

STATUS_COLORS = {"PASS": "green", "WARN": "orange", "MODIFY": "violet", "RETRY": "red"}
STATUS_ICONS = {"PASS": "✅", "WARN": "⚠️", "MODIFY": "✏️", "RETRY": "🔁"}


def status_badge(status: str) -> str:
    return f":{STATUS_COLORS[status]}-background[**{STATUS_ICONS[status]} {status}**]"


TONE_PARTS = {"marker": "sentence endings", "vocab": "typical words", "style": "speaking style"}


def rule_words(rule: dict[str, Any], tone: dict[str, Any] | None = None) -> str:
    """One rule at WARN or RETRY as a stakeholder reads it, from its name, detail and matches (the engine's
    reasons read 'tone: tone 1 = marker 0 + vocab 1 + style 0')."""
    name, detail, matches = str(rule.get("rule")), str(rule.get("detail") or ""), list(rule.get("matches") or [])
    quoted = "、".join(str(m) for m in matches[:3])
    if name == "tone":
        missing = [words for part, words in TONE_PARTS.items() if tone is not None and not tone.get(part)]
        said = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else "".join(missing)
        return "does not quite sound like the character" + (f": missing its {said}" if said else "")
    if name == "format":
        return f"too long ({detail})"
    if name == "setting":
        return "breaks the characters' setting" + (f" ({quoted})" if quoted else "")
    if name == "praise":
        if rule.get("status") == "RETRY":
            return "praises the other speaker"
        return "uses a praise word on its own" + (f" ({quoted})" if quoted else "")
    if name == "scatter":
        return f"scattered: {detail.split(' (')[0]}"
    if name == "line_length":
        return f"longer than advised ({detail.split(',')[0]})"
    if name == "logic":
        return "a double negative turns the meaning around" + (f" ({quoted})" if quoted else "")
    if name == "script_form":
        return "written as a script line in 「」 quotes"
    if name == "topic_loop":
        return "keeps coming back to the same words" + (f" ({quoted})" if quoted else "")
    if name == "early_topic_change":
        return "changes the topic before the current one was explored"
    return f"{name.replace('_', ' ')}: {detail}"


def tone_words(tone: dict[str, Any]) -> str:
    """The tone rule's detail in words: '2/3: ✓ endings ✗ words ✓ style' (not 'tone 2 = marker 1 + …')."""
    parts = (("marker", "endings"), ("vocab", "words"), ("style", "style"))
    return f"{tone.get('score', 0)}/3: " + " ".join(f"{'✓' if tone.get(p) else '✗'} {w}" for p, w in parts)


def status_why(review: dict[str, Any]) -> str:
    """Why a line is WARN, MODIFY or RETRY, in one line of words: each rule that flagged it (and, for MODIFY, what
    the director changed), and the rubric's average when it decided. Empty for a PASS."""
    if review.get("status") == "PASS":
        return ""
    tone = review.get("tone")
    parts = [rule_words(r, tone) for r in review.get("rules") or [] if r.get("status") in ("WARN", "RETRY")]
    if review.get("status") == "MODIFY":  # what was flagged, then what the director did about it
        changes = "; ".join(str(c) for c in review.get("changes") or [])
        return "; ".join(dict.fromkeys(parts)) + (f" — the director mended it: {changes}" if changes else "")
    rubric = review.get("rubric") or {}
    if rubric.get("failed"):
        parts.append("the rubric could not be scored")
    elif rubric.get("status") in ("WARN", "RETRY") and rubric.get("average") is not None:
        parts.append(f"the rubric scored it {float(rubric['average']):.1f} of 5")
    return "; ".join(dict.fromkeys(parts))


def mended_mark(review: dict[str, Any], rule: dict[str, Any]) -> str:
    """' ✏️' beside a rule's WARN that the director mended (a MODIFY line's WARNs are all such rules)."""
    return " ✏️" if review.get("status") == "MODIFY" and rule.get("status") == "WARN" else ""


def highlight(text: str, rules: list[dict[str, Any]]) -> str:
    """The line as markdown with each rule's matches on its status colour (worst wins, longest match first).
    The line itself is escaped: only the colour directives around the matches are markdown."""
    statuses: dict[str, str] = {}
    for rule in sorted(rules, key=lambda r: Status[r["status"]]):
        if rule["status"] != "PASS":
            statuses.update({word: rule["status"] for word in rule["matches"] if word})
    marks: list[str | None] = [None] * len(text)
    for word in sorted(statuses, key=len, reverse=True):
        start = text.find(word)
        while start >= 0:
            if not any(marks[start : start + len(word)]):
                marks[start : start + len(word)] = [statuses[word]] * len(word)
            start = text.find(word, start + 1)
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and marks[j] == marks[i]:
            j += 1
        segment, mark = md(text[i:j], inline=False), marks[i]
        out.append(f":{STATUS_COLORS[mark]}-background[{segment}]" if mark else segment)
        i = j
    return "".join(out)
