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
from collections.abc import Iterable, Sequence
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


def export_file(store: Any, run_id: str, fmt: str) -> bytes:
    """One export of a stored run, built from the store when asked: `csv` (every table, zipped), `json`,
    `html` (the self-contained report) or `csv:TABLE` (one table)."""
    from engine import exports

    record = exports.load_run(store, run_id)
    if fmt == "json":
        return exports.run_json(record).encode("utf-8")
    if fmt == "html":
        from dashboard.report import report_of

        return report_of(record).encode("utf-8")
    if fmt.startswith("csv:"):
        return exports.table_csv(record, fmt.removeprefix("csv:"))
    return exports.csv_zip(record)


def export_buttons(store: Any, run_ids: str | Sequence[str | None] | None, *, key: str = "export") -> None:
    """Download buttons for a run the page shows: CSV of its tables (zip), the whole run as JSON, and the
    self-contained HTML report. Files are built only when a button is clicked, from the stored run, and the
    click does not rerun the page. Given several runs (a page with several results), a picker chooses one."""
    from functools import partial

    import streamlit as st

    ids = [run_ids] if isinstance(run_ids, str) else [r for r in (run_ids or []) if r]
    if not ids:
        return
    with st.container(border=True):
        run_id = ids[0] if len(ids) == 1 else st.selectbox("Export run", ids, key=f"{key}.pick")
        st.caption(f"Export run {md(run_id)} — built from the stored run, keys redacted")
        files = (("⬇ CSV tables (zip)", "csv", ".zip", "application/zip"),
                 ("⬇ JSON (whole run)", "json", ".json", "application/json"),
                 ("⬇ HTML report", "html", ".html", "text/html"))
        for col, (label, fmt, suffix, mime) in zip(st.columns(len(files)), files, strict=True):
            col.download_button(label, partial(export_file, store, run_id, fmt), file_name=f"{run_id}{suffix}",
                                mime=mime, key=f"{key}.{fmt}.{run_id}", on_click="ignore")
