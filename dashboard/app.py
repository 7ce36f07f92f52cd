"""Streamlit entry: one st.Page per screen, st.navigation, nothing else."""

from __future__ import annotations

import streamlit as st

from dashboard import demo, state
from dashboard.ui_registry import uis
from engine.config import PROJECT_ROOT as ROOT
from engine.config import get_settings
from models.secrets import install_log_redaction
from pages import experiments as experiments_page
from pages import labels as labels_page
from pages import models as models_page
from pages import replay as replay_page
from pages import runs as runs_page

st.set_page_config(page_title="judgelab", page_icon="⚖️", layout="wide")
install_log_redaction()  # idempotent; dashboard/server.py has done it already when the CLI started the app

# Every visible page has a URL of its own that opens it directly (/models, /runs, …). Streamlit serves the
# default page at "/" only (its url_path is ignored), so the default is a hidden page that sends "/" to Models.
MODELS = st.Page(models_page.render, title="Models", icon="🧠", url_path="models")


def home() -> None:
    """The root URL: straight to the Models page."""
    st.switch_page(MODELS)


PAGES = {
    "Workbench": [
        st.Page(home, title="judgelab", icon="⚖️", url_path="home", default=True, visibility="hidden"),
        MODELS,
        st.Page(runs_page.render, title="Runs", icon="🗂️", url_path="runs"),
        st.Page(labels_page.render, title="Labels", icon="🏷️", url_path="labels"),
        st.Page(experiments_page.render, title="Experiments", icon="🧪", url_path="experiments"),
    ],
    "Mechanisms": [
        *(  # each mechanism's page (`dashboard.mechanism_ui`)
            st.Page(ROOT / u.page, title=u.title, icon=u.icon, url_path=u.url_path) for u in uis()
        ),
        st.Page(replay_page.render, title="Replay", icon="⏯️", url_path="replay"),
    ],
}

demo_on = demo.render_switch()
if get_settings().preload and not demo_on:
    st.sidebar.caption(state.preload())

state.store_notice()  # the store opened (dead runs marked interrupted), or why not; its file deleted since

page = st.navigation(PAGES)
demo.run_page(page.run, page.url_path, demo_on)
