"""Confidence: exact scores for every branch and penalty, levels at each edge, settings really used,
aggregation, the vectorised path, calibration, and the LLM/embedding factors (real model, failures)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.confidence.aggregation import ConfidenceAggregator
from engine.confidence.evaluation import evaluate_answer
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.judges import LLMSelfEvaluator, QueryCoverageCalculator, SourceAgreementCalculator
from engine.confidence.levels import InterventionLevel, decide_action
from engine.confidence.score import calculate, search_quality, tool_success
from engine.confidence.settings import ConfidenceSettings, LevelThresholds
from engine.confidence.tables import score_arrays
from engine.reliability import (
    calibrate,
    expected_calibration_error,
    rank_auc,
    reliability_bins,
    risk_at,
    risk_coverage,
)

F = ConfidenceFactors


# -- the default calculation, branch by branch -----------------------------------------------------
@pytest.mark.parametrize(
    ("factors", "expected", "penalties"),
    [
        # other step, defaults: only tool success (1.0) counts → 1.0; no sources ×0.7
        (F(), 0.7, ["no sources"]),
        # search step, max ≥ 0.6 → quality = max; results exempt it from the no-sources penalty
        (F(is_search_step=True, search_result_count=5, search_max_score=0.8, search_avg_score=0.2), 0.8, []),
        # search step, blended quality 0.7·0.5 + 0.3·0.4 − min(0.15, 0.3·0.2) = 0.41, × tool success 4/5
        (
            F(
                is_search_step=True,
                search_result_count=3,
                search_max_score=0.5,
                search_avg_score=0.4,
                search_score_variance=0.2,
                tool_execution_count=5,
                tool_success_count=4,
            ),
            0.328,
            [],
        ),
        # variance penalty capped at 0.15: 0.35 + 0.15 − 0.15
        (
            F(
                is_search_step=True,
                search_result_count=2,
                search_max_score=0.5,
                search_avg_score=0.5,
                search_score_variance=1.0,
            ),
            0.35,
            [],
        ),
        # blended quality floored at 0: 0.07 − 0.15
        (F(is_search_step=True, search_result_count=1, search_max_score=0.1, search_score_variance=1.0), 0.0, []),
        # search step without results (max 0.7 given): 0.7 ×0.5 (no results) ×0.7 (no sources) = 0.245
        (
            F(is_search_step=True, search_result_count=0, search_max_score=0.7),
            0.245,
            ["search step without results", "no sources"],
        ),
        # other step, every factor counts: (0.9·0.6 + 1·0.4 + 0.8·0.2 + 0.7·0.3 + 0.5·0.1) / 1.6 = 0.85
        (
            F(
                search_result_count=4,
                search_max_score=0.9,
                tool_execution_count=2,
                tool_success_count=2,
                source_agreement=0.8,
                source_count=3,
                llm_self_confidence=0.7,
                query_coverage=0.5,
            ),
            0.85,
            [],
        ),
        # tool rate 0.5 and self-confidence 0.85: (0.5·0.4 + 0.85·0.3)/0.7 = 0.65, ×(0.8 + 0.2·0.5);
        # self-confidence ≥ 0.8 exempts the no-sources penalty
        (F(tool_success_rate=0.5, llm_self_confidence=0.85), 0.585, ["tool success rate 0.5"]),
        # inclusion edges are strict: self 0.6, coverage 0.1 and a single source do not count
        (F(llm_self_confidence=0.6, query_coverage=0.1, source_count=1, source_agreement=0.9), 1.0, []),
        # self-confidence exactly 0.8 exempts: (0.4 + 0.8·0.3)/0.7 = 0.914285…
        (F(llm_self_confidence=0.8), 0.914, []),
        # search step with results and a tool rate below 1: 0.7 × 0.6 = 0.42, × 0.92
        (
            F(is_search_step=True, search_result_count=3, search_max_score=0.7, tool_success_rate=0.6),
            0.386,
            ["tool success rate 0.6"],
        ),
        # the top of the range: a search step with a perfect hit
        (F(is_search_step=True, search_result_count=1, search_max_score=1.0), 1.0, []),
        # tool counts override the rate: 0 of 3 succeeded → tool success 0 → base 0
        (F(tool_execution_count=3, tool_success_count=0, source_count=2), 0.0, []),
    ],
)
def test_default_calculation_exact(factors: ConfidenceFactors, expected: float, penalties: list[str]) -> None:
    score = calculate(factors)
    assert score.score == expected
    assert [p.name.split(" 0")[0] if p.name.startswith("tool") else p.name for p in score.penalties] == [
        p.split(" 0")[0] if p.startswith("tool") else p for p in penalties
    ]
    assert [p.name for p in score.penalties] == penalties


def test_sub_scores() -> None:
    assert search_quality(F()) == 0.0
    assert search_quality(
        F(search_result_count=0, search_max_score=0.3, search_avg_score=0.3, search_score_variance=0.0)
    ) == pytest.approx(0.3)
    assert tool_success(F(tool_execution_count=4, tool_success_count=1)) == 0.25
    assert tool_success(F(tool_success_rate=0.3)) == 0.3


def test_breakdown_and_penalty_chain_are_consistent() -> None:
    score = calculate(
        F(search_result_count=4, search_max_score=0.9, source_count=0, tool_success_rate=0.9, llm_self_confidence=0.7)
    )
    included = {k: v for k, v in score.breakdown.items() if v.included}
    assert set(included) == {"search_quality", "tool_success", "llm_self_confidence"}
    assert sum(v.contribution for v in included.values()) == pytest.approx(score.base)
    running = score.base
    for p in score.penalties:
        assert p.before == pytest.approx(running)
        running = p.after
    assert round(running, 3) == score.score
    assert "weighted mean" in score.reason and "no sources ×0.7" in score.reason


@pytest.mark.parametrize(
    ("value", "level"),
    [
        (1.0, "SILENT"),
        (0.9, "SILENT"),
        (0.8999, "NOTIFY"),
        (0.7, "NOTIFY"),
        (0.6999, "CONFIRM"),
        (0.4, "CONFIRM"),
        (0.3999, "ESCALATE"),
        (0.0, "ESCALATE"),
    ],
)
def test_levels_at_each_threshold_edge(value: float, level: str) -> None:
    decision = decide_action(value)
    assert decision.level == InterventionLevel(level)
    assert (
        decision.suggested_action
        == {
            "SILENT": "proceed",
            "NOTIFY": "proceed with status",
            "CONFIRM": "ask confirmation",
            "ESCALATE": "request clarification",
        }[level]
    )


def test_configured_settings_are_really_used() -> None:
    custom = ConfidenceSettings(
        penalty_no_sources=0.5, thresholds=LevelThresholds(silent=0.95, notify=0.5, confirm=0.2)
    )
    assert calculate(F(), custom).score == 0.5
    assert decide_action(0.5, custom).level == InterventionLevel.NOTIFY
    # a zero weight removes the factor; with nothing left, the base is 0 and never a division error
    no_tool = ConfidenceSettings(weight_tool_success=0.0)
    assert calculate(F(source_count=1), no_tool).score == 0.0
    heavy_self = ConfidenceSettings(weight_self_confidence=3.0)
    # (1·0.4 + 0.9·3.0) / 3.4 = 0.91176…
    assert calculate(F(llm_self_confidence=0.9, source_count=1), heavy_self).score == 0.912
    # (0.4 + 0.27) / 0.7 = 0.957…: rounding is a setting too
    assert calculate(F(llm_self_confidence=0.9, source_count=1)).score == 0.957
    assert calculate(F(llm_self_confidence=0.9, source_count=1), ConfidenceSettings(decimals=1)).score == 1.0


def test_unknown_and_ill_typed_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="search_result_countt"):
        F.model_validate({"search_result_countt": 3})
    with pytest.raises(ValidationError, match="is_search_step"):
        F.model_validate({"is_search_step": "yes"})
    with pytest.raises(ValidationError, match="search_result_count"):
        F.model_validate({"search_result_count": 2.5})
    with pytest.raises(ValidationError):
        F.model_validate({"search_max_score": float("nan")})
    with pytest.raises(ValidationError, match="silent ≥ notify ≥ confirm"):
        LevelThresholds(silent=0.5, notify=0.7)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"llm_self_confidence": 1e308}, "llm_self_confidence"),  # was 1.0 SILENT
        ({"tool_execution_count": 1, "tool_success_count": 50}, "tool_success_count"),  # was SILENT
        ({"tool_success_count": 1}, "tool_success_count"),  # a success of no execution
        ({"tool_success_rate": -5}, "tool_success_rate"),  # was a penalty of ×−0.2
        ({"tool_success_rate": 1.5}, "tool_success_rate"),
        ({"search_max_score": 1.5}, "search_max_score"),
        ({"search_avg_score": -0.1}, "search_avg_score"),
        ({"source_agreement": float("inf")}, "source_agreement"),
        ({"query_coverage": float("nan")}, "query_coverage"),
        ({"search_score_variance": -1.0}, "search_score_variance"),
        ({"source_count": -2}, "source_count"),
    ],
)
def test_out_of_range_and_inconsistent_factors_are_errors_naming_the_field(data: dict, field: str) -> None:
    from engine.confidence.factors import FactorError, parse_factors

    with pytest.raises(FactorError, match=f"field '{field}'"):
        parse_factors(data)
    # the table path refuses the same row, naming the field and the row
    columns = {k: [getattr(F(), k), v] for k, v in data.items()}  # row 0 the defaults, row 1 the bad values
    with pytest.raises(FactorError, match=f"field '{field}' row 1"):
        score_arrays(columns)


def test_the_cli_names_the_field_of_inconsistent_factors() -> None:
    from typer.testing import CliRunner

    from dashboard.cli import app

    for factors, field in (
        ('{"llm_self_confidence": 1e308}', "llm_self_confidence"),
        ('{"tool_execution_count": 1, "tool_success_count": 50}', "tool_success_count"),
        ('{"tool_success_rate": -5}', "tool_success_rate"),
    ):
        result = CliRunner().invoke(app, ["confidence", "score", "--factors", factors])
        assert result.exit_code == 1 and f"field '{field}'" in result.output and "SILENT" not in result.output


def test_aggregator_methods() -> None:
    agg = ConfidenceAggregator()
    assert agg.aggregate([0.9, 0.6, 0.3], "mean") == pytest.approx(0.6)
    assert agg.aggregate([0.9, 0.6, 0.3], "min") == 0.3
    assert agg.aggregate([0.9, 0.6, 0.3], "weighted") == pytest.approx((0.9 + 1.2 + 0.9) / 6)
    assert agg.aggregate([], "mean") == 0.0 and agg.aggregate([], "weighted") == 0.0
    assert agg.aggregate([calculate(F())], "mean") == 0.7
    with pytest.raises(ValueError, match="unknown aggregation method 'median'"):
        agg.aggregate([0.5], "median")
    critical = ConfidenceAggregator(critical_check=True)
    for method in ("mean", "min", "weighted"):
        assert critical.aggregate([0.9, 0.2], method) == pytest.approx(0.55 * 0.7)
    assert critical.aggregate([0.9, 0.3], "min") == 0.3  # 0.3 is not below 0.3


factor_rows = st.fixed_dictionaries(
    {
        "search_result_count": st.integers(0, 6),
        "search_avg_score": st.floats(0, 1),
        "search_max_score": st.sampled_from([0.0, 0.3, 0.6]) | st.floats(0, 1),
        "search_score_variance": st.floats(0, 2),
        "source_agreement": st.floats(0, 1),
        "source_count": st.integers(0, 4),
        "llm_self_confidence": st.sampled_from([0.6, 0.8]) | st.floats(0, 1),
        "tool_success_rate": st.sampled_from([1.0, 0.5]) | st.floats(0, 1),
        "tool_execution_count": st.integers(0, 3),
        "tool_success_count": st.integers(0, 3),
        "query_coverage": st.sampled_from([0.1]) | st.floats(0, 1),
        "is_search_step": st.booleans(),
    }
).map(lambda r: r | {"tool_success_count": min(r["tool_success_count"], r["tool_execution_count"])})


@settings(max_examples=300, deadline=None)
@given(st.lists(factor_rows, min_size=1, max_size=20))
@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_vectorised_path_equals_per_step_path(rows: list[dict]) -> None:
    expected = [calculate(F(**r)).score for r in rows]
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    got = score_arrays(columns)
    assert got.tolist() == pytest.approx(expected, abs=1e-9)


# -- calibration --------------------------------------------------------------------------------------
def test_calibration_metrics_by_hand() -> None:
    scores = [0.95, 0.85, 0.55, 0.15]
    correct = [True, False, True, False]
    bins = reliability_bins(scores, correct, n_bins=2)
    assert [(b.count, b.accuracy) for b in bins] == [(1, 0.0), (3, 2 / 3)]
    ece = expected_calibration_error(bins)
    assert ece == pytest.approx(0.25 * 0.15 + 0.75 * abs(2 / 3 - (0.95 + 0.85 + 0.55) / 3))
    points = risk_coverage(scores, correct)
    assert [(p.threshold, p.coverage, p.risk) for p in points][:2] == [(0.95, 0.25, 0.0), (0.85, 0.5, 0.5)]
    assert risk_at(scores, correct, 0.99).risk is None
    report = calibrate(scores, correct, n_bins=2)
    assert report.accuracy == 0.5 and report.ece == pytest.approx(ece)
    with pytest.raises(ValueError):
        calibrate([], [])


def test_score_quality_gives_every_figure_its_interval() -> None:
    """AUC and Brier by hand, and each figure inside its own 95 % interval (Wilson or bootstrap over items)."""
    from engine.confidence.calibration import score_quality

    scores = [0.95, 0.85, 0.55, 0.15] * 5
    correct = [True, False, True, False] * 5
    quality = score_quality(scores, correct, proceeded=5)
    # right answers score 0.95 and 0.55, wrong 0.85 and 0.15: 3 of 4 pairs ordered right
    assert quality["auc"] == 0.75
    assert quality["brier"] == pytest.approx((0.05**2 + 0.85**2 + 0.45**2 + 0.15**2) / 4, abs=1e-4)
    assert quality["proceed_rate"] == 0.25
    assert quality["proceed_rate_ci"] == pytest.approx([0.1119, 0.4687], abs=1e-4)  # Wilson 5 of 20
    for key in ("auc", "brier", "proceed_rate"):
        low, high = quality[f"{key}_ci"]
        assert low <= quality[key] <= high
    assert all(quality[k] is not None for k in ("ece_ci", "aurc_ci", "accuracy_ci"))
    assert score_quality(scores, correct, proceeded=5) == quality  # seeded


# -- LLM and embedding factors ---------------------------------------------------------------------
@pytest.mark.model  # the packaged embedder
def test_source_agreement_with_packaged_embedder_offline() -> None:
    agreement = SourceAgreementCalculator()
    assert agreement.calculate(["only one"]) == 1.0
    assert agreement.calculate([]) == 1.0
    same = agreement.calculate(["Paris is the capital of France.", "France's capital city is Paris."])
    different = agreement.calculate(["Paris is the capital of France.", "Bananas are rich in potassium."])
    assert 0.0 <= different < same <= 1.0
    assert same > 0.8


def _dead_model(call_log=None):
    import socket

    import openai  # noqa: F401 - imported before the 2 s timeout starts: on a loaded machine its import alone took longer

    from models.catalog import ModelSpec, Profile
    from models.registry import build_model

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = ModelSpec(
        id="dead",
        backend="openai",
        model="x",
        base_url=f"http://127.0.0.1:{port}/v1",
        needs_key=False,
        max_retries=0,
        timeout_s=2,
        profile=Profile(name="dead"),
    )
    return build_model(spec, call_log=call_log)


def test_evaluators_fall_back_flagged_when_the_model_fails() -> None:
    model = _dead_model()
    self_eval = asyncio.run(LLMSelfEvaluator(model).evaluate("q", "a"))
    assert (self_eval.value, self_eval.flagged) == (0.5, True) and "ModelUnavailable" in self_eval.detail
    coverage = asyncio.run(QueryCoverageCalculator(model).calculate("q", "a"))
    assert (coverage.value, coverage.flagged) == (0.0, True)


@pytest.mark.model  # the packaged embedder
def test_evaluate_answer_records_a_run_even_with_a_failing_model(store) -> None:
    result = asyncio.run(
        evaluate_answer(store, _dead_model(store), "q", "a", ["s1", "s2 different"], self_eval="generate")
    )
    assert result.factors.llm_self_confidence == 0.5 and result.factors.source_count == 2
    run = store.get_run(result.run_id)
    assert run is not None and run.status == "finished"
    assert run.summary["flagged"] == ["llm_self_confidence", "query_coverage"]
    types = [e.type for e in store.events(result.run_id)]
    assert types == [
        "run_started",
        "confidence_factor",
        "confidence_factor",
        "confidence_factor",
        "confidence_scored",
        "run_finished",
    ]
    calls = store.calls(result.run_id)
    assert len([c for c in calls if c.model_id != "minilm"]) == 2  # both failed calls are recorded
    assert len([c for c in calls if c.model_id == "minilm"]) == 2  # and one embedding call per source


@pytest.mark.model
def test_evaluators_with_the_bundled_model(store) -> None:
    from models.catalog import load_catalog
    from models.registry import ModelHub

    model = ModelHub(load_catalog(), call_log=store).get("gemma3-270m")
    result = asyncio.run(
        evaluate_answer(
            store,
            model,
            "What is the capital of France?",
            "The capital of France is Paris.",
            ["Paris is the capital and largest city of France.", "France's capital city is Paris."],
            self_eval="generate",
        )
    )
    for r in result.results:
        assert 0.0 <= r.value <= 1.0
        if r.name in ("llm_self_confidence", "query_coverage") and not r.flagged:
            assert r.call_id is not None
    assert result.factors.source_agreement > 0.8
    assert result.score.score == calculate(result.factors).score
    assert np.isfinite(result.score.score)
    calls = store.calls(result.run_id)
    assert len(calls) == 4 and {c.purpose for c in calls} == {"confidence.evaluate"}
    assert sorted(c.model_id for c in calls) == ["gemma3-270m", "gemma3-270m", "minilm", "minilm"]  # 2 sources


def test_rank_auc_counts_wins_and_half_ties_whatever_the_scale() -> None:
    assert rank_auc([3.0, 2.0], [1.0, 0.5]) == 1.0
    assert rank_auc([1.0], [2.0]) == 0.0
    assert rank_auc([2.0, 1.0], [2.0]) == 0.25  # one tie (0.5) and one loss, over 2 pairs
    assert rank_auc([40.0, 10.0], [20.0]) == rank_auc([0.4, 0.1], [0.2]) == 0.5
    assert rank_auc([], [1.0]) is None and rank_auc([1.0], []) is None


def test_a_result_nothing_judged_is_acted_on_as_escalate() -> None:
    """The engine decides what the agent does (the page and the stored run agree): when neither self-confidence
    nor query coverage counted, the score's SILENT is not acted on — ESCALATE."""
    from engine.confidence.evaluation import answer_judged

    settings = ConfidenceSettings()
    evidence_only = F(source_agreement=0.95, source_count=3, llm_self_confidence=0.5, query_coverage=0.0)
    assert answer_judged(evidence_only, settings, []) is False
    judged = F(source_agreement=0.95, source_count=3, llm_self_confidence=0.9, query_coverage=0.8)
    assert answer_judged(judged, settings, []) is True
    assert answer_judged(judged, settings, ["llm_self_confidence", "query_coverage"]) is False


def test_the_recorded_demo_evaluation_stores_the_level_acted_on() -> None:
    import json
    from pathlib import Path

    runs = Path(__file__).resolve().parents[2] / "data" / "demo" / "runs.jsonl"
    lines = [json.loads(line) for line in runs.read_text(encoding="utf-8").splitlines() if line.strip()]
    right, wrong = [r["summary"] for r in lines if r["run"]["kind"] == "confidence.evaluate"]  # recorded in order
    # issue 37: the correct "Paris" with two sources, judged by the signals, proceeds — trusted, acted as scored;
    # the wrong answer without sources is stopped
    assert right["level"] in ("SILENT", "NOTIFY") and wrong["level"] in ("CONFIRM", "ESCALATE")
    for summary in (right, wrong):
        assert summary["trusted"] is True and summary["acted_level"] == summary["level"] and summary["flagged"] == []
