"""Figure builders are pure: data in, figure out."""

from __future__ import annotations

from dashboard import charts
from engine.calibration import calibrate, risk_at
from engine.confidence import ConfidenceFactors, calculate


def test_confidence_figures() -> None:
    score = calculate(ConfidenceFactors(tool_success_rate=0.5))
    gauge = charts.confidence_gauge(score.score, {"silent": 0.9, "notify": 0.7, "confirm": 0.4}, "CONFIRM")
    assert gauge.data[0].value == score.score
    assert [s["range"] for s in gauge.data[0].gauge.steps] == [(0, 0.4), (0.4, 0.7), (0.7, 0.9), (0.9, 1)]
    waterfall = charts.penalty_waterfall(score.base, [p.model_dump() for p in score.penalties], score.score)
    assert list(waterfall.data[0].x) == ["base", "tool success rate 0.5", "no sources", "final"]
    assert waterfall.data[0].y[0] == score.base and waterfall.data[0].y[-1] == score.score
    bars = charts.breakdown_bars({k: v.model_dump() for k, v in score.breakdown.items()})
    assert list(bars.data[0].y) == list(score.breakdown)


def test_calibration_figures() -> None:
    scores, correct = [0.95, 0.8, 0.5, 0.2], [True, True, False, False]
    report = calibrate(scores, correct)
    fig = charts.reliability_diagram([b.model_dump() for b in report.bins], report.ece)
    assert "ECE" in fig.layout.title.text
    marks = {"silent": risk_at(scores, correct, 0.9).model_dump()}
    curve = charts.risk_coverage_curve([p.model_dump() for p in report.risk_coverage], marks)
    assert len(curve.data) == 2 and curve.data[1].name == "silent"
    shares = charts.level_shares({"SILENT": 0.25, "NOTIFY": 0.25, "CONFIRM": 0.25, "ESCALATE": 0.25})
    assert [t.name for t in shares.data] == ["SILENT", "NOTIFY", "CONFIRM", "ESCALATE"]
