"""`judgelab confidence score | evaluate | calibrate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.config import DATA_DIR

runner = CliRunner()
LABELS = DATA_DIR / "benchmarks" / "confidence.jsonl"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_score_prints_the_documented_keys() -> None:
    code, out = invoke(
        "confidence", "score", "--factors", '{"tool_success_rate": 0.5, "llm_self_confidence": 0.85}', "--json"
    )
    assert code == 0
    payload = json.loads(out)
    assert {"score", "breakdown", "penalties", "level", "reason", "suggested_action"} <= set(payload)
    assert payload["score"] == 0.585 and payload["level"] == "CONFIRM"
    assert payload["suggested_action"] == "ask confirmation"
    assert [p["name"] for p in payload["penalties"]] == ["tool success rate 0.5"]


def test_score_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text('{"is_search_step": true, "search_result_count": 5, "search_max_score": 0.8}')
    code, out = invoke("confidence", "score", "--factors", str(path), "--json")
    assert code == 0 and json.loads(out)["score"] == 0.8


@pytest.mark.parametrize(
    ("factors", "message"),
    [
        ('{"search_results": 3}', "field 'search_results': Extra inputs are not permitted"),
        ('{"search_result_count": "three"}', "field 'search_result_count'"),
        ('{"is_search_step": 1}', "field 'is_search_step'"),
        ('{"search_max_score": 0.5,', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_score_errors_name_the_field(factors: str, message: str) -> None:
    code, out = invoke("confidence", "score", "--factors", factors)
    assert code == 1 and message in out


def test_calibrate_json_is_recomputable_from_its_items() -> None:
    code, out = invoke("confidence", "calibrate", "--labels", str(LABELS), "--json")
    assert code == 0
    payload = json.loads(out)
    items = payload["items"]
    assert payload["n"] == len(items) >= 30
    assert payload["accuracy"] == pytest.approx(sum(i["correct"] for i in items) / len(items))
    # ECE recomputed from the per-item scores and labels, bin by bin
    ece = 0.0
    for b in payload["bins"]:
        last = b["upper"] == 1.0
        members = [i for i in items if b["lower"] <= i["score"] < b["upper"] or (last and i["score"] == 1.0)]
        assert len(members) == b["count"]
        if members:
            conf = sum(i["score"] for i in members) / len(members)
            acc = sum(i["correct"] for i in members) / len(members)
            ece += len(members) / len(items) * abs(acc - conf)
    assert payload["ece"] == pytest.approx(ece)
    shares = payload["level_shares"]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["SILENT"] == pytest.approx(sum(i["level"] == "SILENT" for i in items) / len(items))
    silent = payload["thresholds"]["silent"]
    kept = [i for i in items if i["score"] >= 0.9]
    assert silent["coverage"] == pytest.approx(len(kept) / len(items))
    assert silent["risk"] == pytest.approx(1 - sum(i["correct"] for i in kept) / len(kept))


def test_calibrate_reports_bad_rows_by_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"factors": {}, "correct": true}\nnot json\n{"factors": {"bogus": 1}, "correct": false}\n'
        '{"factors": {}, "correct": "yes"}\n'
    )
    code, out = invoke("confidence", "calibrate", "--labels", str(path))
    assert code == 1 and "nothing imported" in out
    for line in (2, 3, 4):
        assert f"{path}:{line}:" in out
    code, out = invoke("confidence", "calibrate", "--labels", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "file not found" in out


def test_evaluate_with_unavailable_model() -> None:
    code, out = invoke("confidence", "evaluate", "--query", "q", "--answer", "a", "--model", "gpt-4o")
    assert code == 2 and "OPENAI_API_KEY" in out


@pytest.mark.model
def test_evaluate_with_the_bundled_model_records_a_run() -> None:
    code, out = invoke(
        "confidence",
        "evaluate",
        "--query",
        "What is the capital of France?",
        "--answer",
        "Paris.",
        "--sources",
        "Paris is the capital of France.",
        "--sources",
        "France's capital is Paris.",
        "--json",
    )
    assert code == 0, out
    payload = json.loads(out)
    assert payload["factors"]["source_count"] == 2 and payload["factors"]["source_agreement"] > 0.7
    assert payload["level"] in {"SILENT", "NOTIFY", "CONFIRM", "ESCALATE"}
    code, shown = invoke("runs", "show", payload["run_id"], "--json")
    assert code == 0 and json.loads(shown)["kind"] == "confidence.evaluate"
