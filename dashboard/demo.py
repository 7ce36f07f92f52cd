"""Demo mode (sidebar "Demo (recorded)", or JUDGELAB_DEMO=1): every model a page builds answers from the recorded
demo runs of `data/demo/` through the replay backend, without fall-through, so no model is loaded. The demo runs
are loaded into the configured store when missing; a request that was not recorded is a ReplayMiss that names
the page's recorded inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.demo_hub import SWITCH, enabled, env_on
from dashboard.text import md
from engine.config import get_settings
from engine.demo import DemoError, DemoManifest, PageDemo, load_manifest, purpose_page
from engine.jury.config import case_files, load_cases
from models.errors import ReplayMiss

# `enabled` lives in dashboard.demo_hub (below the state); the pages ask it here.
__all__ = [
    "NOTICE",
    "OFF_PATH",
    "RERUN",
    "enabled",
    "is_miss",
    "miss_notice",
    "page_demo",
    "page_of_kind",
    "prefill",
    "render_hints",
    "render_switch",
    "run_page",
    "use_recorded",
]


def page_demo(url_path: str) -> PageDemo | None:
    try:
        return load_manifest().pages.get(url_path)
    except DemoError:
        return None


def _widget_values(prefill: dict[str, Any]) -> dict[str, Any]:
    """Widget keys and the values the page accepts; the Jury page's file and case are objects of its own."""
    values = {k: v for k, v in prefill.items() if k not in ("jury.file", "jury.case")}
    if "jury.file" in prefill:
        for path in case_files(get_settings().data_dir):
            if path.name == prefill["jury.file"]:
                values["jury.file"] = path
                chosen = [c for c in load_cases(path) if c.id == prefill.get("jury.case")]
                values.update({f"jury.case.{path.name}": chosen[0]} if chosen else {})
    return values


def prefill(manifest: DemoManifest) -> None:
    """Put each page's recorded inputs into its widgets, once per session (a presenter may change them)."""
    if st.session_state.get("demo.prefilled"):
        return
    for demo in manifest.pages.values():
        for key, value in _widget_values(demo.prefill).items():
            form.default(key, value)
    st.session_state["demo.prefilled"] = True


def render_switch() -> bool:
    """The sidebar switch; on, it loads the demo runs and prefills the pages. Returns whether demo mode is on."""
    on = st.sidebar.toggle(
        "Demo (recorded)",
        value=env_on(),
        key=SWITCH,
        help="Every page answers from the recorded demo runs (data/demo/) through the replay "
        "backend: no model is loaded, nothing is spent, inputs outside the recording are "
        "refused with the ones to try.",
    )
    if not on:
        return False
    try:
        prefill(load_manifest())
        state.get_hub()  # loads the demo runs into the store once, so Runs and Replay list them too
    except DemoError as exc:
        st.sidebar.error(str(exc))
    return True


def render_hints(url_path: str) -> None:
    """The current page's recorded inputs, each in a copyable box."""
    demo = page_demo(url_path)
    if demo is None:
        st.sidebar.caption("Demo mode: this page needs no model, or has nothing recorded.")
        return
    st.sidebar.markdown(f"**Recorded for {md(demo.title)}**")
    for text in demo.inputs:
        st.sidebar.code(text, language=None, wrap_lines=True)
    if demo.note:
        st.sidebar.caption(md(demo.note))


RERUN = "demo.rerun"
NOTICE = (  # shown with the 🎬 icon of `st.info`: the text carries none of its own
    "This input is not in the demo recording. Demo mode replays what was recorded and loads no model, so it "
    "answers the recorded inputs only."
)


def is_miss(error: object) -> bool:
    """Whether a failure (an exception, or a stored run's error text) is a request the recording lacks."""
    if isinstance(error, ReplayMiss):
        return True
    text = str(error or "")
    return text.startswith("ReplayMiss") or "via replay] replay miss" in text


def page_of_kind(kind: str) -> str | None:
    """The page a run kind belongs to (`jury.run` → jury)."""
    return purpose_page(kind.split(".")[0])


def use_recorded(url_path: str) -> None:
    """Put the page's recorded inputs back into its widgets (the "use the recorded input" button)."""
    demo = page_demo(url_path)
    if demo is None:
        return
    form.restore(_widget_values(demo.prefill))


OFF_PATH = (
    "This message is in the demo recording, but the conversation took another path before it (the recording "
    "approved every raised hand, and its answers are part of what the next judgment reads). Demo mode answers "
    "only the recorded path: start again and approve every raised hand."
)


def miss_notice(
    url_path: str | None, *, key: str, on_use: Callable[[], None] | None = None, sent: str | None = None
) -> None:
    """The friendly notice for a request outside the recording (demo mode only; live, a miss stays an error):
    what demo mode can answer, the recorded inputs, and a button that puts them back (`on_use`, else the page's
    recorded widget values)."""
    demo = page_demo(url_path) if url_path else None
    with st.container(border=True):
        recorded_input = demo is not None and sent is not None and sent in demo.inputs
        st.info(OFF_PATH if recorded_input else NOTICE, icon="🎬")
        if demo is not None and demo.inputs:
            st.caption("Recorded: " + " · ".join(f"“{md(i)}”" for i in demo.inputs))
        if demo is not None and (demo.prefill or on_use is not None):

            def use() -> None:
                (on_use or (lambda: use_recorded(url_path or "")))()
                st.session_state[RERUN] = True

            st.button("Use the recorded input", key=key, type="primary", on_click=use)
            if st.session_state.pop(RERUN, False):
                st.rerun()  # inside a fragment (a watched run) the widgets outside it take the values too
        elif demo is None:
            st.caption("Nothing was recorded for this page: switch Demo (recorded) off to use a live model.")


def run_page(run: Callable[[], None], url_path: str, on: bool) -> None:
    """Run a page; in demo mode with its recorded inputs in the sidebar, and a request outside the recording
    shown as a friendly notice with the recorded inputs to use (not a traceback, not an error box). Live (demo
    off), a replay miss is an error."""
    if on:
        render_hints(url_path)
    try:
        run()
    except ReplayMiss as exc:
        if on:
            miss_notice(url_path, key=f"demo.use.{url_path}")
        else:
            st.error(str(exc))
