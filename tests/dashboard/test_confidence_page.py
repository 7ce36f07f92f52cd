"""The Confidence lab, headless: live score from the factor inputs, thresholds re-deciding the calibration
set instantly, the plan aggregates, and a live evaluation with the bundled model."""

from __future__ import annotations

import re
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.rendered import settle_runs, shown
from tests.fakes.forms import wkey


def _page() -> None:
    from pages import confidence

    confidence.render()


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _level_counts(at: AppTest) -> dict[str, int]:
    for frame in at.dataframe:
        value = frame.value
        if value.index.name == "level":
            return value["count"].to_dict()
    raise AssertionError("no per-level table")


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_lab_scores_factors_live() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    metrics = _metrics(at)
    assert (metrics["Score"], metrics["Level"]) == ("0.700", "NOTIFY")
    assert any("go ahead, and tell the user what it did" in shown(m.value) for m in at.markdown)  # not 'with status'
    at.toggle(key="details.confidence.toggle").set_value(True).run()  # the score's formula is research detail
    at.slider(key=wkey(at, "confidence.llm_self_confidence")).set_value(0.85)
    at.slider(key=wkey(at, "confidence.tool_success_rate")).set_value(0.5).run()
    metrics = _metrics(at)
    assert (metrics["Score"], metrics["Level"]) == ("0.585", "CONFIRM")
    assert any("tool success rate 0.5" in i.value for i in at.info)
    at.toggle(key=wkey(at, "confidence.is_search_step")).set_value(True)
    at.number_input(key=wkey(at, "confidence.search_result_count")).set_value(4)
    at.slider(key=wkey(at, "confidence.search_max_score")).set_value(0.9).run()
    # search step: 0.9 × tool success 0.5 = 0.45, × (0.8 + 0.2·0.5) = 0.405
    assert _metrics(at)["Score"] == "0.405"
    at.button(key="confidence.reset").click().run()
    assert _metrics(at)["Score"] == "0.700"


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_thresholds_re_decide_the_calibration_set_instantly() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    metrics = _metrics(at)
    assert int(metrics["Items"]) >= 30 and metrics["ECE"] != ""
    # every figure of the labelled set with its 95 % interval: "0.176 (0.11–0.30)"
    for label in ("Accuracy", "ECE", "AUC", "AURC"):
        assert re.fullmatch(r"[0-9.]+ \([0-9.]+–[0-9.]+\)", metrics[label]), (label, metrics[label])
    assert any("one item moves a rate by" in c.value for c in at.caption)
    before = _level_counts(at)
    at.slider(key=wkey(at, "confidence.t_silent")).set_value(0.99).run()
    after = _level_counts(at)
    assert after.get("SILENT", 0) < before["SILENT"]
    assert sum(after.values()) == sum(before.values())
    # NOTIFY above SILENT would break the ordering: SILENT is pushed along, every slider shows the threshold in
    # use, and a note says what moved (never a silent fall-back to the defaults behind the sliders' backs).
    at.slider(key=wkey(at, "confidence.t_notify")).set_value(0.995).run()
    assert not at.exception and not at.error
    assert (
        at.slider(key=wkey(at, "confidence.t_silent")).value,
        at.slider(key=wkey(at, "confidence.t_notify")).value,
    ) == (0.995, 0.995)
    assert any("SILENT moved to 0.995" in w.value and "SILENT ≥ NOTIFY ≥ CONFIRM" in w.value for w in at.warning)
    assert _level_counts(at).get("SILENT", 0) <= after.get("SILENT", 0)
    at.slider(key=wkey(at, "confidence.t_silent")).set_value(0.3).run()  # below both others: they follow it down
    assert [at.slider(key=wkey(at, f"confidence.t_{n}")).value for n in ("silent", "notify", "confirm")] == [
        0.3,
        0.3,
        0.3,
    ]
    assert sum(_level_counts(at).values()) == sum(before.values())
    assert _level_counts(at).get("ESCALATE", 0) + _level_counts(at).get("SILENT", 0) == sum(before.values())


def _thresholds(at: AppTest) -> list[Any]:
    return [at.slider(key=wkey(at, f"confidence.t_{n}")).value for n in ("silent", "notify", "confirm")]


def test_thresholds_set_out_of_order_from_outside_the_sliders_are_refused_visibly() -> None:
    at = AppTest.from_function(_page, default_timeout=60)
    at.session_state["confidence.t_silent"] = 0.5
    at.session_state["confidence.t_notify"] = 0.8
    at.run()
    assert not at.exception
    shown = [e.value for e in at.error]
    assert len(shown) == 2 and all("SILENT 0.5, NOTIFY 0.8" in e and "Nothing below uses them" in e for e in shown)
    assert not at.metric  # no score computed with thresholds the sliders do not show


def test_plan_aggregates_every_method() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    metrics = _metrics(at)
    assert {"mean", "min", "weighted"} <= set(metrics)
    assert float(metrics["min"]) <= float(metrics["mean"])


@pytest.mark.model
def test_live_evaluation_with_the_bundled_model_is_recorded() -> None:
    from dashboard import state

    at = AppTest.from_function(_page, default_timeout=300).run()
    at.toggle(key="details.confidence.toggle").set_value(True).run()  # the per-factor table is research detail
    at.button(key="confidence.live_run").click().run()
    assert not at.exception
    settle_runs(at, "confidence.evaluate", timeout_s=300)  # the page watches the run in the registry
    runs = state.get_store().list_runs(kind="confidence.evaluate")
    assert len(runs) == 1 and runs[0].status == "finished"
    assert any(runs[0].id in md.value for md in at.markdown)
    factors = [frame.value for frame in at.dataframe if "factor" in frame.value.columns][0]
    assert set(factors["factor"]) == {"llm_self_confidence", "query_coverage", "source_agreement"}


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_live_self_evaluation_method_is_chosen_and_its_map_named() -> None:
    from engine.confidence.likelihood import CONFIDENCE
    from engine.confidence.signals import SIGNALS, SIGNALS_ID
    from engine.judgemaps import load_calibration

    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception and at.selectbox(key=wkey(at, "confidence.live_self_eval")).value == "signals"  # issue 37
    # the default judge says, outside Details, that it carries measurable signal
    judge = "Self-evaluation judge (smollm2-135m reads the answer and use-m3 compares it, whichever model is picked"
    assert any(shown(c.value).startswith(judge) and "✅ measurable signal — AUC" in shown(c.value) for c in at.caption)
    at.toggle(key="details.confidence.toggle").set_value(True).run()
    signals = load_calibration(SIGNALS, SIGNALS_ID)
    assert signals is not None
    assert any(
        shown(c.value).startswith(f"Self-evaluation and query coverage by signals · calibration {signals.label}")
        for c in at.caption
    )
    at.selectbox(key=wkey(at, "confidence.live_self_eval")).set_value("generate").run()
    assert any("Self-evaluation: gemma3-270m writes it" in shown(c.value) for c in at.caption)
    at.selectbox(key=wkey(at, "confidence.live_self_eval")).set_value("likelihood").run()
    cal = load_calibration(CONFIDENCE, "gemma3-270m")
    assert cal is not None
    assert any(
        shown(c.value).startswith(f"Self-evaluation by likelihood · calibration {cal.label}") for c in at.caption
    )
    # the judge offered says, outside Details too, that its map carries no measurable signal
    at.toggle(key="details.confidence.toggle").set_value(False).run()
    warning = "Self-evaluation judge (gemma3-270m): ⚠️ no measurable signal — the fitted map runs backwards"
    assert any(shown(c.value).startswith(warning) for c in at.caption)


def test_fallback_factors_are_said_in_plain_words() -> None:
    """A flagged factor says which factor fell back to what, how it was judged and why — from the engine's
    own fallbacks (a failed call, an answer cut off, a non-finite likelihood feature), escaped on the page."""
    import asyncio
    import math

    from dashboard import state
    from dashboard.mechanisms.confidence.live_result import _fallback_detail
    from engine.confidence.evaluation import evaluate_answer
    from engine.confidence.judges import LikelihoodSelfEvaluator, QueryCoverageCalculator
    from models.errors import ServerError
    from models.types import RawResult
    from tests.engine.test_jury_likelihood import _Scoring
    from tests.fakes.scripted import FnModel

    down = FnModel(lambda r: ServerError("**down** <b>x</b>", model_id="m"))
    coverage = asyncio.run(QueryCoverageCalculator(down).calculate("q", "a")).model_dump()
    assert _fallback_detail(coverage) == (
        "Query coverage (generated by the JSON judge) fell back to 0 and is left out of the weighted mean — "
        "the model call failed: ServerError: **down** <b>x</b>"
    )
    cut = FnModel(lambda r: RawResult(text='{"coverage": 0.', finish_reason="length"))
    coverage = asyncio.run(QueryCoverageCalculator(cut).calculate("q", "a")).model_dump()
    assert coverage["flagged"] and _fallback_detail(coverage).endswith(
        "— the model's answer was cut off at its token limit"
    )
    silent = asyncio.run(LikelihoodSelfEvaluator(_Scoring(-math.inf)).evaluate("q", "a")).model_dump()
    assert silent["flags"] == ["invalid:likelihood_features"]
    assert _fallback_detail(silent, "likelihood") == (
        "LLM self-confidence (by likelihood) fell back to 0.5 (neutral) — the likelihood features were not finite "
        "numbers (an option got no probability) — no usable signal"
    )

    live = asyncio.run(evaluate_answer(state.get_store(), down, "q", "a", self_eval="generate"))
    state.clear_reads()
    at = AppTest.from_function(_page, default_timeout=60)
    at.query_params["eval"] = live.run_id
    at.run()
    assert not at.exception
    (box,) = [c.value for c in at.caption if c.value.startswith("Fallbacks:")]
    assert "LLM self-confidence (written as JSON by the model) fell back to 0.5 (neutral)" in shown(box)
    (verdict,) = [w.value for w in at.warning if "Not trustworthy" in w.value]
    assert "self-confidence could not be measured" in shown(verdict)
    assert "query coverage could not be measured" in shown(verdict)
    assert not at.error
    assert "**down**" not in box and "\\*\\*down\\*\\*" in box  # the server's message is text


def test_the_recorded_demo_result_is_marked_not_trustworthy_and_says_what_it_stands_on() -> None:
    """Issue 25: the live demo read 0.978 SILENT while self-confidence was a flat 0.5 (the spec counts it only
    above 0.6) and coverage had failed. The score is the spec's, but the page says in plain words what it rests
    on (a tool success of 1 only because no tool was used: no "(no tool ran)" aside), marks the result not
    trustworthy, and escalates it rather than showing SILENT next to "not trustworthy"."""
    from dashboard.mechanisms.confidence.score import live_trust, shown_level
    from engine.confidence.factors import ConfidenceFactors
    from engine.confidence.settings import ConfidenceSettings

    recorded = ConfidenceFactors(source_agreement=0.935, source_count=2, llm_self_confidence=0.5, query_coverage=0.0)
    trusted, sentence = live_trust(recorded, ConfidenceSettings(), ["query_coverage"])
    assert not trusted
    assert sentence.startswith("Not trustworthy, so a person checks it (ESCALATE, not SILENT): nothing judged the")
    assert "its self-confidence did not count (the model's own rating counts only above 0.6)" in sentence
    assert "its query coverage could not be measured" in sentence
    assert "rests only on tool success 1.00, a full mark only because no tool was used; source agreement 0.94" in (
        sentence
    )
    assert "no tool ran" not in sentence and "_" not in sentence  # words, no identifiers
    assert shown_level(trusted, "SILENT") == "ESCALATE" and shown_level(True, "SILENT") == "SILENT"
    good = recorded.model_copy(update={"llm_self_confidence": 0.9})
    trusted, sentence = live_trust(good, ConfidenceSettings(), ["query_coverage"])
    assert trusted and sentence.startswith("Its query coverage could not be measured. The score")
    assert "self-confidence 0.90" in sentence


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_result_that_is_not_trustworthy_shows_escalate_never_silent() -> None:
    """C1: the page showed "SILENT — not trustworthy". A live result with no judgment of the answer now reads
    ESCALATE on the gauge and the Level metric, with what the score alone would say beside it."""
    import asyncio

    from dashboard import state
    from engine.confidence.evaluation import evaluate_answer
    from models.errors import ServerError
    from tests.fakes.scripted import FnModel

    down = FnModel(lambda r: ServerError("down", model_id="m"))
    live = asyncio.run(evaluate_answer(state.get_store(), down, "q", "a", sources=["Paris.", "Paris, France."]))
    state.clear_reads()
    at = AppTest.from_function(_page, default_timeout=60)
    at.query_params["eval"] = live.run_id
    at.run()
    assert not at.exception
    levels = [m for m in at.metric if m.label == "Level"]
    live_level = levels[-1]  # the Factors tab's own score comes first
    assert live_level.value == "ESCALATE" and "the score alone:" in (live_level.proto.delta or "")
    assert not any("SILENT" in m.value for m in levels)
    assert any("check the answer yourself" in m.value for m in at.markdown)


def test_the_score_chart_shows_each_factors_share_not_two_equal_bars() -> None:
    """C4: with no penalty the waterfall drew 'base' and 'final' as two identical bars. Now each counted
    factor's share (value × weight over the counted weights) builds up the base score, then the penalties,
    then the score; factor names read as words in both charts."""
    from dashboard.mechanisms.confidence import charts as confidence_charts
    from engine.confidence.factors import ConfidenceFactors
    from engine.confidence.score import calculate

    score = calculate(ConfidenceFactors(source_agreement=0.935, source_count=2, llm_self_confidence=0.5))
    assert not score.penalties
    breakdown = {k: v.model_dump() for k, v in score.breakdown.items()}
    fig = confidence_charts.penalty_waterfall(score.base, [], score.score, breakdown)
    bars = fig.data[0]
    assert list(bars.y) == ["tool success", "source agreement", "base score", "score"]
    shares = list(bars.x[:2])
    assert shares[0] != shares[1] and abs(sum(shares) - score.base) < 1e-9
    assert list(bars.measure) == ["relative", "relative", "total", "total"]
    assert "no penalty" in fig.layout.title.text
    names = list(confidence_charts.breakdown_bars(breakdown).data[0].y)
    assert names == ["search quality", "tool success", "source agreement", "self-confidence", "query coverage"]
    with_penalty = calculate(ConfidenceFactors(tool_success_rate=0.5))
    fig = confidence_charts.penalty_waterfall(
        with_penalty.base,
        [p.model_dump() for p in with_penalty.penalties],
        with_penalty.score,
        {k: v.model_dump() for k, v in with_penalty.breakdown.items()},
    )
    assert list(fig.data[0].y)[-3:] == ["tool success rate 0.5", "no sources", "score"]


def test_after_a_reload_the_form_shows_the_settings_of_the_run_it_reattached_to() -> None:
    """F1: a page opened on a run's URL shows that run's query, answer, sources, sampling, self-evaluation,
    thresholds and weights, so the next Evaluate runs the same evaluation; a later change stays the user's."""
    from dashboard import state
    from engine.confidence.evaluation import EvaluationConfig
    from engine.confidence.settings import ConfidenceSettings, LevelThresholds
    from engine.events import run_context

    settings = ConfidenceSettings(
        thresholds=LevelThresholds(silent=0.95, notify=0.8, confirm=0.5), weight_tool_success=1.5
    )
    config = EvaluationConfig(
        model_id="gemma3-270m",
        query="Who wrote Hamlet?",
        answer="Shakespeare.",
        sources=["Hamlet is by Shakespeare.", "Shakespeare wrote it."],
        sampling_k=2,
        self_eval="likelihood",
        settings=settings,
    )
    with run_context(state.get_store(), "confidence.evaluate", config.model_dump(mode="json")) as run:
        run.summary = {}
    state.clear_reads()
    at = AppTest.from_function(_page, default_timeout=60)
    at.query_params["eval"] = run.run_id
    at.run()
    assert not at.exception and not at.error
    assert at.text_input(key=wkey(at, "confidence.live_query")).value == "Who wrote Hamlet?"
    assert at.text_area(key=wkey(at, "confidence.live_answer")).value == "Shakespeare."
    assert (
        at.text_area(key=wkey(at, "confidence.live_sources")).value
        == "Hamlet is by Shakespeare.\nShakespeare wrote it."
    )
    assert at.slider(key=wkey(at, "confidence.live_k")).value == 2
    assert at.selectbox(key=wkey(at, "confidence.live_self_eval")).value == "likelihood"
    assert [at.slider(key=wkey(at, f"confidence.t_{n}")).value for n in ("silent", "notify", "confirm")] == [
        0.95,
        0.8,
        0.5,
    ]
    assert at.number_input(key=wkey(at, "confidence.weight_tool_success")).value == 1.5
    assert (
        at.number_input(key=wkey(at, "confidence.weight_tool_success")).label == "tool success"
    )  # words, not identifiers
    at.text_input(key=wkey(at, "confidence.live_query")).set_value("Mine").run()  # the user's change stays theirs
    assert at.text_input(key=wkey(at, "confidence.live_query")).value == "Mine"


def test_a_factor_not_counted_says_why_next_to_its_slider() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    notes = [shown(c.value) for c in at.caption if c.value.startswith("⊘ not counted")]
    assert any("counts only above" in n for n in notes), notes
    at.slider(key=wkey(at, "confidence.query_coverage")).set_value(0.0).run()
    assert any("coverage counts only above 0.1" in shown(c.value) for c in at.caption)
    at.slider(key=wkey(at, "confidence.query_coverage")).set_value(0.8).run()
    assert not any("coverage counts only above" in shown(c.value) for c in at.caption)
