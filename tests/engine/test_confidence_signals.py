"""The default confidence self-evaluation by signals (issue 37, point 1) and `judgelab confidence eval` (point 4)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine import judgemaps
from engine.confidence.batch import CaseFileError, parse_cases
from engine.confidence.evaluation import evaluate_answer
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.figures import eval_totals
from engine.confidence.judges import SignalSelfEvaluator
from engine.confidence.score import calculate
from engine.confidence.signals import (
    MAPS,
    SIGNALS,
    SIGNALS_ID,
    on_seed_scale,
    proceed_point,
    signals_problem,
    words,
)

runner = CliRunner()


def test_the_seed_scale_counts_every_reading_and_rises_with_p() -> None:
    values = [on_seed_scale(p / 20, 0.6) for p in range(21)]
    assert values == sorted(values) and min(values) > 0.6 and max(values) == 1.0
    assert on_seed_scale(0.5, 0.6) == 0.8  # as likely right as wrong: the seed's "confident enough" point
    # the final score rises with p for an answer without sources (what feeding p as it is breaks: a p of 0.55 is
    # dropped from the mean, and the score jumps above that of a p of 0.65)
    scores = [calculate(ConfidenceFactors(llm_self_confidence=v, query_coverage=0.5)).score for v in values]
    assert scores == sorted(scores)
    raw = [calculate(ConfidenceFactors(llm_self_confidence=p, query_coverage=0.5)).score for p in (0.55, 0.65)]
    assert raw[0] > raw[1]


@pytest.mark.parametrize("seed", range(20))
def test_the_operating_point_is_the_highest_where_right_answers_proceed_as_often_as_wrong_ones_stop(seed: int) -> None:
    import random

    rng = random.Random(seed)
    labels = [rng.random() < 0.5 for _ in range(40)] + [True, False]
    p = [min(1.0, max(0.0, rng.gauss(0.6 if y else 0.4, 0.2))) for y in labels]

    def rates(t: float) -> tuple[float, float]:
        right = [x for x, y in zip(p, labels, strict=True) if y]
        wrong = [x for x, y in zip(p, labels, strict=True) if not y]
        return sum(x >= t for x in right) / len(right), sum(x < t for x in wrong) / len(wrong)

    t = proceed_point(p, labels)
    proceed, stopped = rates(t)
    assert 0 < t < 1 and proceed >= stopped
    cut = min(x for x in p if x >= t)  # the threshold chosen: t sits just under it
    higher = [x for x in p if x > cut]
    if higher:  # the next cut up would proceed fewer right answers than it stops wrong ones
        proceed_up, stopped_up = rates(min(higher))
        assert proceed_up < stopped_up
    assert proceed_point([0.3, 0.7], [True, True]) == 0.5  # one class: nothing to choose


def test_words_read_japanese_as_character_pairs_and_numbers_whole() -> None:
    assert {"保証", "証は", "2"} <= words("保証は2年です。")
    assert {"warranty", "lasts", "12.5"} <= words("The warranty lasts 12.5 months")
    assert "is" not in words("it is")  # shorter than three letters


def test_the_shipped_map_holds_the_signals_the_code_reads_and_a_map_over_others_is_refused() -> None:
    cal = judgemaps.load_calibration(SIGNALS, SIGNALS_ID)
    assert cal is not None and signals_problem(cal) == ""
    assert set(cal.maps) == set(MAPS)
    assert cal.metrics["diagnosis"]["mark"] == "signal"
    for part in ("en", "ja"):
        assert cal.metrics["by_language"][part]["n"] > 50
    other = cal.model_copy(
        update={
            "maps": {
                **cal.maps,
                "covers_question": cal.maps["covers_question"].model_copy(update={"features": ["pmi_supported"]}),
            }
        }
    )
    assert "covers_question must be a logistic map over question_match" in signals_problem(other)


def _line(**kw: object) -> str:
    base = {"id": "a", "query": "q", "answer": "x", "supported": True}
    return json.dumps(base | kw)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json\n", "line 1: not JSON"),
        (_line(suported=True) + "\n", "suported: Extra inputs are not permitted"),
        (_line(supported="yes") + "\n", "supported: Input should be a valid boolean"),
        (_line() + "\n" + _line() + "\n", 'line 2: id "a" repeats an earlier line'),
        (_line(sources="one source") + "\n", "sources: Input should be a valid list"),
        ("\n\n", "no labelled answers"),
    ],
)
def test_a_bad_file_is_refused_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(CaseFileError, match="answers.jsonl") as caught:
        parse_cases(text, "answers.jsonl")
    assert why in str(caught.value)


def test_blank_sources_are_dropped_and_the_language_kept() -> None:
    [case] = parse_cases(_line(sources=["  ", "Paris is the capital."], language="en"), "f")
    assert case.sources == ["Paris is the capital."] and case.language == "en"


def test_the_totals_by_hand() -> None:
    def line(i: int, supported: bool, score: float, proceeds: bool, language: str, sources: int) -> dict:
        return {
            "id": str(i),
            "supported": supported,
            "score": score,
            "p_supported": score,
            "level": "NOTIFY" if proceeds else "CONFIRM",
            "proceeds": proceeds,
            "language": language,
            "sources": sources,
            "flagged": [],
        }

    lines = [
        line(1, True, 0.9, True, "en", 1),
        line(2, True, 0.6, False, "ja", 0),
        line(3, False, 0.7, True, "en", 0),
        line(4, False, 0.5, False, "ja", 1),
    ]
    totals = eval_totals(lines)
    assert totals["auc"] == 0.75  # 3 of the 4 right–wrong pairs ordered right
    assert totals["right_proceed"]["k"] == 1 and totals["right_proceed"]["n"] == 2
    assert totals["wrong_stopped"]["rate"] == 0.5
    assert totals["levels"] == {"supported": {"NOTIFY": 1, "CONFIRM": 1}, "unsupported": {"NOTIFY": 1, "CONFIRM": 1}}
    assert totals["by_language"]["en"]["auc"] == 1.0 and totals["by_language"]["en"]["n"] == 2
    assert totals["by_sources"]["without_sources"]["auc"] == 0.0
    low, high = totals["right_proceed"]["ci"]
    assert low < 0.5 < high


def test_without_a_usable_map_both_factors_fall_back_flagged_with_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.engine.test_confidence import _dead_model

    evaluator = SignalSelfEvaluator(_dead_model(), embedder=None)  # type: ignore[arg-type]
    monkeypatch.setattr(judgemaps, "load_calibration", lambda *a, **k: None)
    own, coverage, signals = asyncio.run(evaluator.evaluate("q", "a"))
    assert (own.value, own.flagged, coverage.value, coverage.flagged) == (0.5, True, 0.0, True)
    assert own.flags == ["uncalibrated"] and signals is None

    def refused(*a: object, **k: object) -> None:
        raise judgemaps.MapError("confidence.signals.smollm2-135m+use-m3.json: not a valid calibration file")

    monkeypatch.setattr(judgemaps, "load_calibration", refused)
    own, coverage, _ = asyncio.run(evaluator.evaluate("q", "a"))
    assert own.flagged and own.flags == ["map_invalid"] and "not a valid calibration file" in own.detail


@pytest.mark.model  # SmolLM2 and the multilingual embedder, as shipped
def test_the_signals_tell_an_answer_its_source_holds_from_one_it_contradicts(store) -> None:
    from models.catalog import load_catalog
    from models.registry import ModelHub

    reader = ModelHub(load_catalog(), call_log=store).get("smollm2-135m")
    source = ["The warranty covers manufacturing defects for two years from the date of purchase."]
    q = "How long is the warranty?"
    right = asyncio.run(evaluate_answer(store, reader, q, "Two years from the date of purchase.", source))
    wrong = asyncio.run(evaluate_answer(store, reader, q, "Five years, and it covers accidental damage.", source))
    p_right, p_wrong = (r.results[0].probability for r in (right, wrong))
    assert p_right is not None and p_wrong is not None and p_right > p_wrong
    assert right.score.score > wrong.score.score
    assert "closest to source 1" in right.results[0].detail
    events = [e.type for e in store.events(right.run_id)]
    assert "confidence_signals" in events
    calls = store.calls(right.run_id)
    assert {c.model_id for c in calls} == {"smollm2-135m", "use-m3"}
    assert all("calibration:" in f for f in [right.results[0].flags[1]])


@pytest.mark.model
def test_confidence_eval_is_a_replayable_run(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "\n".join(
            json.dumps(x, ensure_ascii=False)
            for x in [
                {"id": "r", "query": "水素の元素記号は？", "answer": "Hです。", "supported": True, "language": "ja"},
                {"id": "w", "query": "What is 7 × 8?", "answer": "54.", "supported": False, "language": "en"},
                {
                    "id": "s",
                    "query": "When does the shop open?",
                    "answer": "At 9 am.",
                    "sources": ["The shop opens at 9 am and closes at 6 pm.", "Opening hours: 9:00–18:00."],
                    "supported": True,
                    "language": "en",
                },
            ]
        ),
        encoding="utf-8",
    )
    first = runner.invoke(app, ["confidence", "eval", "--cases", str(answers), "--json"])
    assert first.exit_code == 0, first.output
    live = json.loads(first.stdout)
    assert [i["id"] for i in live["items"]] == ["r", "w", "s"]
    assert set(live["totals"]["by_language"]) == {"en", "ja"}
    assert live["items"][2]["factors"]["source_agreement"] > 0.5 and not any(i["flagged"] for i in live["items"])
    again = runner.invoke(app, ["confidence", "eval", "--cases", str(answers), "--replay", "--json"])
    assert again.exit_code == 0, again.output
    replayed = json.loads(again.stdout)
    assert [(i["score"], i["level"]) for i in replayed["items"]] == [(i["score"], i["level"]) for i in live["items"]]
    shown = runner.invoke(app, ["runs", "show", live["run_id"], "--json"])
    assert json.loads(shown.stdout)["kind"] == "confidence.eval"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000, "line 1: not JSON (nested too deeply)"),
        ('{"id": "a", "n": ' + "1" * 5000 + "}", "line 1: not JSON (Exceeds the limit"),
        (_line()[:-1] + ', "supported": false}', 'the key "supported" is given twice'),
        ("[1, 2]", "line 1: not a JSON object"),
    ],
)
def test_a_line_that_is_not_one_plain_object_is_named_never_a_crash(text: str, why: str) -> None:
    with pytest.raises(CaseFileError) as caught:
        parse_cases(text, "answers.jsonl")
    assert why in str(caught.value)


def test_a_file_of_bad_lines_keeps_ten_messages_and_counts_the_rest() -> None:
    with pytest.raises(CaseFileError) as caught:
        parse_cases("x\n" * 50_000, "answers.jsonl")
    assert str(caught.value).endswith("(and 49990 more)") and str(caught.value).count("not JSON") == 10


def test_an_answer_nothing_judged_is_acted_on_as_escalate_and_left_out_of_the_p_figure() -> None:
    from engine.confidence.batch import AnswerCase, EvalConfig, judge_case
    from engine.confidence.judges import SourceAgreementCalculator

    class Agreeing(SourceAgreementCalculator):
        def calculate(self, texts):
            return 0.95

    def unavailable(model_id: str) -> Any:
        if model_id == "smollm2-135m":
            raise KeyError(model_id)
        return None

    case = AnswerCase(id="w", query="q", answer="a", sources=["s1", "s2", "s3"], supported=False)
    config = EvalConfig(source="f", cases=[case], model_id="elsewhere")
    line = asyncio.run(judge_case(case, config, unavailable, Agreeing()))
    assert line["level"] == "SILENT" and not line["trusted"] and line["acted_level"] == "ESCALATE"
    assert not line["proceeds"] and line["p_supported"] is None
    assert set(line["flagged"]) == {"llm_self_confidence", "query_coverage"}
