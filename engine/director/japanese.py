"""Japanese text analysis for the hard rules: normalisation (§2), sentences and topics (§6), double negations
(§3 論理矛盾) and content words (§8). Pure functions of the text."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# -- normalisation (§2) ---------------------------------------------------------------------------

_QUOTED = re.compile(r"「[^「」]*」|（[^（）]*）|\([^()]*\)")
_SYMBOL_RUN = re.compile(r"([！？!?。、…〜~ー・♪])\1+")
_SPACES = re.compile(r"[ \t\u3000]+")
_VARIANTS = str.maketrans({"｡": "。", "､": "、", "!": "！", "?": "？", "．": "。", "，": "、"})


@dataclass(frozen=True, slots=True)
class Normalized:
    text: str  # normalised, quotes kept
    speech: str  # normalised, text inside 「」 and （） removed: what tone and praise look at
    script_form: bool  # the whole line was one 「…」 (§8): judged on its inside
    quoted: tuple[str, ...]  # what was excluded
    text_sentences: tuple[str, ...] = ()
    speech_sentences: tuple[str, ...] = ()
    text_topics: tuple[str, ...] = ()


def normalize(text: str) -> Normalized:
    """§2: unify punctuation variants, collapse repeated symbols and spaces, set quotes aside."""
    # NFKC turns full-width ！？ into ASCII; bring them back to the full-width forms the markers use.
    s = unicodedata.normalize("NFKC", text).translate(_VARIANTS) if text else ""
    s = _SYMBOL_RUN.sub(r"\1", s)
    if "\n" in s:
        s = "\n".join(_SPACES.sub(" ", line).strip() for line in s.splitlines()).strip("\n")
    else:
        s = _SPACES.sub(" ", s).strip()
    stripped = s.strip()
    script = stripped.startswith("「") and stripped.endswith("」") and stripped.count("「") == 1
    quoted: tuple[str, ...]
    if script:
        speech, quoted = stripped[1:-1], ()
    elif "「" in s or "（" in s or "(" in s:
        quoted = tuple(m.group(0) for m in _QUOTED.finditer(s))
        speech = _QUOTED.sub("", s)
    else:
        speech, quoted = s, ()
    text_sentences = tuple(sentences(s))
    return Normalized(
        text=s,
        speech=speech,
        script_form=script,
        quoted=quoted,
        text_sentences=text_sentences,
        speech_sentences=text_sentences if speech == s else tuple(sentences(speech)),
        text_topics=tuple(topics(s)),
    )


# -- sentence and topic counting (§6) --------------------------------------------------------------

_SENTENCE_END = re.compile(r"[^。！？\n]+[。！？]*|[。！？]+")


_HAS_WORD = re.compile(r"[^\s。！？]")


def sentences(text: str) -> list[str]:
    """§6.1: 。！？ end a sentence; a line break without one ends it too."""
    out = []
    for line in text.splitlines():
        for match in _SENTENCE_END.finditer(line):
            piece = match.group(0).strip()
            if piece and _HAS_WORD.search(piece):
                out.append(piece)
    return out


_NOUN = r"[一-龯々ァ-ヶーA-Za-z0-9]{1,12}"
# "（名詞）は（活用語）": after は comes a conjugating word — hiragana (とても暑い, いい) or a kanji stem
# with okurigana (楽しい, 行く) — not a noun predicate (一日二時間です, 禁物です), told apart by the copula.
_COPULA = r"(?:です|でし|だ|じゃ|で|な|の|に|を|が|と|は|も)"
_AFTER_WA = r"(?:です|でし|だ|じゃ|で[はも、。]|の|に|を|が|も)"
_CONJUGATING = rf"(?:(?!{_AFTER_WA})[ぁ-ゖ]|[一-龯々]{{1,2}}(?!{_COPULA})[ぁ-ゖ])"
_TOPIC_PATTERN = re.compile(rf"({_NOUN})について|({_NOUN})の話|({_NOUN})は(?={_CONJUGATING})")
# Words that are grammatical, not topics, before は (これは, 今日は are still counted: they set a topic).
_NOT_TOPICS = {"それ", "これ", "あれ", "私", "僕", "俺", "あたし", "わたし"}


def topics(text: str) -> list[str]:
    """§6.2: topic boundaries (〜について, 〜の話, noun + は + predicate), distinct, in order."""
    found: list[str] = []
    for match in _TOPIC_PATTERN.finditer(text):
        noun = match.group(1) or match.group(2) or match.group(3)
        if noun not in _NOT_TOPICS and noun not in found:
            found.append(noun)
    return found


# -- double negations (§3) -------------------------------------------------------------------------

# §3 論理矛盾: a negation applied to something already negated. "ない" is two different words:
# the negative auxiliary after a verb (知ら|ない, 食べ|ない), the copula (学生じゃ|ない) or an adjective's
# く-form (寒く|ない) — a negation — and the adjective ない ("absent", 仕方|ない, 問題|ない) or the ending
# of an adjective (危ない, 少ない), which is no negation at all. So 危なくない (危ない + く + ない), 少なくない
# and 仕方なくない negate once — ordinary Japanese, PASS — while 知らなくない, 知らなくはない,
# 知らないわけではない and 寒くないことはない negate a negation — RETRY. What comes before the first
# ない decides which ない it is (`_negation_before`).
_STILL_NEGATED_NOUN = re.compile(  # the seed's example: まだ + a negated noun (未成年, 不可能) + negation
    r"まだ(?:[^、。！？\s]{0,3})?([未不非無][一-龯]{1,4})(じゃない|ではない|でない|じゃありません|ではありません)"
)
_NEG_END = r"(?:ない|なかった|ありません)"
_NEGATED_AGAIN = re.compile(  # the second negation; group "first" is where the first ない starts
    rf"(?P<first>な)(?:く[はも]?{_NEG_END}|い(?:わけ|訳)(?:では|じゃ|でも){_NEG_END}|い(?:こと|事)[はも]{_NEG_END})"
)
# A verb's 未然形 (the form ない negates) ends in an あ-, い- or え-row kana (知ら, 起き, 食べ; し for する,
# こ for 来る); an adjective stem never does, except in adjectives that are frozen negated verbs or end in
# such a kana before ない. That class is closed: its ない is part of the word, not a negation.
_VERB_STEM_END = set("あかさたなはまやらわがざだばぱいきしちにひみりぎじぢびぴえけせてねへめれげぜでべぺこ")
_LEXICAL_NAI = (
    "きた",
    "すく",
    "おさ",
    "つた",
    "はか",
    "あどけ",
    "そっけ",
    "だらし",
    "せわし",
    "やるせ",
    "ぎこち",
    "もったい",
    "つまら",
    "くだら",
    "たまら",
    "しょうが",
    "しかた",
    "なさけ",
    "情け",
    "たより",
    "頼り",
    "ものたり",
    "物足り",
    "おとなげ",
    "大人げ",
    "さりげ",
    "なにげ",
    "何げ",
    "まちがい",
    "間違い",
    "ちがい",
    "違い",
    "たわい",
    "たあい",
    "かぎり",
    "限り",
    "もうしわけ",
)
# Particles before the adjective ない ("absent"): お金がない, 時間もない, 家にない, 意味はない.
_PARTICLES = set("がはもにをと")
# が is also the 未然形 ending of the godan verbs in -ぐ (泳ぐ → 泳がない, 急ぐ → 急がない): a closed class, so
# their stems are listed — one kanji not itself after a kanji (水泳がない is a noun + が), or the kana spellings
# and the -らぐ/-やぐ verbs. 泳がなくない is a verb negated twice; お金がなくない stays the adjective ない.
_GU_VERB_KANJI = set("泳急稼脱注騒防仰繋嗅研継接凌漕剥塞紡削寛担喘跨貢凪薙")
_GU_VERB_KANA = (
    "およが",
    "いそが",
    "かせが",
    "さわが",
    "ふせが",
    "かつが",
    "ふさが",
    "つむが",
    "しのが",
    "はしゃが",
    "そよが",
    "揺らが",
    "和らが",
    "安らが",
    "薄らが",
    "華やが",
)
# Ichidan verbs whose stem is one kanji (見ない, 寝ない): a kanji alone before ない is otherwise a noun.
_ONE_KANJI_VERBS = set("見寝出来着似煮居得経干射")
_KANJI = re.compile(r"[一-龯々]")


# What may stand right before such an adjective: a particle or a て-form ("これはつまらない", "見ててつまらない");
# any other kana makes the match part of a longer word (しやすく|ない is やすい, not すくない).
_WORD_BOUNDARY = set("がはもにをとのでてねよ")
_HIRAGANA = re.compile(r"[ぁ-ゖ]")


def _lexical_adjective(before: str) -> bool:
    for stem in _LEXICAL_NAI:
        if before.endswith(stem):
            prev = before[: -len(stem)][-1:]
            if not prev or not _HIRAGANA.match(prev) or prev in _WORD_BOUNDARY:
                return True
    return False


def _gu_verb_stem(before: str) -> bool:
    """`before` (ending in が) ends in the 未然形 of a godan -ぐ verb: 泳が, 急が, はしゃが — not 水泳が, お金が."""
    if before.endswith(_GU_VERB_KANA):
        return True
    verb = before[-2:-1]
    return verb in _GU_VERB_KANJI and (len(before) == 2 or not _KANJI.match(before[-3]))


# What _negation_before reads: the longest frozen adjective stem, the character before it, and some to spare.
_LOOKBACK = max(len(stem) for stem in _LEXICAL_NAI) + 8


def _negation_before(before: str) -> bool:
    """Whether the ない that follows `before` negates something (verb, copula, adjective く-form) rather
    than being the adjective ない or the end of an adjective like 危ない."""
    if not before:
        return False
    if _lexical_adjective(before):
        return False
    if before.endswith(("じゃ", "では", "で")) or before[-1] == "く":
        return True  # 学生じゃない, 学生ではない; 寒く|ない
    last = before[-1]
    if _KANJI.match(last):
        return last in _ONE_KANJI_VERBS and (len(before) == 1 or not _KANJI.match(before[-2]))
    if last == "が" and _gu_verb_stem(before):
        return True  # 泳が|ない: the verb, not a noun + が
    if last in _PARTICLES:
        return False
    return last in _VERB_STEM_END


def double_negations(text: str) -> list[str]:
    """Each double negation in `text`, as written."""
    hits = [m.group(0) for m in _STILL_NEGATED_NOUN.finditer(text)]
    for m in _NEGATED_AGAIN.finditer(text):
        start = m.start("first")
        before = text[max(0, start - _LOOKBACK) : start]  # a bounded window: a long text stays linear
        if _negation_before(before):
            word = re.search(r"[^\s、。！？「」（）()]{0,4}$", before[-4:])
            hits.append((word.group(0) if word else "") + m.group(0))
    return hits


# -- content words (§8) ----------------------------------------------------------------------------

_CONTENT_WORD = re.compile(r"[一-龯々]+|[ァ-ヶー]{2,}")


def content_words(text: str) -> list[str]:
    return _CONTENT_WORD.findall(text)
