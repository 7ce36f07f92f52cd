"""DNS rebinding and cross-origin guard: the dashboard answers only requests addressed to its own address or
localhost, and its WebSocket only pages of its own origin.

A page on evil.example can make its name resolve to 127.0.0.1 and then talk to the dashboard as if it
were same-origin; its requests still carry `Host: evil.example`. `HostCheck` (an ASGI middleware, wired
in by `dashboard/server.py`) refuses them with 403, for HTTP and WebSocket alike; Streamlit's own
`server.allowedHosts` repeats the check on the WebSocket.

Another web app on this machine (http://localhost:3000) is addressed to a good Host, but its page's WebSocket
carries `Origin: http://localhost:3000`. Streamlit accepts any localhost origin, and for any other origin it
looks up the machine's external IP, a blocking HTTP request on the server's event loop, again at every
refusal. So `HostCheck` decides the origin itself, from a fixed set and without any lookup: the exact
scheme://host:port the dashboard serves on (each loopback name and the bound address), plus the names of
`JUDGELAB_ALLOWED_HOSTS` on that port or on their scheme's default port (a reverse proxy). Anything else is
refused with 403 before Streamlit sees it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::"})
EXTRA_HOSTS_ENV = "JUDGELAB_ALLOWED_HOSTS"
DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # (scheme, host name, port): an origin with its default port made explicit


def _names(names: Iterable[str]) -> list[str]:
    hosts: list[str] = []
    for name in names:
        name = name.strip().strip("[]").lower().rstrip(".")
        if name and name not in WILDCARD_ADDRESSES and name not in hosts:
            hosts.append(name)
    return hosts


def configured_hosts(extra: str | None = None) -> list[str]:
    """The names of `JUDGELAB_ALLOWED_HOSTS` (comma-separated), or of `extra` when given."""
    return _names((os.environ.get(EXTRA_HOSTS_ENV, "") if extra is None else extra).split(","))


def allowed_hosts(address: str | None, extra: str | None = None) -> list[str]:
    """Loopback names, the bound address (unless it is a wildcard) and `JUDGELAB_ALLOWED_HOSTS` (comma-separated
    names, for a reverse proxy or a LAN name)."""
    return _names([*LOOPBACK_NAMES, address or "", *configured_hosts(extra)])


def allowed_origins(
    address: str | None, port: int, *, scheme: str = "http", extra: str | None = None
) -> frozenset[Origin]:
    """The origins whose pages may open the dashboard's WebSocket: its own (`scheme`://name:`port` for each loopback
    name and the bound address) and, for each configured name, that name on `port` or on the default port of
    http and https (the dashboard behind a reverse proxy)."""
    own = {(scheme, name, port) for name in _names([*LOOPBACK_NAMES, address or ""])}
    configured = {
        origin
        for name in configured_hosts(extra)
        for origin in (
            (scheme, name, port),
            ("http", name, DEFAULT_PORTS["http"]),
            ("https", name, DEFAULT_PORTS["https"]),
        )
    }
    return frozenset(own | configured)


def origin_of(header: str | None) -> Origin | None:
    """An Origin header as (scheme, host, port), or None when it is malformed or opaque (`null`, a path, a
    user name, a scheme other than http and https)."""
    if not header:
        return None
    try:
        parts = urlsplit(header.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or parts.hostname is None or parts.username or parts.password:
        return None
    if parts.path or parts.query or parts.fragment:
        return None
    return scheme, parts.hostname.lower().rstrip("."), DEFAULT_PORTS[scheme] if port is None else port


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
    """ASGI middleware: 403 for any HTTP request or WebSocket whose Host is not allowed, and for a WebSocket whose
    Origin is not one of `origins` (a WebSocket without an Origin comes from a program, not a page: let through)."""

    def __init__(self, app: Any, hosts: Iterable[str], origins: Iterable[Origin]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.origins = frozenset(origins)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = scope.get("headers", [])
            header = next((v.decode("latin-1") for k, v in headers if k == b"host"), None)
            if host_name(header) not in self.hosts:
                await self._refuse(scope, send)
                return
            if scope["type"] == "websocket":
                origin = next((v.decode("latin-1") for k, v in headers if k == b"origin"), None)
                if origin is not None and origin_of(origin) not in self.origins:
                    await self._refuse(scope, send)
                    return
                if origin is not None and header is not None and urlsplit(origin.strip()).netloc != header.strip():
                    # An allowed origin on another host:port than the request's (a proxy that rewrote the Host):
                    # decided here, so Streamlit's own check sees its same-origin case and never looks anything up.
                    scheme = urlsplit(origin.strip()).scheme
                    same = f"{scheme}://{header.strip()}".encode("latin-1")
                    headers = [(k, same if k == b"origin" else v) for k, v in headers]
                    scope = {**scope, "headers": headers}
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
