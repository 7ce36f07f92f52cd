"""DNS rebinding: the real dashboard (`judgelab dashboard`, bound to 127.0.0.1) answers HTTP and WebSocket
requests addressed to 127.0.0.1 or localhost, and refuses any other Host with 403."""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.hostcheck import allowed_hosts, host_name
from tests.fakes.dashboard import running_dashboard

ROOT = Path(__file__).resolve().parents[2]


def test_allowed_hosts_and_host_names() -> None:
    assert allowed_hosts("127.0.0.1", "") == ["localhost", "127.0.0.1", "::1"]
    assert allowed_hosts("0.0.0.0", "") == ["localhost", "127.0.0.1", "::1"]  # a wildcard names no host
    assert allowed_hosts("192.168.1.5", " lab.internal , ") == [
        "localhost",
        "127.0.0.1",
        "::1",
        "192.168.1.5",
        "lab.internal",
    ]
    assert host_name("LocalHost:8501") == "localhost" and host_name("[::1]:8501") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1" and host_name("evil.example.:80") == "evil.example"
    for bad in (None, "", "a:b:c", "user@localhost:8501", "localhost:port", "localhost/x"):
        assert host_name(bad) is None


@pytest.fixture
def dashboard_port(tmp_path: Path) -> Iterator[int]:
    with running_dashboard(
        tmp_path, {"JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'd.db'}", "JUDGELAB_ALLOWED_HOSTS": ""}
    ) as port:
        yield port


def _status(port: int, request: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        return int(sock.recv(4096).split(b" ", 2)[1])


def _http_get(port: int, host: str, path: str) -> int:
    return _status(port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")


def _websocket(port: int, host: str) -> int:
    """A handshake from a page of the dashboard's own origin (tests/dashboard/test_origins.py tries others)."""
    key = base64.b64encode(os.urandom(16)).decode()
    origin = f"http://{host}" if ":" in host else f"http://{host}:{port}"
    return _status(
        port,
        (
            f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: streamlit\r\n\r\n"
        ),
    )


@pytest.mark.server
def test_dashboard_refuses_foreign_hosts(dashboard_port: int) -> None:
    port = dashboard_port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"localhost.:{port}x"):
        assert _http_get(port, host, "/") == 403
        assert _http_get(port, host, "/_stcore/health") == 403
        assert _http_get(port, host, "/_stcore/stream") == 403
        assert _websocket(port, host) == 403
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert _http_get(port, host, "/") == 200
        assert _http_get(port, host, "/_stcore/health") == 200
        assert _websocket(port, host) == 101
