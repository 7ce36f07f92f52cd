"""Keys under custom variable names never leak. A loopback OpenAI-compatible server echoes the key it is
sent (Authorization header) in every reply — structured fields, free text, streamed pieces — and in its
error messages. Every CLI command that can reach it runs, then the pages (AppTest); the key must appear
nowhere: not in the SQLite file, its WAL or shared memory, stdout, stderr, exports, page output, nor in
any prompt sent to a model (other jurors' prompts carry the statements of the first)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests import forkcli
from tests.fakes.forms import wkey
from tests.fakes.servers import Reply, SchemaServer, openai_error

pytestmark = pytest.mark.server  # judgelab processes, a loopback model server

KEY = "sk-custom-Q1w2E3r4T5y6U7i8O9p0"  # MY_CUSTOM_KEY, from the environment
SECOND = "second-Zx9Cv8Bn7Mm6Ll5Kk4"  # SECOND_CUSTOM_KEY, only in secrets.toml
ROOT = Path(__file__).resolve().parents[2]


def _key_of(headers: dict[str, str]) -> str:
    return headers.get("authorization", "").removeprefix("Bearer ").strip()


def _echo(path: str, body: dict[str, Any], headers: dict[str, str]) -> str:
    return f"ECHO {_key_of(headers)} ### Answer: fine {path}"


def _refuse(body: dict[str, Any], headers: dict[str, str]) -> Reply | None:
    system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
    if "ERRSEAT" in str(system) or body.get("model") == "erring":
        return openai_error(
            401,
            f"Incorrect API key provided: {_key_of(headers)}. Find yours in the dashboard.",
            "invalid_request_error",
        )
    return None


@pytest.fixture
def echo_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from dashboard import state
    from models.catalog import cached_catalog

    server = SchemaServer(_echo, _refuse).start()
    base = f"{server.url}/v1"
    common = "backend: openai, max_retries: 0, timeout_s: 20"
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "models:\n"
        f"  - {{id: gemma3-270m, {common}, model: echo, base_url: '{base}', api_key_env: MY_CUSTOM_KEY,"
        " profile: {name: Echo}, default_for: ['*']}\n"
        f"  - {{id: echo2, {common}, model: echo2, base_url: '{base}', api_key_env: SECOND_CUSTOM_KEY,"
        " profile: {name: Echo two}}\n"
        f"  - {{id: erring, {common}, model: erring, base_url: '{base}', api_key_env: MY_CUSTOM_KEY,"
        " profile: {name: Erring}}\n"
        "panels:\n"
        "  local:\n"
        "    - {model: gemma3-270m, role_name: Alpha}\n"
        "    - {model: echo2, role_name: Beta}\n"
        "    - {model: gemma3-270m, role_name: ERRSEAT}\n",
        encoding="utf-8",
    )
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'SECOND_CUSTOM_KEY = "{SECOND}"\n', encoding="utf-8")
    db = tmp_path / "keys.db"
    monkeypatch.setenv("MY_CUSTOM_KEY", KEY)
    monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog))
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets))
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{db}")

    def clear() -> None:
        cached_catalog.cache_clear()
        for cached in (state.get_catalog, state._hub_for, state._checked_availability, state._list_runs):
            cached.clear()

    clear()
    try:
        yield {"server": server, "db": db, "dir": tmp_path}
    finally:
        server.stop()
        clear()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`judgelab ARGS` as its own process (forked from a warm one: tests/forkcli.py), with this environment."""
    return forkcli.run(args, dict(os.environ), cwd=ROOT, timeout=300)


def _page_text(at: AppTest) -> str:
    """Everything the page sent to the browser: every element's and block's protobuf, as text."""
    return "\n".join(str(node.proto) for node in at._tree if getattr(node, "proto", None) is not None)


def _render(name: str) -> None:
    import importlib

    importlib.import_module(f"pages.{name}").render()


def _page(name: str, timeout: float = 120) -> AppTest:
    return AppTest.from_function(_render, args=(name,), default_timeout=timeout)


def test_custom_named_keys_never_leak(echo_world: dict[str, Any]) -> None:
    tmp: Path = echo_world["dir"]
    case = tmp / "case.yaml"
    case.write_text("- {id: c1, title: Leak check, content: 'Agent: hello', gold: safe_pass}\n", encoding="utf-8")
    cases = tmp / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "content": "Agent: hi", "gold": "safe_pass"}) + "\n", encoding="utf-8")
    scenario = tmp / "conv.yaml"
    scenario.write_text("context:\n  - {speaker: user, text: 'My Python test fails'}\n", encoding="utf-8")
    record = tmp / "judgments.jsonl"
    outputs: list[str] = []
    commands = [
        ("models", "list"),
        ("models", "list", "--json"),
        ("models", "check", "gemma3-270m", "--json"),
        ("models", "check", "echo2"),
        ("models", "check", "erring"),
        (
            "jury",
            "run",
            "--case",
            str(case),
            "--panel",
            "local",
            "--rounds",
            "1",
            "--method",
            "final_judge",
            "--final-judge-model",
            "echo2",
        ),
        ("jury", "run", "--case", str(case), "--panel", "local", "--rounds", "1", "--json"),
        ("jury", "eval", "--cases", str(cases), "--panel", "local", "--rounds", "0"),
        ("handraise", "judge", "--scenario", str(scenario), "--judge", "judge", "--judge-model", "gemma3-270m"),
        ("handraise", "judge", "--scenario", str(scenario), "--judge", "self", "--json"),
        ("director", "check", "えー、ほんと？海って気持ちいいわ！", "--character", "yana", "--model", "echo2"),
        ("confidence", "evaluate", "--query", "What is the capital of France?", "--model", "gemma3-270m"),
        # The structured judge: its raw reply (which echoes the key) is what the export must not leak.
        (
            "skip",
            "simulate",
            "--generate",
            "--channels",
            "2",
            "--hours",
            "1",
            "--rate",
            "3",
            "--model",
            "gemma3-270m",
            "--mode",
            "structured",
            "--record",
            str(record),
            "--json",
        ),
    ]
    codes = {}
    for args in commands:
        done = _cli(*args)
        codes[" ".join(args[:3])] = done.returncode
        outputs += [done.stdout, done.stderr]
    assert codes["models check gemma3-270m"] == 0 and codes["models check erring"] == 3, codes
    assert codes["jury run --case"] == 0 and codes["skip simulate --generate"] == 0, (codes, outputs[-1])
    runs = json.loads(_cli("runs", "list", "--json", "--limit", "100").stdout)
    assert len(runs) >= 9
    for run in runs:
        for extra in ((), ("--json",)):
            done = _cli("runs", "show", run["id"], *extra)
            outputs += [done.stdout, done.stderr]
        if run["kind"] == "jury.run":
            done = _cli("jury", "replay", run["id"])
            outputs += [done.stdout, done.stderr]

    # The pages, headless, against the same store and server.
    pages = []
    at = _page("models").run()
    at.text_area(key=wkey(at, "models.prompt")).set_value("Say something")
    at.button(key="models.send").click().run()  # streamed in pieces that split the echoed key
    _watch_to_the_end(at, "models.prompt")  # the page watches the answer stream in; Send is off meanwhile
    at.radio(key=wkey(at, "models.output")).set_value("ProbeJudgment")
    at.button(key="models.send").click().run()
    _watch_to_the_end(at, "models.prompt")
    pages.append(at)
    at = _page("jury").run()
    at.selectbox(key=wkey(at, "jury.preset")).set_value("local")
    at.number_input(key=wkey(at, "jury.rounds")).set_value(1)
    at.button(key="jury.run").click().run()
    _watch_to_the_end(at, "jury.run")  # the page watches its run: rerun until it has ended
    pages.append(at)
    at = _page("handraise").run()
    at.slider(key="conv.threshold").set_value(0.0).run()
    at.chat_input(key="conv.input").set_value("@all what do you think?").run()
    approve_all = [b.key for b in at.button if b.key and b.key.startswith("conv.all.")]
    if approve_all:
        at.button(key=approve_all[0]).click().run()
    pages.append(at)
    at = _page("director").run()
    at.toggle(key=wkey(at, "director.use_rubric")).set_value(True).run()
    at.button(key="director.check").click().run()
    _watch_to_the_end(at, "director.check")
    pages.append(at)
    at = _page("confidence").run()
    at.button(key="confidence.live_run").click().run()
    _watch_to_the_end(at, "confidence.evaluate")
    pages.append(at)
    pages.append(_page("replay").run())
    from dashboard import state

    state.clear_reads()
    for run in state.get_store().list_runs(limit=200):
        at = _page("runs")
        at.query_params["run"] = run.id
        pages.append(at.run())
    for at in pages:
        assert not at.exception, at.exception
    page_text = "\n".join(_page_text(at) for at in pages)
    # Every run's exports, as a page's Export box or `judgelab runs export` builds them.
    from dashboard.components import export_file

    exports: list[str] = []
    for run in state.get_store().list_runs(limit=200):
        exports += [export_file(state.get_store(), run.id, fmt).decode("utf-8") for fmt in ("json", "html")]
        with zipfile.ZipFile(io.BytesIO(export_file(state.get_store(), run.id, "csv"))) as archive:
            exports += [archive.read(name).decode("utf-8-sig") for name in archive.namelist()]
    run_exports = "\n".join(exports)

    stored = b"".join(p.read_bytes() for p in echo_world["db"].parent.glob(echo_world["db"].name + "*"))
    exported = record.read_text(encoding="utf-8")
    prompts = json.dumps([s.body for s in echo_world["server"].seen], ensure_ascii=False)
    hits = {
        (name, where): text.count(secret)
        for name, secret in (("MY_CUSTOM_KEY", KEY), ("SECOND_CUSTOM_KEY", SECOND))
        for where, text in (
            ("db+wal+shm", stored.decode("utf-8", "replace")),
            ("stdout+stderr", "\n".join(outputs)),
            ("export", exported),
            ("pages", page_text),
            ("run exports", run_exports),
            ("prompts", prompts),
        )  # what other jurors, judges and answerers were asked
    }
    assert not any(hits.values()), hits
    # Not vacuous: the server did echo both keys, and their redacted names reached every channel.
    assert sum(_key_of(s.headers) == KEY for s in echo_world["server"].seen) > 20
    assert any(_key_of(s.headers) == SECOND for s in echo_world["server"].seen)
    for marker in (b"<MY_CUSTOM_KEY>", b"<SECOND_CUSTOM_KEY>"):
        assert marker in stored
    assert "<MY_CUSTOM_KEY>" in exported and "<MY_CUSTOM_KEY>" in page_text and "<MY_CUSTOM_KEY>" in run_exports
    assert any("Incorrect API key provided: <MY_CUSTOM_KEY>" in o for o in outputs)
    # Statements that echoed a key and the failed seat's error went into other jurors' prompts — redacted.
    assert "<MY_CUSTOM_KEY>" in prompts and "<SECOND_CUSTOM_KEY>" in prompts
    assert "Incorrect API key provided: <MY_CUSTOM_KEY>" in prompts


def _watch_to_the_end(at: Any, kind: str, timeout: float = 300.0) -> None:
    import time

    from dashboard import state

    deadline = time.monotonic() + timeout
    registry = state.get_registry()  # the page shows a run's end once its entry point has returned too
    while any(r.status == "running" or registry.is_live(r.id) for r in state.get_store().list_runs(kind=kind)):
        assert time.monotonic() < deadline, f"the {kind} run did not end"
        time.sleep(0.5)
        at.run()
    at.run()
