"""MODIFY (§1: 概ね合格だが、軽微な修正が必要（内部処理用）): what the director mends itself instead of sending a
line back. Three mends, each small and checkable:

- a stray repeated mark (``わ！！`` → ``わ！``; ！？。、 and their half-width forms — not …, ー, 〜 or ♪, which
  Japanese writes doubled on purpose);
- an evaluation word said alone (the praise rule's WARN): a sentence that is only the word (すごい！) is dropped;
  elsewhere a neutral word says the same without praising (すごく → とても, 素晴らしい → よい, 完璧 → 十分, すごい
  at a sentence's end → いい); 正解 and 天才 inside a sentence carry meaning and are never replaced;
- a line over the length advice, cut after its last whole sentence within the ceiling (never below one sentence).

Pure text in, text out: whether the mended line is good enough is the rules' call (`engine.director.rules`
re-judges it; MODIFY only when it passes every rule)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.director.japanese import normalize

# The rules whose WARN a mend can clear; any other rule at WARN leaves the line a WARN, shown as written.
MENDABLE_RULES = frozenset({"line_length", "praise"})

_STRAY_RUN = re.compile(r"([！？!?。、])\1+")
_QUOTE_OR_PAREN = re.compile(r"「[^「」]*」|（[^（）]*）|\([^()]*\)")
# An evaluation word and the neutral word said in its place. `すごい` only where it ends what is said (すごいね,
# すごいです, すごい！): before a noun (すごい人) no neutral word keeps the meaning, so it stays.
_SAID_ALONE = re.compile(  # an evaluation word that is a whole sentence (すごい！, 完璧です。): the sentence goes
    r"(?:(?<=^)|(?<=[。！？!?\n]))\s*(?:すっごい|すごい|凄い|素晴らしい|完璧|天才|正解)(?:です|だね|ね|よ|わ)*[！？!?。]+"
)
_NEUTRAL = (
    (re.compile(r"すっごく|すごく|凄く"), "とても"),
    (re.compile(r"素晴らしい"), "よい"),
    (re.compile(r"完璧"), "十分"),
    (re.compile(r"(?:すごい|凄い)(?=です|ね|よ|な|わ|[。！？!?、]|$)"), "いい"),
)
_SENTENCE = re.compile(r"[^。！？!?\n]*(?:[。！？!?]+|\n|$)")


@dataclass(slots=True)
class Mend:
    """The line as the director would show it, and each change in words."""

    text: str
    changes: list[str] = field(default_factory=list)


def fold_marks(text: str) -> tuple[str, list[str]]:
    """``！！`` → ``！``: each run of a repeated mark once."""
    runs = list(dict.fromkeys(m.group(0) for m in _STRAY_RUN.finditer(text)))
    if not runs:
        return text, []
    return _STRAY_RUN.sub(r"\1", text), [f"folded {run!r} to {run[0]!r}" for run in runs]


def _outside_quotes(text: str, pattern: re.Pattern[str], neutral: str, done: list[str]) -> str:
    """Replace `pattern` by `neutral` in what is said, never inside 「」 or （）(quoted text is not the speaker's)."""
    out, last = [], 0
    for quoted in [*_QUOTE_OR_PAREN.finditer(text), None]:
        end = quoted.start() if quoted else len(text)

        def swap(m: re.Match[str]) -> str:
            done.append(f"{m.group(0)!r} → {neutral!r}")
            return neutral

        out.append(pattern.sub(swap, text[last:end]))
        if quoted:
            out.append(quoted.group(0))
            last = quoted.end()
    return "".join(out)


def neutral_praise(text: str) -> tuple[str, list[str]]:
    """An evaluation word said alone, replaced by a neutral one where one keeps the meaning (see the module)."""
    changes: list[str] = []
    dropped = _SAID_ALONE.sub("", text).lstrip()
    if dropped != text and dropped.strip():  # never the whole line
        said = [m.group(0).strip() for m in _SAID_ALONE.finditer(text)]
        changes.append("dropped " + ", ".join(repr(x) for x in dict.fromkeys(said)) + " (praise said alone)")
        text = dropped
    done: list[str] = []
    for pattern, neutral in _NEUTRAL:
        text = _outside_quotes(text, pattern, neutral, done)
    return text, changes + [f"replaced {change} (praise)" for change in dict.fromkeys(done)]


def _chars(text: str) -> int:
    return len(normalize(text).text.replace("\n", ""))


def _balanced(text: str) -> bool:
    return (
        text.count("「") == text.count("」")
        and text.count("（") == text.count("）")
        and text.count("(") == text.count(")")
    )


def within_length(text: str, ceiling: int) -> tuple[str, list[str]]:
    """The line cut after its last whole sentence within `ceiling` characters (counted as the rule counts them);
    unchanged when even its first sentence is over (a cut inside a sentence would not be a line)."""
    parts = [p for p in _SENTENCE.findall(text) if p]
    kept, prefix = "", ""
    for part in parts:
        prefix += part
        if _chars(prefix) > ceiling:
            break
        if _balanced(prefix):  # never cut inside 「」 or （）
            kept = prefix
    kept = kept.rstrip("\n ")
    if not kept or kept == text.rstrip("\n "):
        return text, []
    dropped = len([p for p in parts if p.strip()]) - len([p for p in _SENTENCE.findall(kept) if p.strip()])
    return kept, [f"cut the last {dropped} sentence(s): {_chars(text)} → {_chars(kept)} characters"]


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
    return Mend(mended, changes) if changes else None
