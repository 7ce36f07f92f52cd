"""The likelihood hand-raise judge on the real bundled model, and its fitted calibration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from engine.handraise import DEFAULT_CAST, HandRaiseConfig, Turn, WillJudge, fit_calibrations
from engine.judgemaps import load_calibration, save_calibration


def test_shipped_calibrations_load_and_map_into_the_unit_interval() -> None:
    for name, model in (("handraise.likelihood", "gemma3-270m"), ("handraise.embedding", "minilm")):
        cal = load_calibration(name, model)
        assert cal is not None and cal.fitted_on.endswith("handraise-calib.jsonl")
        assert "benchmarks" not in cal.fitted_on  # never fitted on the benchmark it is reported on
        extremes: tuple[dict[str, float], ...] = (
            {"pmi_mean": -9, "pmi_rel": -9, "pmi_max": -9, "rel_cos": -1, "conf_cos": -1},
            {"pmi_mean": 9, "pmi_rel": 9, "pmi_max": 9, "rel_cos": 1, "conf_cos": 1},
        )
        for values in extremes:
            for component in ("relevance", "confidence"):
                assert 0 <= cal.apply(component, values) <= 1
        with pytest.raises(ValueError, match="non-finite"):
            cal.apply("relevance", {"pmi_mean": float("nan"), "pmi_rel": 0, "rel_cos": float("nan")})


def test_fitting_through_the_will_formula_separates_a_clear_split(tmp_path: Path) -> None:
    # Speakers have high features, the others low: the fitted maps must put the will of the first above
    # the seed's threshold and the second below it.
    rows = [
        {
            "label": i % 2 == 0,
            "pmi_mean": 2.0 if i % 2 == 0 else -2.0,
            "pmi_rel": 1.0 if i % 2 == 0 else -1.0,
            "pmi_max": 3.0 if i % 2 == 0 else -1.0,
            "rel_cos": 0.6 if i % 2 == 0 else 0.1,
            "conf_cos": 0.7 if i % 2 == 0 else 0.1,
            "answer_cos": -1.0,
        }
        for i in range(40)
    ]
    cals = fit_calibrations(rows, "m", "split.jsonl", "0" * 64)
    for cal in cals:
        assert cal.metrics["fit_f1"] == 1.0
        path = save_calibration(cal, tmp_path)
        assert json.loads(path.read_text())["version"] == cal.version
        assert load_calibration(cal.name, cal.model_id, tmp_path) == cal


@pytest.mark.slow
def test_likelihood_judge_live_on_gemma_raises_the_coders_hand_for_code(store) -> None:
    from models.catalog import load_catalog
    from models.registry import ModelHub

    hub = ModelHub(load_catalog(), call_log=store)
    judge = WillJudge(DEFAULT_CAST, hub.get, HandRaiseConfig(judge_method="likelihood"))
    turns = [Turn("user", "My Python script crashes with a KeyError when I read the JSON config. How do I debug it?")]
    components, facts = asyncio.run(judge.judge(turns))
    by = {c.model: c for c in components}
    assert all("likelihood" in c.flags and any(f.startswith("calibration:") for f in c.flags) for c in components)
    assert by["coder"].relevance > max(by["designer"].relevance, by["researcher"].relevance)
    assert facts.calls >= 1 and facts.call_ids  # every scoring call recorded
    assert all(0 <= c.relevance <= 1 and 0 <= c.confidence <= 1 and c.novelty == 1.0 for c in components)
