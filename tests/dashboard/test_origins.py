"""The dashboard's WebSocket accepts pages of its own origin (the exact scheme://host:port it serves on) and of the
configured hosts, and refuses every other origin with 403 — another web app on localhost included — without a
network lookup: the real `judgelab dashboard`, real WebSocket handshakes, and a proxy that never answers standing in
for the internet, so any lookup would both show in its count and stall the server."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dashboard.hostcheck import allowed_origins, origin_of
from tests.fakes.dashboard import running_dashboard


def test_origins_are_parsed_strictly() -> None:
    assert origin_of("http://127.0.0.1:8501") == ("http", "127.0.0.1", 8501)
    assert origin_of("HTTPS://Lab.Internal.") == ("https", "lab.internal", 443)
    assert origin_of("http://[::1]:8501") == ("http", "::1", 8501)
    for bad in (
        None,
        "",
        "null",
        "file://",
        "http://a:b",
        "http://u@localhost:8501",
        "http://localhost:8501/x",
        "ws://x",
    ):
        assert origin_of(bad) is None, bad


def test_the_own_origin_and_the_configured_hosts() -> None:
    own = allowed_origins("127.0.0.1", 8501, extra="")
    assert own == {("http", "localhost", 8501), ("http", "127.0.0.1", 8501), ("http", "::1", 8501)}
    assert ("http", "localhost", 3000) not in own and ("https", "127.0.0.1", 8501) not in own
    assert allowed_origins("0.0.0.0", 8501, extra="") == own  # a wildcard names no origin
    lab = allowed_origins("127.0.0.1", 8501, extra=" lab.internal ")
    assert lab - own == {("http", "lab.internal", 8501), ("http", "lab.internal", 80), ("https", "lab.internal", 443)}


@dataclass
class Blackhole:
    """A TCP server that accepts connections and never answers: the dashboard's HTTP(S) proxy, so a lookup of the
    external IP waits out its timeout here and is counted."""

    sock: socket.socket
    accepted: int = 0

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def serve(self) -> None:
        held = []
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                break
            self.accepted += 1
            held.append(conn)
        for conn in held:
            conn.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    hole = Blackhole(sock)
    thread = threading.Thread(target=hole.serve, daemon=True)
    thread.start()
    yield hole
    sock.close()


@pytest.fixture
def dashboard_port(tmp_path: Path, blackhole: Blackhole) -> Iterator[int]:
    proxy = f"http://127.0.0.1:{blackhole.port}"
    env = {
        "JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'd.db'}",
        "JUDGELAB_ALLOWED_HOSTS": "lab.internal",
        **{name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
        "NO_PROXY": "",
        "no_proxy": "",
    }
    with running_dashboard(tmp_path, env) as port:
        yield port


def _status(port: int, request: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request.encode())
        return int(sock.recv(4096).split(b" ", 2)[1])


def _handshake(port: int, host: str, origin: str | None) -> int:
    key = base64.b64encode(os.urandom(16)).decode()
    origin_line = f"Origin: {origin}\r\n" if origin is not None else ""
    return _status(
        port,
        (
            f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\n{origin_line}Upgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: streamlit\r\n\r\n"
        ),
    )


def _health_s(port: int) -> float:
    start = time.perf_counter()
    assert _status(port, f"GET /_stcore/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n") == 200
    return time.perf_counter() - start


@pytest.mark.server
def test_only_the_own_origin_and_configured_hosts_open_the_websocket(dashboard_port: int, blackhole: Blackhole) -> None:
    port = dashboard_port
    own = f"127.0.0.1:{port}"
    _health_s(port)  # started: whatever the server looked up at start is behind us
    before = blackhole.accepted
    foreign = [
        "http://localhost:3000",  # another web app on this machine
        f"http://127.0.0.1:{port + 1}",
        f"https://127.0.0.1:{port}",
        "http://evil.example",
        f"http://localhost:{port}.evil.example",
        "http://lab.internal:3000",
        "null",
        "file://",
    ]
    for origin in foreign:
        assert _handshake(port, own, origin) == 403, origin
    accepted: list[tuple[str, str | None]] = [
        (own, f"http://{own}"),
        (f"localhost:{port}", f"http://localhost:{port}"),
        (f"lab.internal:{port}", f"http://lab.internal:{port}"),
        ("lab.internal", "https://lab.internal"),  # behind a reverse proxy that keeps the Host
        (own, "https://lab.internal"),  # ... or one that rewrites it
        (own, None),  # a program, not a page: browsers always send an Origin
    ]
    for host, allowed in accepted:
        assert _handshake(port, host, allowed) == 101, (host, allowed)
    assert blackhole.accepted == before  # no lookup, for a refusal or an acceptance


@pytest.mark.server
def test_refusals_never_stall_the_server(dashboard_port: int, blackhole: Blackhole) -> None:
    """20 handshakes from other origins at once, and a health check meanwhile: answered within a generous bound. When
    each refusal looked up the external IP on the event loop, it took 5 s; behind this proxy, 2 s a refusal."""
    port = dashboard_port
    _health_s(port)
    before = blackhole.accepted
    results: list[int] = []
    origins = [f"http://localhost:{3000 + i}" if i % 2 else f"http://app{i}.example" for i in range(20)]
    threads = [
        threading.Thread(target=lambda o=origin: results.append(_handshake(port, f"localhost:{port}", o)))
        for origin in origins
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(0.2)  # the refusals are in flight (or done): the health check must not wait behind them
    health = _health_s(port)
    for thread in threads:
        thread.join(timeout=60)
    elapsed = time.perf_counter() - start
    assert results == [403] * 20
    assert blackhole.accepted == before
    assert elapsed < 5 and health < 1.0, (elapsed, health)
