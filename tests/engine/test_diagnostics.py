"""engine/diagnostics.py: the three marks decided from intervals and signs, computed by hand here; the shipped
maps' stored diagnoses equal a fresh computation; `judgelab models judges` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine import diagnostics as dx
from engine.judgemaps import CALIBRATION_DIR, Calibration, FittedMap


def test_accuracy_whose_interval_contains_chance_has_no_measurable_signal() -> None:
    # 2 of 8 right with chance 1/3: Wilson (0.07–0.59) contains 0.33
    d = dx.accuracy_vs_chance("jury", 2, 8, 1 / 3)
    assert d.mark == "no_signal" and "contains chance (0.33)" in d.text
    assert d.evidence["accuracy_ci"] == pytest.approx([0.0715, 0.5907], abs=1e-4)
    # 7 of 14 against the same chance: still inside
    assert dx.accuracy_vs_chance("jury", 7, 14, 1 / 3).mark == "no_signal"
    # 28 of 60 (the split's leave-one-case-out): 0.35–0.59 clears 0.33
    assert dx.accuracy_vs_chance("jury", 28, 60, 1 / 3).mark == "signal"
    assert dx.accuracy_vs_chance("x", 0, 20, 0.5).text.endswith("worse than guessing")
    assert dx.accuracy_vs_chance("x", 0, 0, 0.5).mark == "undecided"


def test_auc_interval_from_class_counts() -> None:
    # Hanley & McNeil (1982) worked example: A = 0.8, 50 and 50 → SE ≈ 0.0442
    interval = dx.hanley_mcneil(0.8, 50, 50)
    assert interval is not None and (interval.high - interval.low) / 2 / 1.96 == pytest.approx(0.0442, abs=5e-4)
    assert dx.auc_vs_chance("rubric", 0.53, dx.hanley_mcneil(0.53, 14, 15), 29).mark == "no_signal"
    assert dx.auc_vs_chance("rubric", 0.2, dx.hanley_mcneil(0.2, 40, 40), 80).text.endswith("it ranks backwards")
    assert dx.auc_vs_chance("skip", 0.91, dx.hanley_mcneil(0.91, 73, 87), 160).mark == "signal"
    assert dx.hanley_mcneil(0.9, 0, 10) is None


def test_a_wrong_signed_coefficient_means_the_map_runs_backwards() -> None:
    def cal(coef: float) -> Calibration:
        fitted = FittedMap(kind="logistic", features=["pmi_supported"], coef=[coef])
        return Calibration(name="confidence.likelihood", model_id="m", version="1", maps={"supported": fitted})

    assert dx.wrong_signs(cal(-0.2)) == ["supported.pmi_supported (-0.200)"]
    assert dx.calibration_diagnosis(cal(-0.2)).mark == "no_signal"
    assert dx.wrong_signs(cal(0.2)) == []


def test_flat_scale() -> None:
    flat = dx.flat_scale("rubric", [2.9, 3.0, 3.0, 3.1, 3.0, 3.2], cutoffs=(2.5, 4.0))
    assert flat.mark == "flat_scale" and "within 0." in flat.text
    # spread out, but every score on one side of every cut-off: the level never changes
    below = dx.flat_scale("rubric", [1.0, 1.5, 2.0, 2.4, 1.2, 2.3], cutoffs=(2.5, 4.0))
    assert below.mark == "flat_scale" and "never cross a cut-off" in below.text
    assert dx.flat_scale("rubric", [1, 2, 3, 4, 5, 2, 4], cutoffs=(2.5, 4.0)).mark == "signal"
    # compressed (IQR 0.3) but a cut-off splits the middle half: typical lines get different levels
    compressed = dx.flat_scale("rubric", [3.2, 3.4, 3.45, 3.55, 3.6, 3.8, 4.05], cutoffs=(3.5, 4.0))
    assert compressed.evidence["iqr"] < 0.5 and compressed.mark == "signal"
    assert dx.flat_scale("rubric", [3.0], cutoffs=(2.5,)).mark == "undecided"
    assert dx.identical_seats("jury", 3).mark == "identical"


def test_every_shipped_map_stores_the_diagnosis_a_fresh_computation_gives() -> None:
    """The stored diagnosis cannot drift from its evidence: recomputed from the map and its split, it is equal."""
    files = sorted(CALIBRATION_DIR.glob("*.json"))
    assert files
    for path in files:
        cal = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
        stored = cal.metrics["diagnosis"]
        fresh = dx.calibration_diagnosis(cal).to_dict()
        assert json.loads(json.dumps(fresh)) == stored, path.name
    marks = {d.judge: d.mark for d in dx.shipped_diagnoses()}
    assert marks["confidence.likelihood · gemma3-270m"] == "no_signal"  # its coefficient is negative
    assert marks["skip.likelihood · gemma3-270m"] == "signal"


def test_models_judges_cli(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["models", "judges", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["mark"] for r in rows} <= set(dx.MARK_TEXT)
    backwards = next(r for r in rows if r["judge"].startswith("confidence.likelihood"))
    assert backwards["label"] == "⚠️ no measurable signal" and "runs backwards" in backwards["text"]
    text = CliRunner().invoke(app, ["models", "judges"]).output
    assert "no measurable signal" in text and "skip.likelihood" in text
    # then the director rubric, from the shipped scorecard's stored diagnoses (it has no map of its own)
    from engine.experiments.scorecard import shipped_scorecard

    shipped = shipped_scorecard()
    assert shipped is not None
    stored = [
        r["metrics"][k]
        for r in shipped["rows"]
        if r["role"] == "director" and not r["error"]
        for k in ("signal", "scale")
    ]
    rubric = [r for r in rows if r["judge"].startswith("director rubric · ")]
    assert rubric == stored and len(rubric) >= 2
