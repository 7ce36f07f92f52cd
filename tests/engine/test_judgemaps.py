"""Fitted maps of several features, with their held-out AUC, and the shipped skip map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.judgemaps import cross_validated_auc, fit_single_map, load_calibration, save_calibration


def _rows(n: int = 60) -> tuple[list[dict[str, float]], list[bool]]:
    rows, labels = [], []
    for i in range(n):
        gold = i % 2 == 0
        rows.append({"a": (1.0 if gold else -1.0) + 0.3 * ((i * 7) % 5 - 2), "b": 0.5 * ((i * 3) % 4 - 1.5)})
        labels.append(gold)
    return rows, labels


def test_a_map_of_several_features_is_fitted_with_its_held_out_auc(tmp_path: Path) -> None:
    rows, labels = _rows()
    source = tmp_path / "split.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    cal = fit_single_map("skip.likelihood", "m", "respond", ["a", "b"], rows, labels, source)
    m = cal.maps["respond"]
    assert m.features == ["a", "b"] and m.coef[0] > 0  # the informative feature pushes towards respond
    assert cal.metrics["cv_folds"] == "5 stratified" and 0.9 <= cal.metrics["cv_auc"] <= 1.0
    assert cal.apply("respond", {"a": 2.0, "b": 0.0}) > 0.5 > cal.apply("respond", {"a": -2.0, "b": 0.0})
    assert load_calibration(cal.name, cal.model_id, save_calibration(cal, tmp_path).parent) == cal
    # A feature with no signal gives a held-out AUC near chance, not the fit's own.
    noise = [{"b": float((i * 5) % 7)} for i in range(len(rows))]
    auc = cross_validated_auc(noise, labels, ["b"])
    assert auc is not None and auc < 0.75
    assert cross_validated_auc(rows[:6], labels[:6], ["a"]) is None  # too few of a class for five folds


def test_shipped_skip_map_reads_every_cue_and_says_how_well_it_ranked_held_out_snippets() -> None:
    from engine.skip.likelihood import SKIP, SKIP_FEATURES

    cal = load_calibration(SKIP, "gemma3-270m")
    assert cal is not None and cal.fitted_on.endswith("skip-calib.jsonl") and "benchmarks" not in cal.fitted_on
    assert cal.maps["respond"].features == SKIP_FEATURES
    assert all(c > 0 for c in cal.maps["respond"].coef)  # every cue's "wants an answer" side counts for respond
    assert cal.metrics["cv_auc"] >= 0.75
    with pytest.raises(KeyError):
        cal.apply("respond", {"pmi_need": 1.0})  # a missing cue is an error, never a silent default
    assert json.loads(json.dumps(cal.model_dump()))["metrics"]["cv_folds"] == "5 stratified"
