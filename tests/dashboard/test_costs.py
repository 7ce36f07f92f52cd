"""Dollar costs against a loopback OpenAI-compatible server with a priced catalog entry: a replayed run
spends $0 and keeps what it would have cost (store, CLI, Runs page); the hand-raise benchmark reports
its cost per decision, computed from the recorded calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from dashboard.components import money
from engine.events import run_context
from engine.store import Store
from models.catalog import load_catalog
from models.registry import ModelHub
from tests.fakes.servers import FakeServer, Reply, openai_ok

runner = CliRunner()
PRICE_IN, PRICE_OUT = 0.15, 0.6  # $ per 1 000 tokens
BENCH = Path("data/benchmarks/handraise.jsonl")


class JudgeServer(FakeServer):
    """An OpenAI-compatible server that answers every structured request by filling its schema: each
    participant of a hand-raise judgment gets fixed scores; anything else gets a short text."""

    def default(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET":
            return Reply(body={"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        fmt = (body or {}).get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        if schema.get("properties"):
            answer = {
                pid: {"relevance": 0.9 if pid == "coder" else 0.2, "novelty": 0.5, "confidence": 0.8, "reason": "fits"}
                for pid in schema["properties"]
            }
            return openai_ok(json.dumps(answer), prompt_tokens=400, completion_tokens=90)
        return openai_ok("hello from the fake server", prompt_tokens=20, completion_tokens=6)


@pytest.fixture
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with JudgeServer() as server:
        catalog = tmp_path / "catalog.yaml"
        catalog.write_text(
            "models:\n"
            "  - id: fake-api\n    backend: openai\n    model: fake-model\n"
            f"    base_url: {server.url}/v1\n    needs_key: false\n"
            f"    price_in_per_1k: {PRICE_IN}\n    price_out_per_1k: {PRICE_OUT}\n"
            "    timeout_s: 5\n    max_retries: 0\n    profile: {name: Fake API}\n",
            encoding="utf-8",
        )
        monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog))
        yield server


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def _live_then_replayed(store: Store) -> tuple[str, str, float]:
    hub = ModelHub(load_catalog(), call_log=store)
    with run_context(store, "demo.live") as live:
        spent = asyncio.run(hub.get("fake-api").complete("say hello")).cost
    with run_context(store, "demo.replay") as replay:
        again = asyncio.run(hub.get("fake-api", replay=True).complete("say hello"))
    assert again.text == "hello from the fake server" and again.replayed
    assert again.cost == 0.0 and again.would_cost == spent
    return live.run_id, replay.run_id, spent


def test_a_replayed_call_spends_nothing_and_keeps_what_it_would_have_cost(priced: FakeServer) -> None:
    store = Store()
    live_id, replay_id, spent = _live_then_replayed(store)
    assert spent == pytest.approx(20 / 1000 * PRICE_IN + 6 / 1000 * PRICE_OUT)
    assert len([s for s in priced.seen if s.method == "POST"]) == 1  # the replay reached no server
    (live,) = store.calls(live_id)
    (replayed,) = store.calls(replay_id)
    assert (live.cost, live.would_cost) == (spent, None)
    assert (replayed.cost, replayed.would_cost, replayed.backend) == (0.0, spent, "replay")
    totals = store.run_totals([live_id, replay_id])
    assert totals[live_id]["cost"] == spent and totals[live_id]["would_cost"] is None
    assert totals[replay_id]["cost"] == 0.0 and totals[replay_id]["would_cost"] == spent

    code, out = invoke("runs", "list", "--json")
    rows = {r["id"]: r for r in json.loads(out)}
    assert code == 0 and (rows[replay_id]["cost"], rows[replay_id]["would_cost"]) == (0.0, spent)
    assert rows[live_id]["would_cost"] is None
    code, out = invoke("runs", "list")
    replay_line = next(line for line in out.splitlines() if line.startswith(replay_id))
    live_line = next(line for line in out.splitlines() if line.startswith(live_id))
    assert "cost=$0.00000" in replay_line and f"would have cost ${spent:.5f}" in replay_line
    assert "would have cost" not in live_line
    code, out = invoke("runs", "show", replay_id)
    assert code == 0 and out.count(f"would have cost ${spent:.5f}") == 2  # the run's totals and its call
    code, out = invoke("runs", "show", replay_id, "--json")
    assert json.loads(out)["calls"][0]["would_cost"] == spent


def _runs_page() -> None:
    from pages import runs

    runs.render()


def test_runs_page_shows_would_have_cost_for_a_replayed_run(priced: FakeServer) -> None:
    from dashboard import state

    live_id, replay_id, spent = _live_then_replayed(state.get_store())
    state.clear_reads()
    at = AppTest.from_function(_runs_page, default_timeout=30).run()
    table = at.dataframe[0].value.set_index("run")
    # Costs read as people read them: '$0' spent, four significant digits of what it would have cost.
    assert table.loc[replay_id, "cost"] == "$0" and table.loc[replay_id, "would have cost"] == money(spent)
    assert money(spent) == f"${spent:.4g}" and table.loc[live_id, "would have cost"] == ""
    at.selectbox(key="runs.pick").set_value(replay_id).run()
    assert not at.exception
    cost = next(m for m in at.metric if m.label == "Cost")
    assert cost.value == "$0" and "would have cost" in cost.proto.delta
    # Labels are markdown with every piece of stored text escaped (`md`): compare them unescaped.
    label = next(e.label.replace("\\", "") for e in at.expander if "fake-api" in e.label.replace("\\", ""))
    assert "$0 (replayed: would have cost $" in label


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_handraise_eval_reports_cost_per_decision_from_the_recorded_calls(priced: FakeServer) -> None:
    code, out = invoke(
        "handraise",
        "eval",
        "--benchmark",
        str(BENCH),
        "--judge",
        "judge",
        "--judge-model",
        "fake-api",
        "--limit",
        "3",
        "--repeat",
        "2",
        "--json",
    )
    assert code == 0, out
    report = json.loads(out)
    runs = [run for item in report["items"] for run in item["runs"]]
    per_call = 400 / 1000 * PRICE_IN + 90 / 1000 * PRICE_OUT
    assert [run["calls"] for run in runs] == [1] * 6
    assert all(run["cost"] == pytest.approx(per_call) for run in runs)
    totals = report["totals"]
    recorded = Store().calls(report["run_id"])
    assert len(recorded) == 6 and all(c.backend == "openai" for c in recorded)
    assert totals["cost_total"] == pytest.approx(sum(c.cost for c in recorded)) == pytest.approx(6 * per_call)
    decisions = sum(len(run["predictions"]) for run in runs)
    assert totals["cost_per_decision"] == pytest.approx(totals["cost_total"] / decisions)
    code, out = invoke(
        "handraise", "eval", "--benchmark", str(BENCH), "--judge", "judge", "--judge-model", "fake-api", "--limit", "1"
    )
    assert code == 0 and f"cost: ${per_call:.6f} total" in out


@pytest.mark.model  # the packaged embedder
def test_a_local_judge_costs_nothing_and_says_so() -> None:
    code, out = invoke("handraise", "eval", "--benchmark", str(BENCH), "--judge", "embedding", "--limit", "2", "--json")
    assert code == 0, out
    totals = json.loads(out)["totals"]
    assert totals["cost_total"] == 0.0 and totals["cost_per_decision"] == 0.0
