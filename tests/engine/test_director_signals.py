"""The director rubric by signals, the flat-scale flag (issue 37, point 2) and `judgelab director eval` (point 4)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine import judgemaps
from engine.director.config import DirectorConfig, load_character
from engine.director.evaluation import LineFileError, director_eval_totals, parse_lines
from engine.director.rubric import DirectorRubric
from engine.director.signals import (
    CRITERION_FEATURES,
    DIRECTOR_SIGNALS,
    SIGNALS_ID,
    criterion_scores,
    signals_problem,
    text_features,
)
from engine.director.status import Status
from tests.engine.test_director import ScriptedModel

runner = CliRunner()
YANA, AYU = load_character("yana"), load_character("ayu")


@pytest.mark.parametrize("score", [1, 3, 5])
def test_a_flat_scale_is_flagged_and_never_retries_a_line_on_its_own(score: int) -> None:
    same = {k: score for k in ("frame", "roleplay", "connectivity", "density", "naturalness")}
    model = ScriptedModel([json.dumps(same | {"comment": "ok"})])
    result = asyncio.run(DirectorRubric(model).score("えー、ほんと？", YANA))
    assert "flat_scale" in result.flags and "flat scale" in result.comment
    assert result.status == (Status.PASS if score == 5 else Status.WARN)  # 1 on every criterion: WARN, not RETRY


def test_scores_that_vary_are_not_a_flat_scale() -> None:
    model = ScriptedModel(
        ['{"frame": 1, "roleplay": 2, "connectivity": 1, "density": 1, "naturalness": 1, "comment": ""}']
    )
    result = asyncio.run(DirectorRubric(model).score("えー、ほんと？", YANA))
    assert result.status == Status.RETRY and "flat_scale" not in result.flags


def test_the_text_signals_by_hand() -> None:
    f = text_features("あああああああ")
    assert f["variety"] == 1 / 6 and f["numbers"] == 0
    g = text_features("気温は32度、湿度は80%です。")
    assert g["numbers"] == 2 and g["variety"] == 1.0


def test_the_shipped_map_reads_the_signals_the_code_computes_and_its_scores_stay_on_the_scale() -> None:
    cal = judgemaps.load_calibration(DIRECTOR_SIGNALS, SIGNALS_ID)
    assert cal is not None and signals_problem(cal) == ""
    assert cal.metrics["diagnosis"]["mark"] == "signal"
    assert set(cal.metrics["by_character"]) == {"ayu", "yana"}
    features = {f: 0.0 for fs in CRITERION_FEATURES.values() for f in fs}
    scores = criterion_scores(cal, features)
    assert set(scores) == set(CRITERION_FEATURES) and all(1.0 <= v <= 5.0 for v in scores.values())
    with pytest.raises(ValueError, match="finite"):
        criterion_scores(cal, features | {"voice_pmi": float("nan")})
    broken = cal.model_copy(update={"maps": {k: v for k, v in cal.maps.items() if k != "density"}})
    assert signals_problem(broken) == "no density map"


def test_without_a_map_the_signals_rubric_fails_under_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judgemaps, "load_calibration", lambda *a, **k: None)
    rubric = DirectorRubric(ScriptedModel([]), DirectorConfig(rubric_judge="signals"))
    result = asyncio.run(rubric.score("そうですね。", AYU))
    assert result.failed and result.status == Status.WARN and "uncalibrated" in result.flags


def _line(**kw: object) -> str:
    base = {"id": "l1", "character": "ayu", "text": "そうですね。", "acceptable": True}
    return json.dumps(base | kw, ensure_ascii=False)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "line 1: not JSON"),
        (_line(acceptable="yes"), "acceptable: Input should be a valid boolean"),
        (_line(character="../etc"), "character: String should match pattern"),
        (_line(character="nobody"), "character 'nobody'"),
        (_line(tone="x"), "tone: Extra inputs are not permitted"),
        (_line() + "\n" + _line(), 'id "l1" repeats'),
    ],
)
def test_a_bad_file_is_refused_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(LineFileError, match="lines.jsonl") as caught:
        parse_lines(text, "lines.jsonl")
    assert why in str(caught.value)


def test_the_totals_count_only_lines_the_rules_pass_in_the_auc() -> None:
    def item(i: int, ok: bool, mean: float | None, rules: str = "PASS", status: str = "PASS") -> dict:
        return {
            "id": str(i),
            "character": "ayu" if i % 2 else "yana",
            "acceptable": ok,
            "rubric_score": mean,
            "rules_status": rules,
            "status": status,
            "rubric_failed": mean is None and rules == "PASS",
            "flags": [],
        }

    lines = [
        item(1, True, 4.2),
        item(2, False, 3.0, status="RETRY"),
        item(3, True, 3.6, status="WARN"),
        item(4, False, 3.9),
    ]
    lines.append(item(5, False, None, rules="RETRY", status="RETRY"))
    totals = director_eval_totals(lines)
    assert totals["scored"] == 4 and totals["auc"] == 0.75 and totals["rules_caught"] == 1
    assert totals["status_counts"]["unacceptable"] == {"RETRY": 2, "PASS": 1}


@pytest.mark.model  # the bundled Gemma and the multilingual embedder
def test_director_eval_with_the_signals_is_a_replayable_run(tmp_path: Path) -> None:
    lines = tmp_path / "lines.jsonl"
    rows = [
        {
            "id": "good",
            "character": "ayu",
            "topic": "夏の海辺で散歩",
            "previous": "やだ、砂が熱いかも！",
            "text": "昼の砂浜はかなり熱くなります。波打ち際を歩くと楽ですよ。",
            "acceptable": True,
        },
        {
            "id": "voice",
            "character": "ayu",
            "topic": "夏の海辺で散歩",
            "previous": "やだ、砂が熱いかも！",
            "text": "つまり、砂がめっちゃ熱いってことでしょう？早く海に入っちゃおうよ！",
            "acceptable": False,
        },
    ]
    lines.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    first = runner.invoke(app, ["director", "eval", "--cases", str(lines), "--rubric-judge", "signals", "--json"])
    assert first.exit_code == 0, first.output
    live = json.loads(first.stdout)
    assert live["rubric_judge"] == "signals"
    scored = {i["id"]: i for i in live["items"] if i["rubric_score"] is not None}
    assert set(scored) == {"good", "voice"}, live["items"]
    assert scored["good"]["scores"]["roleplay"] > scored["voice"]["scores"]["roleplay"]  # her own voice
    assert all(1 <= v <= 5 for i in scored.values() for v in i["scores"].values())
    again = runner.invoke(
        app, ["director", "eval", "--cases", str(lines), "--rubric-judge", "signals", "--replay", "--json"]
    )
    assert again.exit_code == 0, again.output
    assert [i["rubric_score"] for i in json.loads(again.stdout)["items"]] == [i["rubric_score"] for i in live["items"]]
    shown = runner.invoke(app, ["runs", "show", live["run_id"], "--json"])
    assert json.loads(shown.stdout)["kind"] == "director.eval"


def test_a_sister_is_a_character_id_never_a_path(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from engine.config import ConfigError

    with pytest.raises(ValidationError):
        AYU.model_copy(update={"partner": None}).model_validate(AYU.model_dump() | {"partner": "../../etc/x"})
    with pytest.raises(ConfigError, match="is not a character id"):
        load_character("../../../../tmp/evil")
    hostile = AYU.model_copy(update={"partner": "../../../../tmp/evil"})  # a profile built around the checks
    result = asyncio.run(
        DirectorRubric(_gemma_stub(), DirectorConfig(rubric_judge="signals")).score("そうですね。", hostile)
    )
    assert result.failed and "no_voice" in result.flags and "/" not in (result.error or "").split("'")[0]


def test_a_sister_without_example_lines_gives_no_voice_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.director.rubric as rubric_module

    bare = YANA.model_copy(update={"examples": []})
    monkeypatch.setattr(rubric_module, "load_character", lambda cid: bare)
    result = asyncio.run(
        DirectorRubric(_gemma_stub(), DirectorConfig(rubric_judge="signals")).score("そうですね。", AYU)
    )
    assert result.failed and "no_voice" in result.flags


def test_non_finite_or_missing_scores_fail_the_rubric() -> None:
    rubric = DirectorRubric(ScriptedModel([]))
    bad = rubric._result(
        {"frame": float("nan"), "roleplay": 5, "connectivity": 5, "density": 5, "naturalness": 5}, "", None, []
    )
    assert bad.failed and "invalid:scores" in bad.flags and bad.status == Status.WARN
    assert rubric._result({}, "", None, []).failed


def _gemma_stub() -> ScriptedModel:
    stub = ScriptedModel([])
    stub.spec = stub.spec.model_copy(update={"id": "gemma3-270m"})
    return stub
