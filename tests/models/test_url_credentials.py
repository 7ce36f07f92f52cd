"""Credentials in a URL (issue 35, point 7). httpx turns `http://user:password@host` into `Authorization: Basic …`
before any server asks, and a server that echoes its request put that into runs, calls and events. Now a catalog
`base_url` with a user name or password is refused in one line that does not quote it; every URL a backend sends to
(the spec's, or the SDK's own variable such as OPENAI_BASE_URL) goes without them; and their every form — as written,
decoded, encoded, and the base64 Basic form — is redacted by value, so a hostile server that echoes them back reaches
neither the store (every table), the logs, nor an export."""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import logging
import sqlite3
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from engine.demo import export_runs
from engine.events import run_context
from engine.store import Store
from models.catalog import CatalogError, ModelSpec, Profile, load_catalog
from models.errors import ModelError
from models.registry import build_model
from models.secrets import install_log_redaction, plain_url, redact, refresh_secrets, url_credentials
from tests.fakes.servers import FakeServer, Reply, anthropic_text, gemini_ok, ollama_ok, openai_ok

USER, PASSWORD = "alice", "hunter2 s3cret/pw"  # a space and a slash: written percent-encoded in the URL
ENCODED = "hunter2%20s3cret%2Fpw"
USERINFO = f"{USER}:{ENCODED}"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
FORMS = (PASSWORD, ENCODED, BASIC, BASIC.rstrip("="), base64.b64encode(USERINFO.encode()).decode())
MODEL = {"openai": "gpt-4o", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash", "ollama": "llama3.2:3b"}
REPLY = {"openai": openai_ok, "anthropic": anthropic_text, "gemini": gemini_ok, "ollama": ollama_ok}
SDK = {"openai": "openai", "anthropic": "anthropic", "gemini": "google.genai", "ollama": "ollama"}
URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL"}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-0123456789")
    for name in URL_ENV.values():
        monkeypatch.delenv(name, raising=False)
    refresh_secrets()


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USERINFO}@", 1)


def _catalog(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "models:\n"
        "  - id: local\n"
        "    backend: openai\n"
        "    model: m\n"
        f"    base_url: '{base_url}'\n"
        "    needs_key: false\n"
        "    profile: {name: Local}\n"
    )
    return path


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "base_url",
    [
        f"http://{USERINFO}@127.0.0.1:8080/v1",
        "https://ghp_0123456789abcdefghij@example.com/v1",  # a token as the user name
        f"http://{USER}@127.0.0.1:8080/v1",  # a user name alone: still sent as Basic auth, still refused
    ],
    ids=["password", "token", "user"],  # (the test's id is in PYTEST_CURRENT_TEST: no URL in it)
)
def test_the_catalog_refuses_a_base_url_with_credentials_in_one_line_without_them(
    tmp_path: Path, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _catalog(tmp_path, base_url)
    with pytest.raises(CatalogError) as refused:
        load_catalog(path)
    message = str(refused.value)
    assert message.startswith(f"{path}:5: field 'models[local].base_url': ") and "\n" not in message
    assert "user name or password in the URL is not allowed" in message and "api_key_env" in message
    userinfo = base_url.split("//", 1)[1].split("@", 1)[0]
    assert userinfo not in message and PASSWORD not in message and BASIC not in message
    # Built in code, the refusal does not quote the value either.
    with pytest.raises(ValueError) as direct:
        ModelSpec(id="x", backend="openai", model="m", base_url=base_url, profile=Profile(name="x"))
    assert userinfo not in str(direct.value)
    # Refused, and redacted all the same wherever the file's text could be quoted (a broken file's YAML error).
    monkeypatch.setenv("JUDGELAB_CATALOG", str(path))
    refresh_secrets()
    if userinfo != USER:  # (a short user name alone is a name, left alone)
        assert redact(f"see {userinfo}") == "see <BASE_URL_PASSWORD>"
    # A plain URL, and an @ past the host (a query), are fine.
    assert load_catalog(_catalog(tmp_path, "http://127.0.0.1:8080/v1?owner=a@b")).get("local").base_url


def test_plain_url_and_the_forms_of_the_credentials() -> None:
    assert plain_url(f"http://{USERINFO}@127.0.0.1:8080/v1?q=1") == "http://127.0.0.1:8080/v1?q=1"
    assert plain_url("http://127.0.0.1:8080/v1?owner=a@b") == "http://127.0.0.1:8080/v1?owner=a@b"
    assert plain_url(None) is None and plain_url("http://[::1]:80/") == "http://[::1]:80/"
    forms = set(url_credentials(f"base: http://{USERINFO}@h/ and postgresql://postgres@localhost/db"))
    assert set(FORMS) <= forms
    assert "postgres" not in forms  # a short user name alone is a name, not a token: never redacted


class Echo(FakeServer):
    """A hostile server: it answers with every header it got, plus the credentials it learnt elsewhere."""

    def __init__(self, backend: str) -> None:
        super().__init__(lifetime_s=60)
        self.backend = backend

    def default(self, method: str, path: str, body: Any) -> Reply:
        echoed = json.dumps({"headers": self.local.headers, "also": list(FORMS), "url": _with_credentials(self.url)})
        if self.backend == "ollama" and path == "/api/tags":
            return Reply(200, {"models": [{"name": MODEL["ollama"]}]})
        return REPLY[self.backend](echoed)


def _basic_or_forms(seen: list[Any]) -> list[str]:
    found = []
    for request in seen:
        for name, value in request.headers.items():
            if name == "authorization" and value.lower().startswith("basic"):
                found.append(f"{name}: {value}")
            found += [f"{name}: {value}" for form in FORMS if form in value]
    return found


def _dump_every_table(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert {"runs", "events", "llm_calls"} <= set(tables)
        return "\n".join(repr(row) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"'))
    finally:
        conn.close()


def _assert_nowhere(text: str, where: str) -> None:
    for form in FORMS:
        assert form not in text, f"{form!r} in {where}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini", "ollama"])
@pytest.mark.parametrize("origin", ["spec", "environment"])
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_no_credentials_are_sent_and_an_echo_of_them_is_stored_nowhere(
    backend: str, origin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if origin == "environment" and backend not in URL_ENV:
        pytest.skip("the Ollama client is always given its host (OLLAMA_HOST is the server's own setting)")
    install_log_redaction()
    started = time.monotonic()
    path = tmp_path / "store.db"
    store = Store(f"sqlite:///{path}")
    with Echo(backend) as server:
        url = _with_credentials(server.url + ("/v1" if backend == "openai" else ""))
        fields: dict[str, Any] = {"id": f"t-{backend}", "backend": backend, "model": MODEL[backend], "timeout_s": 60}
        if origin == "environment":  # the SDK's own variable: the credentials are secrets by value at once
            monkeypatch.setenv(URL_ENV[backend], url)
            spec = ModelSpec(**fields, max_retries=0, profile=Profile(name=backend))
        else:  # a URL that got past the catalog (built in code): the backend still sends it without them
            monkeypatch.setenv("JURY_PROXY_URL", url)  # and known as a URL in the environment, so redacted too
            spec = ModelSpec.model_construct(**fields, base_url=url, max_retries=0, profile=Profile(name=backend))
        refresh_secrets()
        importlib.import_module(SDK[backend])  # imported before the memory is traced (slow under tracemalloc)
        tracemalloc.start()
        with caplog.at_level(logging.DEBUG), run_context(store, "jury.case", {"url": url}) as handle:
            model = build_model(spec, call_log=store)
            completion = asyncio.run(model.complete("hi"))
            handle.emit("reply", text=completion.text)
            logging.getLogger("judgelab.test").warning("the server said %s", completion.text)
            try:  # an error whose message echoes it too
                raise ModelError(f"server said {completion.text}", model_id=spec.id, backend=backend)
            except ModelError as exc:
                handle.emit("error", message=str(exc))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 64 * 2**20
        assert server.seen, "the request reached the server"
        assert _basic_or_forms(server.seen) == []  # no Authorization: Basic, no form of the password in any header
        assert all("@" not in r.headers.get("host", "") for r in server.seen)
    assert "<" in completion.text and "PASSWORD>" in completion.text  # the echo, redacted by value
    _assert_nowhere(completion.text, "the completion")
    run_id = store.list_runs()[0].id
    exported = json.dumps(export_runs(store, [run_id]))
    store.dispose()
    _assert_nowhere(_dump_every_table(path), "the store")
    for suffix in ("", "-wal"):
        if Path(f"{path}{suffix}").exists():
            _assert_nowhere(Path(f"{path}{suffix}").read_bytes().decode("latin-1"), f"the file {suffix or 'db'}")
    _assert_nowhere(exported, "the export")
    _assert_nowhere("\n".join(r.getMessage() for r in caplog.records), "the logs")
    assert time.monotonic() - started < 60


def test_the_database_url_password_is_redacted_in_every_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"postgresql://{USERINFO}@db.example:5432/judgelab")
    refresh_secrets()
    for form in FORMS:
        assert redact(f"x {form} y") == "x <DATABASE_PASSWORD> y"


class _Target(FakeServer):
    """Where a redirect points: another server (another port) that answers normally."""

    def __init__(self, backend: str) -> None:
        super().__init__(lifetime_s=60)
        self.backend = backend

    def default(self, method: str, path: str, body: Any) -> Reply:
        if self.backend == "ollama" and path == "/api/tags":
            return Reply(200, {"models": [{"name": MODEL["ollama"]}]})
        return REPLY[self.backend]("hello")


class _Redirector(_Target):
    """The configured server, which sends every request on to another one with a 307."""

    def __init__(self, backend: str, target: str) -> None:
        super().__init__(backend)
        self.target = target

    def default(self, method: str, path: str, body: Any) -> Reply:
        if self.backend == "ollama" and path == "/api/tags":
            return super().default(method, path, body)
        return Reply(307, "", headers={"location": self.target + path})


KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini", "ollama"])
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_redirect_to_another_server_carries_no_api_key(backend: str) -> None:
    """A server that 307-redirects to another address must not get the API key sent there: httpx takes only
    Authorization off a cross-origin redirect, so the Gemini client (x-goog-api-key) follows no redirect."""
    importlib.import_module(SDK[backend])
    started = time.monotonic()
    with _Target(backend) as target, _Redirector(backend, target.url) as redirector:
        url = redirector.url + ("/v1" if backend == "openai" else "")
        spec = ModelSpec(
            id=f"t-{backend}", backend=backend, model=MODEL[backend], base_url=url, max_retries=0, timeout_s=20,
            profile=Profile(name=backend),
        )  # fmt: skip
        try:
            asyncio.run(build_model(spec).complete("hi"))
        except ModelError as exc:
            assert "\n" not in str(exc) and "0123456789" not in str(exc)
        assert redirector.seen, "the request reached the configured server"
        leaked = [f"{k}: {v}" for r in target.seen for k, v in r.headers.items() if k in KEY_HEADERS]
        assert leaked == []
        assert all("0123456789" not in json.dumps(r.headers) for r in target.seen)
    assert time.monotonic() - started < 30


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "base_url",
    [
        "http://alice:hunter2/s3cretpw@127.0.0.1:8080/v1",  # the password's '/' ends the host part
        "http://alice:hunter2#s3cretpw@127.0.0.1:8080/v1",  # its '#' too
        "http://alice:hunter2s3cret?pw@127.0.0.1:8080/v1",  # its '?': what is left of the host has no port
    ],
    ids=["slash", "hash", "question"],
)
def test_a_password_with_a_separator_written_as_is_is_refused_too(tmp_path: Path, base_url: str) -> None:
    path = _catalog(tmp_path, base_url)
    with pytest.raises(CatalogError) as refused:
        load_catalog(path)
    message = str(refused.value)
    assert "user name or password in the URL is not allowed" in message and "\n" not in message
    assert "hunter2" not in message and "s3cret" not in message
    # A port out of range is no password: not refused as one.
    assert load_catalog(_catalog(tmp_path, "http://127.0.0.1:99999/v1")).get("local").base_url


def test_a_password_with_an_at_sign_written_as_is_is_redacted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://alice:p@ssw0rd-l0ng@127.0.0.1:8080/v1"  # read as URLs are: up to the last '@' of the host part
    assert plain_url(url) == "http://127.0.0.1:8080/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    refresh_secrets()
    assert "ssw0rd-l0ng" not in redact("the server said p@ssw0rd-l0ng")
    assert redact("the server said p@ssw0rd-l0ng") == "the server said <OPENAI_BASE_URL_PASSWORD>"
    basic = base64.b64encode(b"alice:p@ssw0rd-l0ng").decode()
    assert redact(f"Basic {basic}") == "Basic <OPENAI_BASE_URL_PASSWORD>"
