"""Small display helpers shared by pages.

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
from collections.abc import Iterable
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


def md(value: Any, *, inline: bool = True) -> str:
    """Untrusted text made literal inside markdown (titles, labels, captions, alerts). `inline` folds
    line breaks into spaces (a label is one line); otherwise they become markdown hard breaks."""
    text = _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, "" if value is None else str(value)))
    if inline:
        return _SPACES.sub(" ", text).strip()
    return "  \n".join(line.strip() for line in text.splitlines())


def plot_text(value: Any) -> str:
    """Untrusted text for a plotly label, legend or hover text: its pseudo-HTML tags (<a href>, <br>, <b>,
    <span style>) are shown, not rendered. Quotes stay as they are (plotly does not decode &quot;)."""
    return html.escape("" if value is None else str(value), quote=False)


def safe_avatar(icon: Any, default: str = "🤖") -> str:
    """A chat avatar from an untrusted profile icon. Streamlit loads a string that looks like a URL or a
    path as an image, so only a short emoji (no ASCII at all) is kept; anything else gets the default."""
    text = "" if icon is None else str(icon).strip()
    if text and len(text) <= 8 and not any(ch.isascii() for ch in text):
        return text
    return default


def stream_as_text(pieces: Iterable[str], placeholder: Any, cursor: str = "▌") -> str:
    """Show a streamed answer as plain text while it arrives (`st.write_stream` would render markdown)."""
    text = ""
    for piece in pieces:
        text += piece
        placeholder.text(text + cursor)
    placeholder.text(text)
    return text
