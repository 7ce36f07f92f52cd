"""DNS rebinding guard: the dashboard answers only requests addressed to its own address or localhost.

A page on evil.example can make its name resolve to 127.0.0.1 and then talk to the dashboard as if it
were same-origin; its requests still carry `Host: evil.example`. `HostCheck` (an ASGI middleware, wired
in by `dashboard/server.py`) refuses them with 403, for HTTP and WebSocket alike; Streamlit's own
`server.allowedHosts` repeats the check on the WebSocket.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::"})
EXTRA_HOSTS_ENV = "JUDGELAB_ALLOWED_HOSTS"


def allowed_hosts(address: str | None, extra: str | None = None) -> list[str]:
    """Loopback names, the bound address (unless it is a wildcard) and `JUDGELAB_ALLOWED_HOSTS` (comma-separated
    names, for a reverse proxy or a LAN name)."""
    extra = os.environ.get(EXTRA_HOSTS_ENV, "") if extra is None else extra
    names = [*LOOPBACK_NAMES, (address or "").strip().strip("[]"), *extra.split(",")]
    hosts: list[str] = []
    for name in names:
        name = name.strip().lower().rstrip(".")
        if name and name not in WILDCARD_ADDRESSES and name not in hosts:
            hosts.append(name)
    return hosts


def host_name(header: str | None) -> str | None:
    """The name of a Host header without its port (IPv6 brackets removed), or None when it is malformed."""
    if not header:
        return None
    try:
        parts = urlsplit(f"//{header.strip()}")
        _ = parts.port  # a port that is not a number makes the header malformed
    except ValueError:
        return None
    if parts.hostname is None or parts.username or parts.password or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname.lower().rstrip(".")


class HostCheck:
    """ASGI middleware: 403 for any HTTP request or WebSocket whose Host is not allowed."""

    def __init__(self, app: Any, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
            if host_name(header) not in self.hosts:
                await self._refuse(scope, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: dict[str, Any], send: Any) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the server answers 403
            return
        body = b"Host not allowed: the dashboard answers only its own address and localhost\n"
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
