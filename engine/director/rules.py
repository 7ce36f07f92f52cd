"""The hard rules (§3–§6) and the special cases (§8): one function per rule, each a `RuleResult`, and
`evaluate_rules`, whose status is the most severe of them. Pure; `retune` re-decides stored rule facts under
other cut-offs. `DirectorState` is what the rules remember of the conversation (§9: a RETRY line never
changes it)."""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engine.director.config import SPEC_CONFIG, CharacterProfile, DirectorConfig
from engine.director.japanese import Normalized, content_words, double_negations, normalize
from engine.director.mend import MENDABLE_RULES, Mend, propose
from engine.director.status import Status, worst

# -- hard rules (§3, §5, §6) -----------------------------------------------------------------------


@dataclass(slots=True)
class RuleResult:
    rule: str
    status: Status
    detail: str
    matches: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def count_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def format_status(lines: int, cfg: DirectorConfig) -> Status:
    """The format rule's cut-offs: RETRY at `format_retry_lines` lines, WARN at `format_warn_lines`."""
    return (
        Status.RETRY
        if lines >= cfg.format_retry_lines
        else Status.WARN
        if lines >= cfg.format_warn_lines
        else Status.PASS
    )


def rule_format(n: Normalized, cfg: DirectorConfig) -> RuleResult:
    lines = count_lines(n.text)
    return RuleResult("format", format_status(lines, cfg), f"{lines} lines", [], {"lines": lines})


def rule_setting(n: Normalized, profile: CharacterProfile) -> RuleResult:
    hits = [p for p in profile.setting_violations if p in n.text]
    if hits:
        return RuleResult("setting", Status.RETRY, f"breaks the setting: {', '.join(hits)}", hits, {})
    return RuleResult("setting", Status.PASS, "consistent with the setting", [], {})


EVALUATION_WORDS = ("すごい", "すごく", "凄い", "素晴らしい", "正解", "完璧", "天才")
OTHER_REFERENCES = ("あなた", "きみ", "君", "ユーザー", "その答え", "その考え", "お姉ちゃん", "あゆ", "やな")
AFFIRMATIONS = ("正しい", "合っている", "合ってる", "素敵", "その通り")


@functools.lru_cache(maxsize=64)
def _affirmations_for(name: str) -> tuple[str, ...]:
    """What affirms the other, from the speaker's side (her own name is not 'the other')."""
    return tuple(o for o in OTHER_REFERENCES if o != name) + AFFIRMATIONS


def rule_praise(n: Normalized, profile: CharacterProfile) -> RuleResult:
    """§5: an evaluation word with an affirmation of the other in the same sentence → RETRY;
    an evaluation word alone → WARN. Quoted text is not looked at. Only for profiles with `praise_rule`."""
    if not profile.praise_rule:
        return RuleResult("praise", Status.PASS, f"praise rule not applied to {profile.name}", [], {})
    others = _affirmations_for(profile.name)
    alone: list[str] = []
    for sentence in n.speech_sentences:
        words = [w for w in EVALUATION_WORDS if w in sentence]
        if not words:
            continue
        affirm = [o for o in others if o in sentence]
        if affirm:
            return RuleResult("praise", Status.RETRY, f"praises the other: '{sentence}'", words + affirm, {})
        alone += words
    if alone:
        return RuleResult("praise", Status.WARN, f"evaluation word without affirmation: {', '.join(alone)}", alone, {})
    return RuleResult("praise", Status.PASS, "no praise", [], {})


def scatter_status(sentences: int, topics: int, cfg: DirectorConfig) -> Status:
    """The scatter rule's cut-offs: RETRY when both sentences and topics reach theirs, WARN when either does."""
    if sentences >= cfg.scatter_retry_sentences and topics >= cfg.scatter_retry_topics:
        return Status.RETRY
    if sentences >= cfg.scatter_warn_sentences or topics >= cfg.scatter_warn_topics:
        return Status.WARN
    return Status.PASS


def rule_scatter(n: Normalized, cfg: DirectorConfig) -> RuleResult:
    count = len(n.text_sentences)
    found = list(n.text_topics)
    facts = {"sentences": count, "topics": len(found), "chars": len(n.text.replace("\n", ""))}
    detail = f"{count} sentences, {len(found)} topics ({', '.join(found) or '—'})"
    return RuleResult("scatter", scatter_status(count, len(found), cfg), detail, found, facts)


def rule_line_length(n: Normalized, profile: CharacterProfile) -> RuleResult:
    """§3's advice (散漫検出: 50〜80文字以内を推奨): a line over the character's ceiling (80 by default) is a WARN
    with the count; a short line is never flagged; a ceiling of 0 turns the check off."""
    chars = len(n.text.replace("\n", ""))
    ceiling = profile.max_line_chars
    facts = {"chars": chars, "ceiling": ceiling}
    if ceiling and chars > ceiling:
        detail = f"{chars} characters, over the {ceiling} advised (the seed: 50–80)"
        return RuleResult("line_length", Status.WARN, detail, [], facts)
    within = f"within {ceiling}" if ceiling else "no ceiling for this character"
    return RuleResult("line_length", Status.PASS, f"{chars} characters ({within})", [], facts)


def rule_logic(n: Normalized) -> RuleResult:
    hits = double_negations(n.speech)
    if hits:
        return RuleResult("logic", Status.RETRY, f"double negation reverses the intent: {', '.join(hits)}", hits, {})
    return RuleResult("logic", Status.PASS, "no reversed negation", [], {})


@dataclass(slots=True)
class ToneScore:
    marker: int
    vocab: int
    style: int
    score: int
    matches: dict[str, list[str]] = field(default_factory=dict)


@functools.lru_cache(maxsize=64)
def _ending_pattern(endings: tuple[str, ...]) -> re.Pattern[str]:
    # "…ですね。" still ends the sentence in a polite form: allow a sentence-final particle after it.
    return re.compile(rf"(?:{'|'.join(map(re.escape, endings))})(?:よね|ね|よ|か|な)?[。！？]*$")


def tone_score(n: Normalized, profile: CharacterProfile) -> ToneScore:
    """§4: tone_score = marker_hit + vocab_hit + style_hit, on the normalised speech."""
    text = n.speech
    markers = [m for m in profile.markers if m in text]
    vocab = [v for v in profile.vocab if v in text]
    said = n.speech_sentences
    style = profile.style
    if style.kind == "short_exclaim":
        style_hit = len(said) <= style.max_sentences and any(mark in text for mark in style.marks)
        style_matches = [mark for mark in style.marks if mark in text] if style_hit else []
    else:
        polite = _ending_pattern(tuple(style.endings))
        endings = [s for s in said if polite.search(s)]
        style_hit = len(endings) >= style.min_count
        style_matches = endings if style_hit else []
    marker_hit, vocab_hit = int(bool(markers)), int(bool(vocab))
    return ToneScore(
        marker=marker_hit,
        vocab=vocab_hit,
        style=int(style_hit),
        score=marker_hit + vocab_hit + int(style_hit),
        matches={"marker": markers, "vocab": vocab, "style": style_matches},
    )


def tone_status(score: int, cfg: DirectorConfig) -> Status:
    """The tone rule's cut-offs: PASS at `tone_pass`, WARN at `tone_warn`, RETRY below."""
    return Status.PASS if score >= cfg.tone_pass else Status.WARN if score >= cfg.tone_warn else Status.RETRY


def rule_tone(tone: ToneScore, cfg: DirectorConfig) -> RuleResult:
    status = tone_status(tone.score, cfg)
    detail = f"tone {tone.score} = marker {tone.marker} + vocab {tone.vocab} + style {tone.style}"
    matches = [w for ws in tone.matches.values() for w in ws]
    return RuleResult("tone", status, detail, matches, {"score": tone.score})


# -- conversation state and the special cases (§8, §9) ----------------------------------------------


@dataclass(frozen=True)
class DirectorState:
    """What the director remembers of the conversation. A RETRY line never changes it (§9)."""

    topic: str | None = None
    depth: int = 0  # accepted lines on the current topic (the Hook Depth)
    recent_words: tuple[tuple[str, ...], ...] = ()  # content words of the last accepted lines
    loop_count: int = 0
    accepted: int = 0


def rule_loop(n: Normalized, state: DirectorState, cfg: DirectorConfig) -> RuleResult:
    """§8: the same word again and again (in this line, or across the last lines) → WARN, never RETRY."""
    words = content_words(n.speech)
    if len(words) < cfg.loop_repeat and not state.recent_words:
        return RuleResult("topic_loop", Status.PASS, "no loop", [], {})
    counts = Counter(words)  # one pass: a long line's words counted once each, not once a word
    repeated = sorted(w for w, n in counts.items() if n >= cfg.loop_repeat)
    recent = state.recent_words[-(cfg.loop_history - 1) :] if cfg.loop_history > 1 else ()
    across = sorted({w for w in set(words) if sum(w in line for line in recent) >= cfg.loop_history - 1 > 0})
    hits = repeated + [w for w in across if w not in repeated]
    if hits:
        return RuleResult("topic_loop", Status.WARN, f"keeps coming back to: {', '.join(hits)}", hits, {})
    return RuleResult("topic_loop", Status.PASS, "no loop", [], {})


def rule_early_change(n: Normalized, state: DirectorState, cfg: DirectorConfig) -> RuleResult:
    """§8: starting another topic before the current one was explored → WARN, never RETRY."""
    found = n.text_topics
    if state.topic and found and state.topic not in found and state.depth < cfg.early_change_depth:
        detail = f"moves from '{state.topic}' to '{found[0]}' after {state.depth} line(s)"
        return RuleResult("early_topic_change", Status.WARN, detail, list(found[:1]), {})
    return RuleResult("early_topic_change", Status.PASS, "topic change is fine", [], {})


SCRIPT_FORM_NOTE = "the line is written in 「」 (script form): judged on its content; fix next turn"


def rule_script_form(n: Normalized) -> RuleResult:
    if n.script_form:
        return RuleResult("script_form", Status.WARN, SCRIPT_FORM_NOTE, [], {})
    return RuleResult("script_form", Status.PASS, "plain speech", [], {})


def apply_state(state: DirectorState, n: Normalized, status: Status) -> DirectorState:
    """The state after a line: unchanged for RETRY (§9), else topic depth and loop memory advance."""
    if status == Status.RETRY:
        return state
    found = n.text_topics
    topic: str | None
    if found and found[0] != state.topic and (state.topic is None or state.topic not in found):
        topic, depth = found[0], 1
    else:
        topic, depth = state.topic, state.depth + 1
    words = tuple(dict.fromkeys(content_words(n.speech)))
    return DirectorState(
        topic=topic,
        depth=depth,
        recent_words=(state.recent_words + (words,))[-8:],
        loop_count=state.loop_count + (1 if status == Status.WARN else 0),
        accepted=state.accepted + 1,
    )


# -- combining ------------------------------------------------------------------------------------

EMPTY_STATE = DirectorState()


@dataclass(slots=True)
class RulesVerdict:
    status: Status
    rules: list[RuleResult]
    tone: ToneScore
    normalized: str
    speech: str
    # What the director would change (engine/director/mend.py) and the rules on the changed line: the status is
    # MODIFY when every rule at WARN is one a mend clears and the mended line passes every rule.
    mend: Mend | None = None
    mended: RulesVerdict | None = None

    def shown(self, text: str, status: Status | None = None) -> str:
        """The line as shown at `status` (default: this verdict's): the mended line for MODIFY, else `text`."""
        return self.mend.text if (status or self.status) == Status.MODIFY and self.mend else text

    def judged(self, status: Status | None = None) -> str:
        """What the rubric reads at `status`: the mended line's normalised text for MODIFY."""
        return self.mended.normalized if (status or self.status) == Status.MODIFY and self.mended else self.normalized


def evaluate_rules(
    text: str,
    profile: CharacterProfile,
    cfg: DirectorConfig | None = None,
    state: DirectorState | None = None,
    *,
    mend: bool = True,
) -> RulesVerdict:
    """Every hard rule and special case; the rules-only status is the most severe of them — or MODIFY, when the
    director can mend the line itself (`cfg.mend`; `modify_status`)."""
    cfg = cfg or SPEC_CONFIG
    state = state or EMPTY_STATE
    n = normalize(text)
    tone = tone_score(n, profile)
    rules = [
        rule_format(n, cfg),
        rule_setting(n, profile),
        rule_praise(n, profile),
        rule_scatter(n, cfg),
        rule_line_length(n, profile),
        rule_logic(n),
        rule_tone(tone, cfg),
        rule_script_form(n),
        rule_loop(n, state, cfg),
        rule_early_change(n, state, cfg),
    ]
    verdict = RulesVerdict(
        status=worst([r.status for r in rules]), rules=rules, tone=tone, normalized=n.text, speech=n.speech
    )
    if cfg.mend and mend:
        warned = frozenset(r.rule for r in rules if r.status == Status.WARN and r.rule in MENDABLE_RULES)
        verdict.mend = propose(text, warned, profile.max_line_chars)
        if verdict.mend is not None:  # judged again (as the same turn, with the same state), never mended twice
            verdict.mended = evaluate_rules(verdict.mend.text, profile, cfg, state, mend=False)
            verdict.status = retune(verdict, cfg)
    return verdict


def retune(verdict: RulesVerdict, cfg: DirectorConfig) -> Status:
    """Re-decide a stored verdict under other cut-offs from its recorded facts (no text, no model), through
    the same status functions the rules use; its mended line (if any) re-decided the same way for MODIFY."""
    statuses = []
    for r in verdict.rules:
        if r.rule == "format":
            statuses.append(format_status(r.facts["lines"], cfg))
        elif r.rule == "scatter":
            statuses.append(scatter_status(r.facts["sentences"], r.facts["topics"], cfg))
        elif r.rule == "tone":
            statuses.append(tone_status(r.facts["score"], cfg))
        else:
            statuses.append(r.status)
    return modify_status(verdict, statuses, cfg)


def modify_status(verdict: RulesVerdict, statuses: list[Status], cfg: DirectorConfig) -> Status:
    """§1's MODIFY: the line would pass but for rules the director mends itself (every rule at WARN is in
    `MENDABLE_RULES`, none at RETRY; a stray repeated mark alone is mended too), and the mended line passes every
    rule at these cut-offs. Otherwise the most severe of `statuses`."""
    status = worst(statuses)
    if not (cfg.mend and verdict.mended is not None and status <= Status.WARN):
        return status
    warned = [r.rule for r, s in zip(verdict.rules, statuses, strict=True) if s == Status.WARN]
    if all(rule in MENDABLE_RULES for rule in warned) and retune(verdict.mended, cfg) == Status.PASS:
        return Status.MODIFY
    return status
