"""The dashboard's server entry (`judgelab dashboard` runs `streamlit run dashboard/server.py`): Streamlit's
`st.App` around `app.py`, with the Host check in front of every HTTP request and WebSocket (and the Origin check
on the WebSocket: the dashboard's own origin and the configured hosts), and key redaction on the process's logs
and standard streams."""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from dashboard.hostcheck import HostCheck, allowed_hosts, allowed_origins
from models.secrets import install_log_redaction, redact_std_streams

install_log_redaction()
redact_std_streams()

address = config.get_option("server.address")
scheme = "https" if config.get_option("server.sslCertFile") else "http"
origins = allowed_origins(address, int(config.get_option("server.port")), scheme=scheme)
app = st.App("app.py", middleware=[Middleware(HostCheck, hosts=allowed_hosts(address), origins=origins)])
