"""One entry point per run kind: the page (AppTest) and the CLI (the `judgelab` app) run the same engine
function, so the same input gives the same stored config, config hash, result and events from either side.

Every kind is run twice on the same input — once by clicking through its page, once by its command — against
a loopback OpenAI-compatible server that answers deterministically from the request (a scripted fake: the
model layer, recording, the store and the pages are the production code). The catalog names that server
`gemma3-270m`, so the pages' and the commands' defaults reach it. One slow test does the same with the real
bundled model."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.config import DATA_DIR
from engine.store import Store
from tests.dashboard.rendered import rerun_until, settle_runs
from tests.fakes.forms import wkey
from tests.fakes.servers import SchemaServer

runner = CliRunner()
MODEL = "gemma3-270m"

# What the fake says as free text, picked by a hash of the prompt and the seed: director lines that pass and
# lines the rules RETRY (a double negation), so a duo retries — and a retry with a new seed gets a new draft.
LINES = [
    "えー、ほんと？海って気持ちいいわ！",
    "知らなくはないよね。",
    "そうですね。一般的に、朝の海は人が少ないです。",
    "まだ未成年じゃないから。",
    "うーん、そっか、楽しそうかも！",
    "つまり、目安は一日二時間です。無理は禁物ですね。",
]

# A script in which the loop rule (やな keeps coming back to 海) and the early-topic rule fire — only when each
# character keeps its conversation state, which `director batch` once did not.
SCRIPT = [
    ("l1", "yana", "えー、海って気持ちいいわ！"),
    ("l2", "ayu", "そうですね。朝の海は人が少ないです。"),
    ("l3", "yana", "ほんと、海は最高よね！"),
    ("l4", "yana", "うーん、海でまた泳ぎたいかな！"),
    ("l5", None, "旅行について話そうよね！"),
    ("l6", "yana", "そっか、料理は楽しいかも！"),
]


def _text(path: str, body: dict[str, Any], headers: dict[str, str]) -> str:
    if path:  # a string field of a structured answer
        return f"because {path.strip('.')}"
    prompt = json.dumps(body.get("messages"), ensure_ascii=False)
    digest = hashlib.sha256(f"{prompt}|{body.get('seed')}".encode()).digest()
    return LINES[digest[0] % len(LINES)]


@pytest.fixture
def fake_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake model as `gemma3-270m` (and a jury panel of it), a data folder with this test's script,
    recording, labels, benchmark and cases, and the dashboard's cached accessors cleared around the test."""
    from dashboard import state
    from engine.skip.recording import RecordedJudge
    from engine.skip.simulation import simulate
    from engine.skip.workload import WorkloadSpec, generate_workload
    from models.catalog import cached_catalog
    from tests.engine.test_skip_simulation import HashJudge

    server = SchemaServer(_text).start()
    catalog = tmp_path / "catalog.yaml"
    seat = "{model: gemma3-270m, role_name: %s, role_focus: %s}"
    catalog.write_text(
        "models:\n"
        f"  - {{id: {MODEL}, backend: openai, model: fake, base_url: '{server.url}/v1', needs_key: false,"
        " max_retries: 0, timeout_s: 20, profile: {name: Fake Gemma}}\n"
        "panels:\n"
        + "".join(
            f"  {name}:\n"  # the default panel, and the one-model panel experiments run (the same seats here)
            + "".join(
                f"    - {seat % (role, focus)}\n"
                for role, focus in (
                    ("Safety officer", "harm"),
                    ("Security auditor", "leaks"),
                    ("User advocate", "helpfulness"),
                )
            )
            for name in ("local", "local-gemma")
        ),
        encoding="utf-8",
    )
    data = tmp_path / "data"
    for folder in ("scripts", "recordings", "benchmarks", "scenarios/jury"):
        (data / folder).mkdir(parents=True)
    (data / "scripts" / "beach.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "text": t} | ({"character": c} if c else {}), ensure_ascii=False) + "\n"
            for i, c, t in SCRIPT
        ),
        encoding="utf-8",
    )
    shutil.copy(DATA_DIR / "benchmarks" / "confidence.jsonl", data / "benchmarks")
    shutil.copy(DATA_DIR / "benchmarks" / "handraise.jsonl", data / "benchmarks")
    shutil.copy(DATA_DIR / "scenarios" / "jury" / "agent-safety.yaml", data / "scenarios" / "jury")
    small = WorkloadSpec(channels=4, hours=3, bursts_per_hour=1.0, seed=5)
    judge = RecordedJudge({}, HashJudge())
    asyncio.run(simulate(generate_workload(small), judge, with_cache=False, hours=small.hours))
    judge.dump(data / "recordings" / "skipcache-default.jsonl")
    monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog))
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(data))

    def clear() -> None:
        cached_catalog.cache_clear()
        for cached in (state.get_catalog, state._hub_for, state._checked_availability, state._list_runs):
            cached.clear()
        st_cache_clear()

    clear()
    try:
        yield data
    finally:
        server.stop()
        clear()


def st_cache_clear() -> None:
    import streamlit as st

    st.cache_data.clear()


# -- running both sides and comparing what they stored ---------------------------------------------------------

WALL_CLOCK = {
    "call_id",
    "call_ids",
    "callIds",
    "callId",
    "latency_s",
    "latencyS",
    "started_s",
    "ended_s",
    "startedS",
    "endedS",
    "wall_s",
    "wallS",
    "elapsed_s",
    "judge_latency_s",
    "median_latency_s",
    "run_id",
}


def normal(value: Any, ignore: frozenset[str] = frozenset()) -> Any:
    """A stored value without its wall-clock facts and database ids (which differ between two runs)."""
    if isinstance(value, dict):
        return {k: normal(v, ignore) for k, v in value.items() if k not in WALL_CLOCK | ignore}
    if isinstance(value, list):
        return [normal(v, ignore) for v in value]
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two stored values differ, leaf by leaf (for a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"[:300]]


def new_run(kind: str, before: set[str]) -> str:
    fresh = [r.id for r in Store().list_runs(kind=kind) if r.id not in before]
    assert len(fresh) == 1, f"expected one new {kind} run, got {fresh}"
    return fresh[0]


def run_ids(kind: str) -> set[str]:
    return {r.id for r in Store().list_runs(kind=kind)}


def both_sides(
    kind: str, page: Callable[[], None], *cli: str, ignore: frozenset[str] = frozenset()
) -> tuple[Any, Any, dict[str, Any] | None]:
    """Run the page side, then the CLI side, each recording one run of `kind`; assert they stored the same
    config, config hash, result (summary) and events; return both runs and the CLI's JSON output."""
    before = run_ids(kind)
    page()
    page_id = new_run(kind, before)
    result = runner.invoke(app, list(cli))
    assert result.exit_code == 0, result.output
    cli_id = new_run(kind, before | {page_id})
    store = Store()
    a, b = store.get_run(page_id), store.get_run(cli_id)
    assert a is not None and b is not None
    assert a.status == b.status == "finished", (a.error, b.error)
    assert a.config == b.config, json.dumps([a.config, b.config], ensure_ascii=False, default=str)[:3000]
    assert a.config_hash == b.config_hash
    assert normal(a.summary, ignore) == normal(b.summary, ignore), differences(
        normal(a.summary, ignore), normal(b.summary, ignore)
    )
    assert a.summary, "an empty summary proves nothing"

    def events(run_id: str) -> list[str]:  # parallel calls may finish in either order: compare as a multiset
        return sorted(
            json.dumps([e.type, normal(e.payload, ignore)], ensure_ascii=False, sort_keys=True, default=str)
            for e in store.events(run_id)
        )

    assert events(page_id) == events(cli_id)
    try:  # one JSON document, or None (text, or JSON lines)
        output = json.loads(result.stdout) if "--json" in cli else None
    except json.JSONDecodeError:
        output = None
    return a, b, output


def _page(module: str) -> Callable[[], AppTest]:
    def make() -> AppTest:
        return AppTest.from_function(_render, args=(module,), default_timeout=120).run()

    return make


def _render(module: str) -> None:
    import importlib

    importlib.import_module(f"pages.{module}").render()


def clicked(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def until(at: AppTest, done: Any, timeout_s: float = 120.0) -> None:
    """Rerun a page that watches background work (it never waits on it) until `done(at)`."""

    def shown_without_error() -> bool:
        clicked(at)
        return bool(done(at))

    rerun_until(at, shown_without_error, timeout_s, "the page never showed the result")
    clicked(at)


# -- director ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rubric", [False, True], ids=["rules-only", "with-rubric"])
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_director_check(fake_world: Path, rubric: bool) -> None:
    line, scene = "そうですね。一般的に、朝の海は人が少ないです。", "海辺の散歩"  # あゆ's tone: the rules pass it

    def page() -> None:
        at = _page("director")()
        at.selectbox(key=wkey(at, "director.character")).set_value("ayu")
        at.text_area(key=wkey(at, "director.line")).set_value(line)
        at.text_input(key=wkey(at, "director.scene")).set_value(scene)
        at.toggle(key=wkey(at, "director.use_rubric")).set_value(rubric).run()
        if rubric:
            at.selectbox(key=wkey(at, "director.rubric_model")).set_value(MODEL)
        at.button(key="director.check").click().run()
        settle_runs(at)  # the page watches its run
        clicked(at)

    model = ["--model", MODEL] if rubric else ["--rules-only"]
    a, _, out = both_sides(
        "director.check", page, "director", "check", "--character", "ayu", "--scene", scene, *model, "--json", line
    )
    assert a.config["model_id"] == (MODEL if rubric else None) and a.config["text"] == line
    assert out is not None and (out["rubric"] is not None) == rubric
    # The fake scores every criterion 3: an average under 3.5 (§7.1), but a flat scale — the same score on every
    # criterion is no reading of the line — so it never RETRYs on its own (issue 37): WARN, flagged.
    assert out["status"] == a.summary["status"] == ("WARN" if rubric else "PASS")
    if rubric:
        assert "flat_scale" in out["rubric"]["flags"]


@pytest.mark.parametrize("rubric", [False, True], ids=["rules-only", "with-rubric"])
def test_director_batch_keeps_conversation_state_on_both_sides(fake_world: Path, rubric: bool) -> None:
    from engine.director.config import load_character
    from engine.director.rules import evaluate_rules

    def page() -> None:
        at = _page("director")()
        at.selectbox(key=wkey(at, "director.batch_character")).set_value("yana").run()
        at.button(key="director.batch_score" if rubric else "director.batch_record").click().run()
        settle_runs(at)
        clicked(at)

    model = ["--model", MODEL] if rubric else []
    a, b, _ = both_sides(
        "director.batch",
        page,
        "director",
        "batch",
        "--character",
        "yana",
        "--file",
        str(fake_world / "scripts" / "beach.jsonl"),
        *model,
        "--json",
    )
    # the rows are the run's director_line events (one a line; the summary holds the counts and rates)
    rows = {e.payload["id"]: e.payload for e in Store().events(a.id) if e.type == "director_line"}
    assert len(rows) == len(SCRIPT)
    # The loop rule fires on やな's third 海 and the early-topic rule on her jump to 料理 — on both sides …
    assert rows["l4"]["rules"]["topic_loop"] == "WARN" and rows["l6"]["rules"]["early_topic_change"] == "WARN"
    assert rows["l5"]["character"] == "yana"  # a line naming no character takes --character
    # … where judging each line alone (what the CLI used to do) never sees them.
    alone = [evaluate_rules(text, load_character(c or "yana")) for _, c, text in SCRIPT]
    assert all(
        r.status.name == "PASS" for v in alone for r in v.rules if r.rule in ("topic_loop", "early_topic_change")
    )
    assert a.config["model_id"] == (MODEL if rubric else None) and a.config["source"] == "beach.jsonl"
    scored = a.summary["result"]["averages"]
    assert (len(scored) > 0) == rubric  # the rubric scored every line the rules did not RETRY
    assert b.name == a.name == "beach.jsonl"


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_director_duo(fake_world: Path) -> None:
    def page() -> None:
        at = _page("director")()
        at.selectbox(key=wkey(at, "director.duo_model")).set_value(MODEL)
        at.number_input(key=wkey(at, "director.duo_turns")).set_value(3)
        at.number_input(key=wkey(at, "director.duo_retries")).set_value(1).run()
        at.button(key="director.duo_run").click().run()
        settle_runs(at)
        clicked(at)
        assert len(at.chat_message) == 3

    a, _, out = both_sides(
        "director.duo", page, "director", "duo", "--model", MODEL, "--turns", "3", "--max-retries", "1", "--json"
    )
    assert a.config["director"]["max_retries"] == 1 and a.config["turns"] == 3
    assert out is not None and [t["text"] for t in out["turns"]] == [t["text"] for t in a.summary["result"]]


# -- skip cache -------------------------------------------------------------------------------------------------


def _skip_page(judge: str, method: str = "likelihood") -> Callable[[], None]:
    def page() -> None:
        at = _page("skip")()
        at.number_input(key=wkey(at, "skip.channels")).set_value(4)
        at.number_input(key=wkey(at, "skip.hours")).set_value(3.0)
        at.number_input(key=wkey(at, "skip.rate")).set_value(1.0)
        at.number_input(key=wkey(at, "skip.seed")).set_value(5)
        at.selectbox(key=wkey(at, "skip.judge")).set_value(judge)
        at.selectbox(key=wkey(at, "skip.method")).set_value(method).run()
        at.button(key="skip.run").click().run()
        settle_runs(at)
        clicked(at)

    return page


def test_skip_simulate_with_recorded_judgments(fake_world: Path) -> None:
    from dashboard.mechanisms.skip.fields import RECORDED

    recording = fake_world / "recordings" / "skipcache-default.jsonl"
    a, _, out = both_sides(
        "skip.simulate",
        _skip_page(RECORDED),
        "skip",
        "simulate",
        "--generate",
        "--channels",
        "4",
        "--hours",
        "3",
        "--rate",
        "1",
        "--seed",
        "5",
        "--recorded",
        str(recording),
        "--json",
    )
    assert a.config["recording"] == str(recording.resolve()) and a.config["workload"]["channels"] == 4
    assert out is not None and normal(out) == normal(a.summary["result"])
    assert a.summary["result"]["with_cache"]["judge_calls"] < a.summary["result"]["without_cache"]["judge_calls"]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_skip_simulate_with_a_live_model(fake_world: Path) -> None:
    a, _, out = both_sides(
        "skip.simulate",
        _skip_page(MODEL, "structured"),
        "skip",
        "simulate",
        "--generate",
        "--channels",
        "4",
        "--hours",
        "3",
        "--rate",
        "1",
        "--seed",
        "5",
        "--model",
        MODEL,
        "--mode",
        "structured",
        "--json",
    )
    assert (a.config["model_id"], a.config["method"], a.config["recording"]) == (MODEL, "structured", None)
    assert out is not None and out["live_calls"] == a.summary["live_calls"] > 0


# -- confidence -------------------------------------------------------------------------------------------------


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_confidence_evaluate(fake_world: Path) -> None:
    query, answer = "What is the capital of France?", "The capital of France is Paris."

    def page() -> None:
        at = _page("confidence")()
        at.selectbox(key=wkey(at, "confidence.live_model")).set_value(MODEL)
        at.text_input(key=wkey(at, "confidence.live_query")).set_value(query)
        at.text_area(key=wkey(at, "confidence.live_answer")).set_value(answer)
        at.text_area(key=wkey(at, "confidence.live_sources")).set_value("").run()
        at.selectbox(key=wkey(at, "confidence.live_self_eval")).set_value(
            "generate"
        ).run()  # the fake writes; it cannot score
        at.button(key="confidence.live_run").click().run()
        settle_runs(at)
        clicked(at)

    a, _, out = both_sides(
        "confidence.evaluate",
        page,
        "confidence",
        "evaluate",
        "--query",
        query,
        "--answer",
        answer,
        "--model",
        MODEL,
        "--judge",
        "generate",
        "--json",
    )
    assert a.config["answer"] == answer and a.config["sources"] == []
    assert out is not None and out["score"] == a.summary["score"] and out["level"] == a.summary["level"]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_confidence_calibrate(fake_world: Path) -> None:
    labels = fake_world / "benchmarks" / "confidence.jsonl"

    def page() -> None:
        at = _page("confidence")()
        at.button(key="confidence.calib_record").click().run()
        settle_runs(at)
        clicked(at)

    a, _, out = both_sides("confidence.calibrate", page, "confidence", "calibrate", "--labels", str(labels), "--json")
    assert a.config["labels"] == "confidence.jsonl" and len(a.config["items"]) == a.summary["n"] >= 30
    assert out is not None and normal(out) == normal(a.summary["result"])


# -- hand raise -------------------------------------------------------------------------------------------------


def test_handraise_conversation_turn(fake_world: Path) -> None:
    message = "My Python script crashes with a KeyError in the config dict"

    def page() -> None:
        at = _page("handraise")()
        at.selectbox(key="conv.method").set_value("judge")
        at.selectbox(key="conv.judge_model").set_value(MODEL)
        at.slider(key="conv.threshold").set_value(0.3).run()
        at.chat_input(key="conv.input").set_value(message).run()
        until(at, lambda at: [m for m in at.markdown if "wants to speak" in m.value])  # the hands went up
        at.button(key="conv.all.t1").click().run()
        # the user's message and three answers, in the chat log once the turn closed
        until(at, lambda at: len(at.chat_message) >= 4 and not at.get("chat_input")[0].disabled)
        at.button(key="conv.new").click().run()  # closes the conversation's run
        clicked(at)

    a, _, out = both_sides(
        "handraise.conversation",
        page,
        "handraise",
        "chat",
        "--message",
        message,
        "--judge",
        "judge",
        "--judge-model",
        MODEL,
        "--threshold",
        "0.3",
        "--decide",
        "approve_all",
        "--json",
    )
    (turn,) = a.summary["result"]
    assert turn["text"] == message and all(d["approved"] and d["by"] == "batch" for d in turn["decisions"].values())
    assert len(turn["answers"]) == 3 and all(turn["answers"].values())
    assert out is not None and normal(out["turns"]) == normal(a.summary["result"])


def test_handraise_benchmark(fake_world: Path) -> None:
    def page() -> None:
        at = _page("handraise")()
        at.selectbox(key="conv.method").set_value("judge")
        at.selectbox(key="conv.judge_model").set_value(MODEL)
        at.multiselect(key="conv.b_contexts").set_value(["3"])
        at.number_input(key="conv.b_limit").set_value(2).run()
        at.button(key="conv.b_run").click().run()
        clicked(at)

    a, _, _ = both_sides(
        "handraise.eval",
        page,
        "handraise",
        "eval",
        "--benchmark",
        str(fake_world / "benchmarks" / "handraise.jsonl"),
        "--context",
        "3",
        "--limit",
        "2",
        "--judge",
        "judge",
        "--judge-model",
        MODEL,
        "--models",
        ",".join([MODEL] * 3),
        "--json",
    )
    assert a.config["items"] == 2 and a.config["models"] == [MODEL] * 3


# -- jury -------------------------------------------------------------------------------------------------------


def test_jury_run(fake_world: Path) -> None:
    cases = fake_world / "scenarios" / "jury" / "agent-safety.yaml"

    def page() -> None:
        at = _page("jury")()
        at.selectbox(key=wkey(at, "jury.method")).set_value("majority_vote")
        at.number_input(key=wkey(at, "jury.rounds")).set_value(1).run()
        at.button(key="jury.run").click().run()
        assert not at.exception
        # The page watches the run; the fake's jurors all say safe_pass and the case's gold is unsafe_fail: once
        # the run ends, the one error is the verdict box.
        deadline = time.monotonic() + 120
        while not at.error and time.monotonic() < deadline:
            time.sleep(0.3)
            at.run()
        assert not at.exception
        assert [e.icon + " " + e.value.split(" — ")[0] for e in at.error] == ["❌ **Wrong**"]

    a, _, _ = both_sides(
        "jury.run",
        page,
        "jury",
        "run",
        "--case",
        str(cases),
        "--id",
        "pw-leak",
        "--panel",
        "local",
        "--method",
        "majority_vote",
        "--rounds",
        "1",
        "--json",
    )
    assert a.config["case"]["id"] == "pw-leak" and a.summary["result"]["total_rounds"] == 1


# -- with the real bundled model --------------------------------------------------------------------------------


@pytest.mark.model
def test_director_check_with_the_bundled_model() -> None:
    """The bundled model gets the very same request from page and CLI (one request, byte for byte) and decides
    the same: scores, status, rules, stored config and events are compared. Its free-text rubric `comment` (and
    the `reasons` that quote it) are left out: in one process a greedy free-text field of the bundled model
    was measured to come out differently between calls of the same request (`director check` three times:
    the first answer differed from the next two, with the KV memory cleared before each), a field no
    decision reads. Reported in the session note as an open finding."""
    line, scene = "えー、ほんと？楽しそうだわ！", "海辺の散歩"

    def page() -> None:
        at = AppTest.from_function(_render, args=("director",), default_timeout=300).run()
        at.text_area(key=wkey(at, "director.line")).set_value(line)
        at.text_input(key=wkey(at, "director.scene")).set_value(scene)
        at.toggle(key=wkey(at, "director.use_rubric")).set_value(True).run()
        at.selectbox(key=wkey(at, "director.rubric_model")).set_value(MODEL)
        at.button(key="director.check").click().run()
        settle_runs(at)  # the page watches its run
        clicked(at)

    a, b, out = both_sides(
        "director.check",
        page,
        *("director", "check", "--character", "yana", "--scene", scene, "--json", line),
        # `flags` too: the rubric's flags record what that free-text comment held (`json_control_chars` when it
        # came out with a control character, seen in one CI run and not the next): the same open finding.
        ignore=frozenset({"comment", "reasons", "flags"}),
    )
    calls = [Store().calls(run.id) for run in (a, b)]
    # the rubric by signals (the default for the bundled Gemma): five scoring calls and the embeddings, alike
    assert [len(c) for c in calls] == [20, 20]
    assert [c.request_json for c in calls[0]] == [c.request_json for c in calls[1]]
    assert sum(c.backend == "llamacpp" for c in calls[0]) == 5
    assert out is not None and out["rubric"] is not None and a.summary["status"] == out["status"]
