"""The seed's method B (各モデルの自己判定方式) read by likelihood, and its "always RESPOND" bias corrected
(常にRESPONDしがちバイアスへの補正が必要): the features, the fitted self map, the judge's use of it, and the refit
from Speak / Skip labels."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.handraise.benchmark import parse_benchmark
from engine.handraise.cast import Participant, Turn
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.judge import WillJudge
from engine.handraise.label_refit import family, label_rows, refit_hand_raise
from engine.handraise.selfjudge import SELF_FEATURES, is_self_map, self_features, self_map_id
from engine.handraise.selfmaps import fit_self_calibration, respond_rates
from engine.judgemaps import load_calibration
from engine.labelstore import Label, LabelError
from engine.store import Store

CAST = [
    Participant(id="coder", model_id="gemma3-270m", name="Coder", expertise=["Python", "debugging"]),
    Participant(id="chef", model_id="gemma3-270m", name="Chef", expertise=["cooking", "recipes"]),
]
TURNS = [Turn(speaker="user", text="My Python script crashes with a KeyError. How do I debug it?")]


@pytest.mark.model  # the bundled Gemma scores each participant's self-judgment
def test_the_self_judgment_read_by_likelihood_on_the_bundled_model() -> None:
    """A real scoring call per participant, its own model judging itself: finite log-odds, and `self_rel` is
    each one's lead over the roster (they sum to 0)."""
    from models.registry import ModelHub

    hub = ModelHub()
    features, calls = asyncio.run(self_features(hub.get, CAST, TURNS, 3))
    assert len(calls) == 2 and {c.model_id for c in calls} == {"gemma3-270m"}
    assert all(c.options == [" RESPOND", " SKIP"] for c in calls)
    for f in features.values():
        assert all(math.isfinite(f[k]) for k in ("self_raw", "self_lo", "self_rel"))
    assert abs(sum(f["self_rel"] for f in features.values())) < 1e-9


def _self_judged(tmp_path: Path) -> tuple[list[Any], Any]:
    """The cast judged by method "self" on the bundled models, every call recorded in a store of its own."""
    from models.catalog import load_catalog
    from models.registry import ModelHub

    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    try:
        judge = WillJudge(CAST, ModelHub(load_catalog(), call_log=store).get, HandRaiseConfig(judge_method="self"))
        return asyncio.run(judge.judge(TURNS))
    finally:
        store.dispose()


@pytest.mark.model  # the bundled Gemma scores each participant's self-judgment
def test_the_judge_reads_a_base_models_self_judgment_through_its_shipped_map(tmp_path: Path) -> None:
    """Method "self" on the bundled Gemma (a base model: a written self-judgment fails) goes through the self map
    shipped for it, every call recorded, its features kept for a refit from labels."""
    shipped = load_calibration("handraise.likelihood", self_map_id("gemma3-270m"))
    assert shipped is not None and set(shipped.maps) == {"relevance", "confidence", "novelty"}
    comps, facts = _self_judged(tmp_path)
    assert facts.calls == 2 and len(facts.call_ids) == 2
    for c in comps:
        assert "self:likelihood" in c.flags and f"self_map:{self_map_id('gemma3-270m')}" in c.flags
        assert f"calibration:{shipped.version}" in c.flags and "fallback" not in c.flags
        assert {"self_raw", "self_lo", "self_rel", "answer_cos", "own_cos"} <= set(c.features)
        assert 0 <= c.relevance <= 1 and 0 <= c.confidence <= 1 and c.reason.startswith("said ")


@pytest.mark.model  # the bundled Gemma scores each participant's self-judgment
def test_an_unmapped_self_judgment_names_the_map_its_labels_would_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base model without a self map: the uncorrected P(RESPOND), flagged `self:unmapped`, and the hand names the
    map a refit from its labels would fit (`self_map:self.<model>`), so labels of unmapped hands bootstrap one."""
    from engine import judgemaps

    monkeypatch.setattr(judgemaps, "load_calibration", lambda *a, **k: None)  # no map for this model
    comps, _ = _self_judged(tmp_path)
    for c in comps:
        assert {"self:likelihood", "self:unmapped", f"self_map:{self_map_id('gemma3-270m')}"} <= set(c.flags)
        assert not any(f.startswith("calibration:") for f in c.flags) and "self_lo" in c.features


def test_an_instruction_model_still_writes_its_self_judgment() -> None:
    """An instruction model (SmolLM2 here) keeps the written SelfJudgment path: only base models are read."""
    from engine.handraise.selfjudge import reads_by_likelihood
    from models.registry import ModelHub

    hub = ModelHub()
    assert reads_by_likelihood(hub.get("gemma3-270m")) and not reads_by_likelihood(hub.get("smollm2-135m"))


def _biased_rows(n_items: int = 60, seed: int = 3) -> list[dict[str, float | str | bool]]:
    """A split where the model says RESPOND for almost everyone (raw log-odds shifted by +2), yet its calibrated
    log-odds rank the labelled speaker higher: the seed's bias, and a signal under it."""
    rng = random.Random(seed)
    rows: list[dict[str, float | str | bool]] = []
    for i in range(n_items):
        speaker = rng.randrange(3)
        los = [rng.gauss(1.0 if k == speaker else -0.5, 0.8) for k in range(3)]
        mean = sum(los) / 3
        for k, lo in enumerate(los):
            rows.append(
                {
                    "item": f"i{i}",
                    "cast": f"c{i % 10}",
                    "participant": f"p{k}",
                    "label": k == speaker,
                    "language": "en" if i % 2 else "ja",
                    "self_raw": lo + 2.0,
                    "self_lo": lo,
                    "self_rel": lo - mean,
                    "answer_cos": -1.0,
                    "own_cos": -1.0,
                }
            )
    return rows


def test_respond_rates_say_the_bias_with_intervals() -> None:
    rates = respond_rates(_biased_rows())
    assert rates["uncorrected_respond_rate"] > 0.85 and rates["label_speak_rate"] == pytest.approx(1 / 3, abs=1e-4)
    low, high = rates["uncorrected_respond_rate_ci"]
    assert low < rates["uncorrected_respond_rate"] < high  # Wilson: never a zero-width claim


def test_the_fitted_self_map_corrects_the_respond_bias_held_out() -> None:
    """Cross-validated by cast, the corrected hands go up about as often as the labels say speak (not ~90 %), and
    the F1 beats saying RESPOND for everyone."""
    rows = _biased_rows()
    cal = fit_self_calibration(rows, "gemma3-270m", "synthetic", "")
    assert cal.name == "handraise.likelihood" and cal.model_id == "self.gemma3-270m" and is_self_map(cal.model_id)
    m = cal.metrics
    assert m["cv_f1"] > m["uncorrected_f1"] + 0.1, m
    assert m["corrected_respond_rate"] < m["uncorrected_respond_rate"] - 0.3
    assert m["cv_precision"] > 0.5 and m["cv_f1_ci"][0] <= m["cv_f1"] <= m["cv_f1_ci"][1]
    assert set(m["cv_by_language"]) == {"en", "ja"}
    assert cal.maps["relevance"].features == SELF_FEATURES["relevance"]


def _label(i: int, row: dict[str, float | str | bool], map_id: str) -> Label:
    features = {k: v for k, v in row.items() if isinstance(v, float)}
    return Label(
        id=i,
        mechanism="handraise",
        run_id="run-self",
        item_key=f"{row['item']}/{row['participant']}",
        label="speak" if row["label"] else "skip",
        note="",
        user="tester",
        source="approval",
        created_at=datetime.now(UTC),
        context={"features": features, "map_id": map_id, "participant": row["participant"]},
    )


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_speak_and_skip_labels_refit_the_self_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels on hands the self-judgment raised carry its features and name its map: the refit fits a self map
    (its features, its id) and compares it with the one in use on the same held-out labels."""
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    map_id = self_map_id("gemma3-270m")
    labels = [_label(i, r, map_id) for i, r in enumerate(_biased_rows(20, seed=5))]
    assert len(label_rows(labels)) == 60 and family(map_id)[0] == SELF_FEATURES["relevance"]
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        refit = refit_hand_raise(store, labels=labels)
    finally:
        store.dispose()
    assert refit.model_id == map_id and refit.n_labels == 60
    assert refit.candidate.model_id == map_id and refit.candidate.maps["confidence"].features == ["self_lo"]
    assert refit.comparison.test == "exact McNemar" and refit.candidate_score is not None


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_self_refit_leaves_out_likelihood_labels_that_name_no_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels of the likelihood judge (no map id, none of the self features) beside self labels: the self refit
    fits on the self rows only (it crashed on the likelihood rows' missing `self_lo`); too few self rows is a
    LabelError, never a KeyError."""
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    map_id = self_map_id("gemma3-270m")
    labels = [_label(i, r, map_id) for i, r in enumerate(_biased_rows(10, seed=7))]
    likelihood = {f: 0.5 for f in ("pmi_mean", "pmi_rel", "pmi_last_rel", "pmi_max", "max_rel")}
    for i in range(12):
        row: dict[str, float | str | bool] = {
            "item": f"l{i}",
            "participant": "p0",
            "label": i % 2 == 0,
            **likelihood,
            "answer_cos": -1.0,
            "own_cos": -1.0,
        }
        lab = _label(100 + i, row, map_id)
        labels.append(dataclasses.replace(lab, context={**lab.context, "map_id": None}))
    assert len(label_rows(labels)) == 42
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        refit = refit_hand_raise(store, labels=labels)
        assert refit.model_id == map_id and refit.n_labels == 30
        with pytest.raises(LabelError, match="carry the features of map self.gemma3-270m"):
            refit_hand_raise(store, labels=labels[25:])
    finally:
        store.dispose()


def test_the_shipped_self_map_was_fitted_on_the_split_never_the_benchmark() -> None:
    shipped = load_calibration("handraise.likelihood", self_map_id("gemma3-270m"))
    assert shipped is not None and "handraise-calib" in shipped.fitted_on and "benchmark" not in shipped.fitted_on
    split = parse_benchmark(Path("data/calibration/handraise-calib.jsonl").read_text(encoding="utf-8"))
    assert shipped.n_items == sum(len(item.labels) for item in split)
    m = shipped.metrics
    # the bias as measured on the split, and its correction held out (figures in docs/handraise.md)
    assert m["uncorrected_respond_rate"] > m["label_speak_rate_ci"][1]


def test_a_bare_self_map_id_and_a_split_model_not_there_are_label_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`self.` names no model: refused by name like any other bad map id. A self map whose model the lookup lacks:
    the with-split refit says so as a LabelError (it was a KeyError)."""
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    rows = _biased_rows(10, seed=9)
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        with pytest.raises(LabelError, match="context.map_id: 'self.' is not a map id"):
            refit_hand_raise(store, labels=[_label(i, r, "self.") for i, r in enumerate(rows)])
        labels = [_label(i, r, self_map_id("nosuch")) for i, r in enumerate(rows)]
        with pytest.raises(LabelError, match="with_split: map self.nosuch"):
            refit_hand_raise(store, labels=labels, with_split=True, models={})
    finally:
        store.dispose()
