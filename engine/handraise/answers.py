"""What an approved participant says: the prompt its answering model gets, and the answer tidied so that a
person can read it — never a loop, never another speaker's line, never cut mid-word or mid-URL.

The judge and the answerer are different jobs. The likelihood pair (Gemma 3 270M base + SmolLM2) *ranks* who
should speak; a base model cannot *write*: it continues the transcript, loops and stops where its token budget
ends. So each participant has an answering model of its own (`Participant.answer_model`), by default the
instruction-tuned SmolLM2-135M-Instruct, asked for two or three sentences with the user's message as the
user's turn (a transcript in the user turn made it write the next speaker's line). What it still gets wrong,
`tidy_answer` cuts, and says what it cut (`AnswerTidy.cuts`, stored with the answer).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from models.base import is_truncated
from models.errors import ModelError
from models.recording import RunCancelled

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.handraise.cast import Participant, Turn
    from models.base import ChatModel

# The conversation's default answering model: instruction-tuned, so it answers the question it is asked.
DEFAULT_ANSWER_MODEL = "smollm2-135m"
# A little sampling keeps three answers to one question apart; more made SmolLM2 wander off the question.
ANSWER_TEMPERATURE = 0.3
ANSWER_MAX_TOKENS = 96

ANSWER_SYSTEM = (
    "You are {name}, who {role} (expertise: {expertise}), in a group chat with a user and other assistants. "
    "Reply to the user's last message in two or three plain sentences, from your own expertise. "
    "Do not write code. Do not write other people's lines."
)
EARLIER = "\n\nThe chat so far:\n{lines}"

# Sentence ends in English and Japanese, optionally followed by closing quotes or brackets.
_SENTENCE_END = re.compile(r"[.!?。！？…](?:[\"'”’)\]」』）】]*)(?=\s|$)|[。！？](?:[」』）】]*)")
_SPEAKER = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?([^\s:：*#][^:：\n]{0,40}?)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*")


def answer_messages(
    participant: Participant, turns: Sequence[Turn], names: Mapping[str, str], context_turns: int
) -> list[dict[str, str]]:
    """The answering model's messages: who it is and the chat so far (system), the user's last message (user)."""
    system = ANSWER_SYSTEM.format(
        name=participant.name,
        role=participant.role or "helps",
        expertise=", ".join(participant.expertise) or "general",
    )
    last = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].speaker == "user"), None)
    before = list(turns[:last] if last is not None else turns)
    earlier = before[-(context_turns - 1) :] if context_turns > 1 else []
    if earlier:
        system += EARLIER.format(lines="\n".join(f"{names.get(t.speaker, t.speaker)}: {t.text}" for t in earlier))
    question = turns[last].text if last is not None else ""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


@dataclass(frozen=True)
class AnswerTidy:
    """A tidied answer and what was cut from the model's text (empty: nothing)."""

    text: str
    cuts: list[str] = field(default_factory=list)


@dataclass
class Written:
    """An answer as the model streamed it (`raw`), tidied (`tidy`), and how it went: its tokens, the seconds to
    its first piece, and the error (a ModelError's kind and message, or the cancel) that ended it early."""

    raw: str
    tidy: AnswerTidy
    tokens: int = 0
    first_piece_s: float | None = None
    error: str | None = None


async def write_answer(
    model: ChatModel,
    participant: Participant,
    turns: Sequence[Turn],
    names: Mapping[str, str],
    speakers: Mapping[str, str],
    *,
    context_turns: int,
    max_tokens: int = ANSWER_MAX_TOKENS,
    on_chunk: Callable[[str], object] | None = None,
) -> Written:
    """`participant` answers the chat `turns` on `model`, streamed through `on_chunk`, then tidied. An answer
    the model ended itself is complete as it is; one its token budget, an error or a cancel ended is cut back
    to a sentence. The conversation and `judgelab bench --only handraise.answers` both write answers here."""

    messages = answer_messages(participant, turns, names, context_turns)
    pieces: list[str] = []
    finish: str | None = None
    written = Written(raw="", tidy=AnswerTidy(text=""))
    started = time.perf_counter()
    try:
        async for chunk in model.stream(messages, temperature=ANSWER_TEMPERATURE, max_tokens=max_tokens, seed=7):
            if chunk.text:
                if written.first_piece_s is None:
                    written.first_piece_s = time.perf_counter() - started
                pieces.append(chunk.text)
                if on_chunk:
                    on_chunk(chunk.text)
            if chunk.completion is not None:
                written.tokens = chunk.completion.usage.completion_tokens
                finish = chunk.completion.finish_reason
    except ModelError as exc:
        written.error = f"{type(exc).__name__}: {exc.message}"
    except RunCancelled as exc:  # the turn was cancelled: the answer keeps what it streamed
        written.error = f"cancelled: {exc or 'cancelled'}"
    written.raw = "".join(pieces).strip()
    stopped = finish is not None and not is_truncated(finish) and written.error is None
    written.tidy = tidy_answer(written.raw, participant.id, speakers, cut_off=not stopped)
    return written


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


# A chat layout's answer header the model wrote itself ("### Answer:", "Response:"): dropped, the line kept.
_HEADER = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?(?:answer|response|reply|assistant)(?:\*\*)?\s*[:：]", re.IGNORECASE)


# A loop rarely repeats a whole sentence word for word: a run of 8 words (or, in Japanese, 12 characters) said
# again is a repeat too.
NGRAM_WORDS, NGRAM_CHARS = 8, 12


def _grams(text: str) -> set[str]:
    """The runs a repeat is spotted by: 8-word runs, or 12-character runs of a text written without spaces."""
    words = re.findall(r"\w+", text.lower())
    if len(words) >= NGRAM_WORDS and len(words) * 4 >= len(text.replace(" ", "")) / 3:
        return {" ".join(words[i : i + NGRAM_WORDS]) for i in range(len(words) - NGRAM_WORDS + 1)}
    chars = re.sub(r"\W+", "", text)
    return {chars[i : i + NGRAM_CHARS] for i in range(len(chars) - NGRAM_CHARS + 1)}


def _speaker_of(line: str, speakers: Mapping[str, str]) -> str | None:
    """The speaker a line is written as ("Designer: …", "**User:** …"), if it names one; else None."""
    match = _SPEAKER.match(line)
    if match is None:
        return None
    return speakers.get(match.group(1).strip().lower())


def _sentences(text: str) -> list[str]:
    """The text split after each sentence end (the pieces joined give the text back)."""
    out, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        out.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


# A list item's marker with nothing after it ("2.", "-", "3)"): where a budget ran out, not a sentence end.
_BARE_MARKER = re.compile(r"\n\s*(?:\d+[.)]|[-*•])\s*$")


def _end_at_sentence(text: str) -> tuple[str, bool]:
    """The text up to its last sentence end; without one, up to the last whole word (a URL or a word cut off
    at the end is dropped) and an ellipsis. Returns (text, cut?)."""
    stripped = text.rstrip()
    bare = _BARE_MARKER.search(stripped)
    if bare is not None:
        return _end_at_sentence(stripped[: bare.start()])[0], True
    if not stripped or _ends_sentence(stripped):
        return stripped, False
    ends = list(_SENTENCE_END.finditer(stripped))
    if ends:  # the cut may leave the number of the next list item ("…done.\n2."): that goes too
        return _end_at_sentence(stripped[: ends[-1].end()])[0], True
    words = stripped.split()
    url = False
    while words and ("://" in words[-1] or words[-1].startswith(("http", "www."))):
        words.pop()
        url = True
    if len(words) > 1 and not url:
        words.pop()  # the last word may be cut off mid-way
    kept = " ".join(words).rstrip(",;:-–—")
    return (kept + "…") if kept else "", True


def _ends_sentence(text: str) -> bool:
    tail = text.rstrip()
    return bool(tail) and any(m.end() == len(tail) for m in _SENTENCE_END.finditer(tail))


def tidy_answer(text: str, own: str, speakers: Mapping[str, str], *, cut_off: bool = True) -> AnswerTidy:
    """`text` as a person should read it. `own` is the answering participant's id; `speakers` maps every name
    a line may be written as (lower case: "coder", "user", …) to its speaker id.

    - another speaker's line ("User: …", "Designer: …") ends the answer (`speaker`); one before any text of
      the participant's own is dropped with it; the participant's own name in front is removed;
    - a line or sentence said again ends it (`repeat`);
    - a code block left open ends it (`open_code`);
    - markdown markup is read out as plain text (`plain_text`: "**bold**" → "bold", "- item" → "• item"), since
      an answer is shown as text, never rendered;
    - when `cut_off` (the model stopped at its token limit, or it is not known why it stopped), it ends at a
      sentence (`sentence`): the last complete one, else the last whole word and "…". An answer the model
      ended itself is complete as it is ("Check the logs")."""
    cuts: list[str] = []
    kept: list[str] = []
    seen: set[str] = set()
    seen_grams: set[str] = set()
    in_code = False
    code_start = 0
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip().startswith("```"):
            in_code = not in_code
            code_start = len(kept)
            kept.append(line)
            continue
        if in_code:
            kept.append(line)
            continue
        speaker = _speaker_of(line, speakers)
        if speaker is not None and speaker != own:
            if any(k.strip() for k in kept):
                cuts.append("speaker")
                break
            cuts.append("speaker")
            continue
        if speaker == own or (speaker is None and _HEADER.match(line)):
            line = _SPEAKER.sub("", line, count=1)
        pieces: list[str] = []
        repeated = False
        for sentence in _sentences(line):
            key, grams = _norm(sentence), _grams(sentence)
            if (len(key) >= 8 and key in seen) or grams & seen_grams:
                repeated = True
                break
            if len(key) >= 8:
                seen.add(key)
            seen_grams |= grams
            pieces.append(sentence)
        kept.append("".join(pieces))
        if repeated:
            cuts.append("repeat")
            break
    if in_code:
        kept = kept[:code_start]
        cuts.append("open_code")
    answer = plain_text("\n".join(kept)).strip()
    answer = re.sub(r"\n{3,}", "\n\n", answer)
    if answer and (cut_off or cuts) and not answer.rstrip().endswith("```"):
        answer, cut = _end_at_sentence(answer)
        if cut:
            cuts.append("sentence")
    return AnswerTidy(text=answer, cuts=list(dict.fromkeys(cuts)))


# Markdown a reader would see as stray symbols once the answer is shown as text (it is never rendered: an
# answer is untrusted). Each pattern is replaced by its plain reading; code blocks are left as they are.
_MARKUP: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(\s*)#{1,6}\s+"), r"\1"),  # "### Heading" → "Heading"
    (re.compile(r"^(\s*)>\s?"), r"\1"),  # "> quoted" → "quoted"
    (re.compile(r"^(\s*)[-*+]\s+(?=\S)"), r"\1• "),  # "- item" / "* item" → "• item"
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), r"\1"),  # **bold**
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"), r"\1"),  # __bold__
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),  # *italic*
    (re.compile(r"`([^`\n]+)`"), r"\1"),  # `code`
    (re.compile(r"!?\[([^\]\n]+)\]\((\S+?)\)"), r"\1 (\2)"),  # [text](url) → text (url)
]
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")  # a horizontal rule: "---", "***"


def plain_text(text: str) -> str:
    """`text` with its markdown markup read out as plain text: headings, emphasis, quotes, rules and inline
    code lose their symbols, list bullets become "•", a link keeps its text and address. What is inside a
    fenced code block is kept as written. Shown as text, never rendered, so nothing here can make HTML."""
    out: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            in_code = not in_code
            out.append(line)
            continue
        if in_code:
            out.append(line)
            continue
        if _RULE.match(line):
            out.append("")
            continue
        for pattern, plain in _MARKUP:
            line = pattern.sub(plain, line)
        out.append(line)
    return "\n".join(out)


def readable_text(text: str) -> str:
    """A model's free text as a person reads it on the Models page: an answer header the model wrote itself
    ("### Answer:", "Response:") dropped from the start of its line, then `plain_text`."""
    lines = [_HEADER.sub("", line, count=1).lstrip() if _HEADER.match(line) else line for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", plain_text("\n".join(lines))).strip()


def speaker_names(participants: Sequence[Participant]) -> dict[str, str]:
    """Every name a line may be written as (lower case) → its speaker id: each participant's id and name,
    and the user."""
    out = {"user": "user", "you": "user", "human": "user", "instruction": "user", "input": "user"}
    for p in participants:
        out[p.id.lower()] = p.id
        out[p.name.lower()] = p.id
    return out


# -- what a reader would call a fault (measured before and after, `judgelab bench --only handraise.answers`) --


def answer_faults(text: str, own: str, speakers: Mapping[str, str]) -> set[str]:
    """The faults a reader sees in an answer: `repeated_line` (a sentence of 8+ characters, or a run of 8 words
    or 12 characters, said twice),
    `invented_speaker` (a line written as another speaker), `cut_off` (it does not end at a sentence or a
    closed code block: cut mid-word, mid-URL or mid-sentence), `empty`."""
    faults: set[str] = set()
    stripped = text.strip()
    if not stripped:
        return {"empty"}
    seen: set[str] = set()
    seen_grams: set[str] = set()
    for line in stripped.split("\n"):
        if _speaker_of(line, speakers) not in (None, own):
            faults.add("invented_speaker")
        for sentence in _sentences(line):
            key, grams = _norm(sentence), _grams(sentence)
            if (len(key) >= 8 and key in seen) or grams & seen_grams:
                faults.add("repeated_line")
            if len(key) >= 8:
                seen.add(key)
            seen_grams |= grams
    if _BARE_MARKER.search(stripped) or not (
        _ends_sentence(stripped) or stripped.endswith("```") or stripped.endswith("…")
    ):
        faults.add("cut_off")
    return faults


CUT_WORDS = {
    "repeat": "a repeated sentence",
    "speaker": "a line written as another speaker",
    "open_code": "an unfinished code block",
    "sentence": "an unfinished last sentence",
}


def cuts_note(cuts: Sequence[str]) -> str:
    """What tidying cut from an answer, in words ("" when nothing was)."""
    words = [CUT_WORDS.get(c, c) for c in cuts]
    return ("✂ Tidied: cut " + ", ".join(words) + ".") if words else ""
