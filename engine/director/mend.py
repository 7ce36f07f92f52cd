"""MODIFY (§1: 概ね合格だが、軽微な修正が必要（内部処理用）): what the director mends itself instead of sending a
line back. Three mends, each small and checkable:

- a stray repeated mark (``わ！！`` → ``わ！``; ！？。、 and their half-width forms — not …, ー, 〜 or ♪, which
  Japanese writes doubled on purpose);

No mend touches quoted text (「」, （）, 『』 …: it is not the speaker's), and a mend that would leave nothing of the
speaker's own is not made.
- an evaluation word said alone (the praise rule's WARN): a sentence that is only the word (すごい！) is dropped;
  elsewhere a neutral word says the same without praising, where one keeps the meaning (すごく → とても, 素晴らしい
  → よい, 完璧 → 十分); すごい, 正解 and 天才 inside a sentence are never replaced;
- a line over the length advice, cut after its last whole sentence within the ceiling (never below one sentence).

Pure text in, text out: whether the mended line is good enough is the rules' call (`engine.director.rules`
re-judges it; MODIFY only when it passes every rule)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.director.japanese import normalize

# The rules whose WARN a mend can clear; any other rule at WARN leaves the line a WARN, shown as written.
MENDABLE_RULES = frozenset({"line_length", "praise"})

_STRAY_RUN = re.compile(r"([！？!?。、])\1+")
# Quoted text is not the speaker's: no mend touches it (「」, ｢｣, 『』, （）, (), “”, "…").
_QUOTE_OR_PAREN = re.compile(r"「[^「」]*」|｢[^｢｣]*｣|『[^『』]*』|（[^（）]*）|\([^()]*\)|“[^“”]*”|\"[^\"]*\"")
# An evaluation word that is a whole sentence (すごい！, 完璧です。): the sentence goes. Anchored at a sentence's
# start, with nothing optional before the word, so a long run of line breaks is scanned once.
_SAID_ALONE = re.compile(
    r"(?:^|(?<=[。！？!?\n]))(?:すごい|凄い|素晴らしい|完璧|天才|正解)(?:です|だね|ね|よ|わ)*[！？!?。]+"
)
# An evaluation word (one the praise rule looks for) and a neutral word that keeps the sentence's meaning and
# grammar in its place — only where it does: not inside a longer word (ものすごく, 完璧主義), not negated
# (すごくない). すごい, 正解 and 天才 inside a sentence are never replaced: すごい is as often "heavy" (渋滞がすごい)
# as praise, and the other two carry meaning.
_NEUTRAL = (
    (re.compile(r"(?<![もの物])すごく(?!な[いかく])"), "とても"),
    (re.compile(r"(?<![もの物])素晴らしい"), "よい"),
    (re.compile(r"完璧(?=[だでなにす。！？!?、ねよ]|$)"), "十分"),
)
_SENTENCE = re.compile(r"[^。！？!?\n]*(?:[。！？!?]+|\n|$)")
_SPOKEN = re.compile(r"[^\W\d_]")  # a letter (kana, kanji, latin): what a line must still say after a mend


@dataclass(slots=True)
class Mend:
    """The line as the director would show it, and each change in words."""

    text: str
    changes: list[str] = field(default_factory=list)


def _outside_quotes(text: str, mend: Callable[[str], str]) -> str:
    """`mend` applied to what the speaker says, never inside quotes (`_QUOTE_OR_PAREN`)."""
    out, last = [], 0
    for quoted in _QUOTE_OR_PAREN.finditer(text):
        out += [mend(text[last : quoted.start()]), quoted.group(0)]
        last = quoted.end()
    return "".join([*out, mend(text[last:])])


def fold_marks(text: str) -> tuple[str, list[str]]:
    """``！！`` → ``！``: each run of a repeated mark once, outside quotes."""
    runs: list[str] = []

    def fold(part: str) -> str:
        runs.extend(m.group(0) for m in _STRAY_RUN.finditer(part))
        return _STRAY_RUN.sub(r"\1", part)

    folded = _outside_quotes(text, fold)
    return folded, [f"folded {run!r} to {run[0]!r}" for run in dict.fromkeys(runs)]


def neutral_praise(text: str) -> tuple[str, list[str]]:
    """An evaluation word said alone, outside quotes: a sentence that is only the word is dropped (never the whole
    line), elsewhere a neutral word takes its place where one keeps the meaning (see `_NEUTRAL`)."""
    said: list[str] = []
    swapped: list[str] = []

    def drop(part: str) -> str:
        said.extend(m.group(0) for m in _SAID_ALONE.finditer(part))
        return _SAID_ALONE.sub("", part)

    def swap(part: str) -> str:
        for pattern, neutral in _NEUTRAL:

            def one(m: re.Match[str], neutral: str = neutral) -> str:
                swapped.append(f"{m.group(0)!r} → {neutral!r}")
                return neutral

            part = pattern.sub(one, part)
        return part

    changes: list[str] = []
    dropped = _outside_quotes(text, drop).lstrip()
    if said and _SPOKEN.search(_QUOTE_OR_PAREN.sub("", dropped)):  # something of the speaker's own is left
        changes.append("dropped the praise word said alone: " + ", ".join(repr(x) for x in dict.fromkeys(said)))
        text = dropped
    text = _outside_quotes(text, swap)
    return text, changes + [f"replaced the praise word {change}" for change in dict.fromkeys(swapped)]


def _chars(text: str) -> int:
    return len(normalize(text).text.replace("\n", ""))


def _balanced(text: str) -> bool:
    return all(text.count(a) == text.count(b) for a, b in ("「」", "（）", "()", "｢｣", "『』", "“”"))


def within_length(text: str, ceiling: int) -> tuple[str, list[str]]:
    """The line cut after its last whole sentence within `ceiling` characters (counted as the rule counts them);
    unchanged when even its first sentence is over (a cut inside a sentence would not be a line). Linear: each
    sentence is counted once (a running estimate), and only the cut chosen is counted again as the rule does."""
    parts = [p for p in _SENTENCE.findall(text) if p]
    ends: list[int] = []  # where a whole-sentence prefix within the estimate ends, quotes closed
    count = position = 0
    for part in parts:
        count += _chars(part) if part.strip() else 0
        position += len(part)
        if count > ceiling:
            break
        if part.strip() and _balanced(text[:position]):  # never cut inside quotes
            ends.append(position)
    while ends and _chars(text[: ends[-1]]) > ceiling:  # the estimate may differ from the rule's count by a mark
        ends.pop()
    kept = text[: ends[-1]].rstrip("\n ") if ends else ""
    if not kept or kept == text.rstrip("\n "):
        return text, []
    dropped = sum(1 for p in parts if p.strip()) - sum(1 for p in _SENTENCE.findall(kept) if p.strip())
    sentences = "the last sentence" if dropped == 1 else f"the last {dropped} sentences"
    return kept, [f"cut {sentences} to fit the length advice: {_chars(text)} → {_chars(kept)} characters"]


def propose(text: str, warned: frozenset[str], ceiling: int) -> Mend | None:
    """What the director would change in `text`, given the rules at WARN (`warned`): marks always folded, the
    praise and the length mended only when their rule warned. None when nothing would change."""
    mended, changes = fold_marks(text)
    if "praise" in warned:
        mended, more = neutral_praise(mended)
        changes += more
    if "line_length" in warned and ceiling:
        mended, more = within_length(mended, ceiling)
        changes += more
    if not changes or not _SPOKEN.search(_QUOTE_OR_PAREN.sub("", mended)):  # nothing of the speaker's own left
        return None
    return Mend(mended, changes)
