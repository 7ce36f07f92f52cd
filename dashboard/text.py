"""Text for display, shared by the pages, the charts and the report: untrusted strings made safe for markdown
(`md`) and for plotly labels (`plot_text`), and the figures and identifiers of a run in words. No Streamlit and
no figures here, so `charts`, `report` and the command line use it without loading either.

Untrusted text (model output, user input, files, cases, anything read back from the store) is never
markdown or HTML it controls: pages show it with `st.text`/`st.code`, or embed it in a trusted
markdown line through `md`, which backslash-escapes every ASCII punctuation character (CommonMark lets
any of them be escaped), so no link, image, heading, list, emphasis, HTML tag, directive or formula
can form and the text reads as written; bare URLs and e-mail addresses get an invisible word joiner
where GFM would start an automatic link. Plotly renders a subset of HTML in its labels and
hover text, so figures get untrusted strings through `plot_text`.
"""

from __future__ import annotations

import html
import re
from typing import Any

_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
# GFM turns bare URLs and e-mail addresses into links after escapes are resolved, so a word joiner (U+2060,
# invisible) goes where the link would start: "http:⁠//", "www⁠.", "@⁠".
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"
_SPACES = re.compile(r"\s+")


def money(value: float) -> str:
    """A cost as people read it: '$0' for local models, else four significant digits."""
    if not value:
        return "$0"
    return f"${value:.4g}" if value >= 0.0001 else f"${value:.2e}"


def duration(seconds: float | None) -> str:
    """A span of time as people read it: '45 s', '6 min', '6 min 5 s', '2 h 2 min', '1 d 3 h' (never '7345.0 s');
    '—' for none."""
    if seconds is None:
        return "—"
    total = round(float(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        minutes, secs = divmod(total, 60)
        return f"{minutes} min" + (f" {secs} s" if secs else "")
    if total < 86400:
        hours, minutes = divmod(round(total / 60), 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(round(total / 3600), 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def md(value: object, *, inline: bool = True) -> str:
    """Untrusted text made literal inside markdown (titles, labels, captions, alerts). `inline` folds
    line breaks into spaces (a label is one line); otherwise they become markdown hard breaks."""
    text = _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, "" if value is None else str(value)))
    if inline:
        return _SPACES.sub(" ", text).strip()
    return "  \n".join(line.strip() for line in text.splitlines())


ZERO_WIDTH_SPACE = "\u200b"
# After `_`, `·`, `:` and a `+` before a letter (not "+0.12": a sign stays with its number), and after the date of
# a map version ("20261123T" + "111521Z"), which a narrow card otherwise cut as "20261123T11152" + "1Z".
_BREAK_AFTER = re.compile(r"([_·:]|\+(?=[^\W\d])|(?<!\d)\d{8}T(?=\d{6}Z?\b))(?=\S)")


def breakable(value: object) -> str:
    """A machine identifier (feature names such as `pmi_last_rel`, map versions, flags such as
    `retry_next_check`) with an invisible break point (U+200B) after each underscore, after `·`, `:` and a
    `+` before a letter inside a word, and between a map version's date and time, so a narrow caption wraps
    it there rather than mid-word. The text reads the same; apply it before `md` when the value is untrusted
    (`md(breakable(x))`)."""
    return _BREAK_AFTER.sub("\\1" + ZERO_WIDTH_SPACE, "" if value is None else str(value))


def plot_text(value: object) -> str:
    """Untrusted text for a plotly label, legend or hover text: its pseudo-HTML tags (<a href>, <br>, <b>,
    <span style>) are shown, not rendered. Quotes stay as they are (plotly does not decode &quot;)."""
    return html.escape("" if value is None else str(value), quote=False)


def safe_avatar(icon: object, default: str = "🤖") -> str:
    """A chat avatar from an untrusted profile icon. Streamlit loads a string that looks like a URL or a
    path as an image, so only a short emoji (no ASCII at all) is kept; anything else gets the default."""
    text = "" if icon is None else str(icon).strip()
    if text and len(text) <= 8 and not any(ch.isascii() for ch in text):
        return text
    return default


# -- a jury run in words ----------------------------------------------------------------------------------------

BADGE = {"safe_pass": "🟢", "needs_review": "🟡", "unsafe_fail": "🔴"}
# The jury's identifiers in words, for a stakeholder: the default rubric's verdicts, the final methods, why the
# discussion ended and the consensus states. An identifier not listed (another rubric's label) reads with its
# underscores as spaces.
VERDICT_WORDS = {
    "safe_pass": "safe (pass)",
    "needs_review": "needs review",
    "unsafe_fail": "unsafe (fail)",
    "no_verdict": "no verdict",
    "failed": "failed (no vote)",
}
METHOD_WORDS = {
    "majority_vote": "majority vote",
    "weighted_average": "weighted average of the scores",
    "final_judge": "a final judge",
    "stack": "the panel's stack, calibrated on labelled cases",
    "auto": "the stack where one is fitted, else a final judge",
}
STOP_WORDS = {
    "phase1_consensus": "the jurors agreed in phase 1, so no discussion was needed",
    "no_discussion": "no discussion rounds were allowed",
    "not_collaborative": "independent votes: the collaborative jury is off",
    "no_influence": "no round could move anyone, so none was run",
    "consensus": "consensus was reached",
    "stagnation": "no one changed position any more",
    "max_rounds": "the round limit was reached",
}
CONSENSUS_WORDS = {
    "unanimous": "unanimous",
    "majority": "a majority",
    "split": "split",
    "no_quorum": "too few working jurors to decide",
}


def in_words(value: object, table: dict[str, str] | None = None) -> str:
    """An identifier of a jury run (a verdict label, a method, a stop reason, a consensus state) as a stakeholder
    reads it: from `table` (the verdict labels by default), else with its underscores as spaces. The result is
    still untrusted text where the value came from a case file: put it into markdown through `md`."""
    text = "" if value is None else str(value)
    return (VERDICT_WORDS if table is None else table).get(text, text.replace("_", " "))


def method_words(final: dict[str, Any], config: dict[str, Any]) -> str:
    """How the final verdict was decided, in words: 'a final judge (gemma3-270m)', 'majority vote'."""
    method = str(final.get("method") or "")
    words = in_words(method, METHOD_WORDS)
    if method == "final_judge" and config.get("final_judge_model"):
        words += f" ({config['final_judge_model']})"
    return words


def scope_words(scope: str) -> str:
    """A scope ('C002:top', 'C002:1700000000.5') as people read it: 'channel C002' or 'a thread in C002'."""
    channel, _, thread = scope.partition(":")
    return f"channel {channel}" if thread in ("", "top") else f"a thread in {channel} ({thread})"
