"""The Jury page's case picker: a case from a file under data/ (its text shown in a box of its own height, and its
own rubric) or one pasted; and the case a stored run judged, put back into the picker when the page re-attaches."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import formstate as form
from dashboard.components import in_words, md
from dashboard.mechanisms.jury.fields import KEY
from engine.config import get_settings
from engine.jury.config import CaseError, JuryCase, load_cases
from engine.jury.config import case_files as jury_case_files


def case_files() -> list[Path]:
    return jury_case_files(get_settings().data_dir)


def restore_case(case: JuryCase) -> None:
    for path in case_files():
        try:
            found = next((c for c in load_cases(path) if c.id == case.id and c.content == case.content), None)
        except CaseError:
            continue
        if found is not None:
            form.restore({KEY + "source": "From a file", KEY + "file": path, KEY + "case." + path.name: found})
            return
    form.restore({KEY + "source": "Paste one", KEY + "paste_title": case.title, KEY + "paste_content": case.content})


def render_case() -> JuryCase | None:
    source = form.choice(st.radio, "Case", ["From a file", "Paste one"], KEY + "source", horizontal=True)
    if source == "Paste one":
        title = form.field(st.text_input, "Title", KEY + "paste_title", initial="My case")
        content = form.field(
            st.text_area,
            "Agent card and conversation log (or any text to judge)",
            KEY + "paste_content",
            initial="",
            height=160,
        )
        if not content.strip():
            st.info("Paste the case to judge.")
            return None
        return JuryCase(id="pasted", title=title, content=content)
    files = case_files()
    if not files:
        st.warning("No case files under data/scenarios/jury or data/benchmarks.")
        return None
    path = form.choice(st.selectbox, "File", files, KEY + "file", format_func=lambda p: p.name)
    try:
        cases = load_cases(path)
    except CaseError as exc:
        st.error(md(exc, inline=False))
        return None
    chosen = form.choice(
        st.selectbox,
        "Case",
        cases,
        KEY + "case." + path.name,
        format_func=lambda c: f"{c.id} — {c.title}" + (f" (gold: {in_words(c.gold)})" if c.gold else ""),
    )
    st.caption("Case text (what the jurors read)")
    with st.container(height=180, border=True):  # shown, in a box of its own height: the Run button stays near
        st.text(chosen.content)
        if chosen.rubric is not None:
            rubric = chosen.rubric
            st.caption(f"Own rubric: verdicts {md(', '.join(rubric.verdicts))}; axes {md(', '.join(rubric.axes))}")
    return chosen
