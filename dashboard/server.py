"""The dashboard's server entry (`judgelab dashboard` runs `streamlit run dashboard/server.py`): Streamlit's
`st.App` around `app.py`, with the Host check in front of every HTTP request and WebSocket, and key
redaction on the process's logs and standard streams."""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from dashboard.hostcheck import HostCheck, allowed_hosts
from models.secrets import install_log_redaction, redact_std_streams

install_log_redaction()
redact_std_streams()

app = st.App("app.py", middleware=[Middleware(HostCheck, hosts=allowed_hosts(config.get_option("server.address")))])
