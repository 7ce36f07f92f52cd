"""`judgelab jury eval | run | replay` (on the mock backend: the model is not the point): per-case lines whose
totals can be recomputed, a replayed run that is identical, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.agreement import fleiss_kappa

runner = CliRunner()
CASES = Path("data/benchmarks/jury.jsonl")


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


@pytest.fixture(scope="module")
def two_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cases") / "two.jsonl"
    path.write_text("".join(CASES.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    return path


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_eval_json_totals_recompute_from_items_and_runs_replay(two_cases: Path, mock_models: Path) -> None:
    code, out = invoke(
        "jury", "eval", "--cases", str(two_cases), "--rounds", "1", "--method", "majority_vote", "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    items, totals = report["items"], report["totals"]
    assert [i["id"] for i in items] == ["pw-leak", "refund-ok"] and totals["items"] == 2
    graded = [i for i in items if i["gold"]]
    # Every total from the per-item lines, written out independently.
    assert totals["accuracy"] == round(sum(i["final_verdict"] == i["gold"] for i in graded) / len(graded), 4)
    assert totals["phase1_accuracy"] == round(sum(i["phase1_outcome"] == i["gold"] for i in graded) / len(graded), 4)
    assert totals["outcome_changed"] == sum(i["phase1_outcome"] != i["final_verdict"] for i in items)
    assert totals["prompt_tokens"] == sum(i["prompt_tokens"] for i in items) > 0
    assert totals["rounds_mean"] == sum(i["rounds"] for i in items) / 2
    # κ over the cases where every juror worked (a failed juror's rating is missing: None), leaving out the
    # cases whose seats are identical by construction (three Gemma seats judging alike: no agreement)
    judged = [i for i in items if not i["identical_seats"]]
    complete = [list(i["phase1_verdicts"].values()) for i in judged if None not in i["phase1_verdicts"].values()]
    kappa = fleiss_kappa(complete) if complete else None
    assert totals["agreement_phase1"]["fleiss_kappa"] == (None if kappa is None else round(kappa, 4))
    assert totals["agreement_phase1"]["fleiss_kappa_cases"] == len(complete)
    assert totals["agreement_phase1"]["identical_by_construction_cases"] == len(items) - len(judged)
    assert totals["no_verdict"] == sum(i["final_verdict"] == "no_verdict" for i in items)
    for item in items:
        assert len(item["phase1_verdicts"]) == 3 and item["run_id"].startswith("jury-")

    # The stored run replays step by step, and re-running it from its calls gives the same result.
    run_id = items[0]["run_id"]
    code, out = invoke("jury", "replay", run_id, "--rerun")
    assert code == 0, out
    assert "rerun from recorded calls: identical" in out and "FINAL" in out and "Gemma reader" in out
    code, out = invoke("jury", "replay", run_id, "--json")
    events = json.loads(out)["events"]
    assert [e["type"] for e in events][:3] == ["run_started", "jury_started", "phase_started"]

    # `jury run --replay` answers from the recorded calls: no model runs, same verdicts.
    code, out = invoke(
        "jury",
        "run",
        "--case",
        str(two_cases),
        "--id",
        "refund-ok",
        "--rounds",
        "1",
        "--method",
        "majority_vote",
        "--replay",
        "--json",
    )
    assert code == 0, out
    assert json.loads(out)["result"]["final_verdict"] == items[1]["final_verdict"]


def test_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "content": "x", "gold": "fine"}\n{"id": "b"}\n', encoding="utf-8")
    code, out = invoke("jury", "eval", "--cases", str(bad))
    assert code == 1 and f"{bad}:1: gold 'fine'" in out and f"{bad}:2: content" in out
    code, out = invoke("jury", "run", "--case", str(CASES), "--panel", "nope")
    assert code == 1 and "unknown panel 'nope'" in out
    code, out = invoke("jury", "run", "--case", str(CASES), "--panel", "seed-api")
    assert code == 2 and "gpt-4o is unavailable" in out and "OPENAI_API_KEY" in out and "ANTHROPIC_API_KEY" in out
    code, out = invoke("jury", "run", "--case", str(CASES), "--method", "vote")
    assert code == 1 and "final_judgment_method='vote'" in out
    code, out = invoke("jury", "replay", "no-such-run")
    assert code == 1 and "no jury run" in out


def test_replay_of_a_panel_without_working_jurors_says_no_verdict() -> None:
    import asyncio

    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, run_case
    from engine.store import Store
    from models.errors import ServerError
    from tests.engine.test_jury_run import Plan, ev, scripted

    plan: Plan = {
        "a": {k: ServerError("down") for k in range(4)},
        "b": {k: ServerError("down") for k in range(4)},
        "c": {k: ev("unsafe_fail", 10) for k in range(4)},
    }
    seats = [JurorSeat(juror_id=j, model_id=j, role_name=f"Role {j}") for j in "abc"]
    store = Store()
    jury = Jury(seats, scripted(plan), JuryConfig(final_judgment_method="majority_vote"))
    run_id, _ = asyncio.run(run_case(store, jury, JuryCase(id="broken", content="Agent: hi")))
    store.dispose()
    code, out = invoke("jury", "replay", run_id)
    assert code == 0, out
    assert "FINAL NO VERDICT (majority_vote) no verdict: 1 of 3 jurors working, 2 needed" in out
    assert "[fallback, no vote: ServerError: down]" in out and "2 failed seat(s) not voting" in out


def test_replay_says_why_no_round_was_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gemma panel whose map gives the others weight 0: the CLI says no round was run, and why."""
    import asyncio

    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, run_case
    from engine.store import Store
    from models.base import ChatModel
    from tests.engine.test_jury_likelihood import _Heard

    monkeypatch.setattr(ChatModel, "_BASELINES", {})
    seats = [JurorSeat(juror_id=f"j{i}", model_id="gemma3-270m", role_name=f"Role {i}") for i in range(3)]
    store = Store()
    jury = Jury(seats, {"gemma3-270m": _Heard()}, JuryConfig(final_judgment_method="majority_vote"))
    run_id, result = asyncio.run(run_case(store, jury, JuryCase(id="quiet", content="Agent: hi")))
    store.dispose()
    assert result.termination_reason == "no_influence"
    code, out = invoke("jury", "replay", run_id)
    assert code == 0, out
    assert "No discussion round was run" in out and "weight 0" in out and " round 1" not in out
    assert "discussion ended: no_influence after 0 round(s)" in out
    assert "phase 1: identical by construction" in out and "unanimous" not in out  # not shown as agreement


def test_no_collaborative_runs_a_simple_parallel_jury_and_says_so(two_cases: Path, mock_models: Path) -> None:
    code, out = invoke(
        "jury", "run", "--case", str(two_cases), "--method", "majority_vote", "--no-collaborative", "--json"
    )
    assert code == 0, out
    result = json.loads(out)["result"]
    assert result["discussion_rounds"] == [] and result["termination_reason"] == "not_collaborative"
    code, text = invoke("jury", "run", "--case", str(two_cases), "--method", "majority_vote", "--no-collaborative")
    assert code == 0 and "Independent votes, no discussion" in text
