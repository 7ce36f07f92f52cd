"""The likelihood hand-raise judge on the real bundled model, and its fitted calibration."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.judge import WillJudge
from engine.handraise.maps import fit_calibrations
from engine.judgemaps import load_calibration, save_calibration
from tests.fakes.scripted import FnModel


def test_shipped_calibrations_load_and_map_into_the_unit_interval() -> None:
    shipped = (
        ("handraise.likelihood", "gemma3-270m"),
        ("handraise.embedding", "minilm"),
        ("handraise.embedding", "use-m3"),
    )
    for name, model in shipped:
        cal = load_calibration(name, model)
        assert cal is not None and cal.fitted_on.endswith("handraise-calib.jsonl")
        assert "benchmarks" not in cal.fitted_on  # never fitted on the benchmark it is reported on
        extremes: tuple[dict[str, float], ...] = (
            {"pmi_mean": -9.0, "pmi_rel": -9, "pmi_max": -9, "rel_cos": -1, "conf_cos": -1, "pmi_last_rel": -9}
            | {"max_rel": -9, "last_cos": -1, "last_rel": -2, "last_exp_cos": -1, "last_exp_rel": -2}
            | {"answer_cos": -1, "own_cos": -1},
            {"pmi_mean": 9.0, "pmi_rel": 9, "pmi_max": 9, "rel_cos": 1, "conf_cos": 1, "pmi_last_rel": 9}
            | {"max_rel": 9, "last_cos": 1, "last_rel": 2, "last_exp_cos": 1, "last_exp_rel": 2}
            | {"answer_cos": 1, "own_cos": 1},
        )
        assert set(cal.maps) == {"relevance", "confidence", "novelty"}
        assert cal.metrics["cv_folds"] == "5 by cast" and 0 < cal.metrics["cv_f1"] <= 1  # held-out figures shipped
        for values in extremes:
            for component in ("relevance", "confidence", "novelty"):
                assert 0 <= cal.apply(component, values) <= 1
        with pytest.raises(ValueError, match="non-finite"):
            cal.apply(
                "relevance",
                {"pmi_mean": float("nan"), "pmi_rel": 0, "pmi_last_rel": 0, "last_cos": float("nan"), "last_rel": 0},
            )


def test_fitting_through_the_will_formula_separates_a_clear_split(tmp_path: Path) -> None:
    # Speakers have high features, the others low: the fitted maps must put the will of the first above
    # the seed's threshold and the second below it.
    rows = [
        {
            "label": i % 2 == 0,
            "pmi_mean": 2.0 if i % 2 == 0 else -2.0,
            "pmi_rel": 1.0 if i % 2 == 0 else -1.0,
            "pmi_last_rel": 1.0 if i % 2 == 0 else -1.0,
            "pmi_max": 3.0 if i % 2 == 0 else -1.0,
            "max_rel": 2.0 if i % 2 == 0 else -2.0,
            "rel_cos": 0.6 if i % 2 == 0 else 0.1,
            "conf_cos": 0.7 if i % 2 == 0 else 0.1,
            "last_cos": 0.6 if i % 2 == 0 else 0.1,
            "last_rel": 0.3 if i % 2 == 0 else -0.3,
            "last_exp_cos": 0.7 if i % 2 == 0 else 0.1,
            "last_exp_rel": 0.3 if i % 2 == 0 else -0.3,
            "answer_cos": -1.0,
            "own_cos": -1.0,
        }
        for i in range(40)
    ]
    cals = fit_calibrations(rows, "m", "split.jsonl", "0" * 64)
    for cal in cals:
        assert cal.metrics["fit_f1"] == 1.0
        path = save_calibration(cal, tmp_path)
        assert json.loads(path.read_text())["version"] == cal.version
        assert load_calibration(cal.name, cal.model_id, tmp_path) == cal


def test_novelty_is_the_fitted_map_of_the_answers_given_or_the_fixed_one_without_it() -> None:
    from engine.handraise.features import cos_scale, novelty_of
    from engine.judgemaps import Calibration, FittedMap

    features = {"answer_cos": 0.35, "own_cos": 0.8, "rel_cos": 0.2}
    assert novelty_of(None, features) == 1 - cos_scale(0.35)
    bare = Calibration(name="n", model_id="m", version="v", maps={})
    assert novelty_of(bare, features) == 1 - cos_scale(0.35)
    novelty = FittedMap(kind="logistic", features=["answer_cos", "own_cos"], coef=[-2.0, -3.0], intercept=1.0)
    fitted = bare.model_copy(update={"maps": {"novelty": novelty}})
    assert novelty_of(fitted, features) == pytest.approx(1 / (1 + math.exp(-(1.0 - 0.7 - 2.4))))
    # What the participant already said itself lowers its novelty (the seed: new against the answers given).
    assert novelty_of(fitted, {"answer_cos": -1.0, "own_cos": 0.8}) < novelty_of(
        fitted, {"answer_cos": -1.0, "own_cos": -1.0}
    )


def test_cross_validation_holds_out_whole_casts() -> None:
    from engine.handraise.maps import cross_validate

    rows = [
        {
            "item": f"i{i}",
            "cast": f"cast{i % 7}",
            "participant": pid,
            "label": pid == "a",
            "x": (1.0 if pid == "a" else -1.0) + (0.1 * (i % 3)),
            "answer_cos": -1.0,
            "own_cos": -1.0,
        }
        for i in range(35)
        for pid in ("a", "b")
    ]
    out = cross_validate(rows, ["x"], ["x"])
    assert out["cv_folds"] == "5 by cast" and out["cv_f1"] == 1.0 and out["cv_top1"] == 1.0
    flipped = [r | {"label": not r["label"]} if r["cast"] == "cast0" else r for r in rows]
    assert cross_validate(flipped, ["x"], ["x"])["cv_f1"] < 1.0  # a fold it cannot learn from the others


@pytest.mark.model  # the packaged embedder
def test_embedding_features_are_roster_relative_and_see_own_answers() -> None:
    from engine.handraise.features import embedding_features

    turns = [
        Turn("user", "My Python script crashes with a KeyError."),
        Turn("coder", "Print the dict's keys before the lookup and use .get() with a default."),
        Turn("user", "Which debugger should I use to step through the Python code?"),
    ]
    feats = embedding_features(DEFAULT_CAST, turns, 3)
    by = {p.id: f for p, f in zip(DEFAULT_CAST, feats, strict=True)}
    assert abs(sum(f["last_rel"] for f in feats)) < 1e-9 and abs(sum(f["last_exp_rel"] for f in feats)) < 1e-9
    assert by["coder"]["last_rel"] > max(by["designer"]["last_rel"], by["researcher"]["last_rel"])
    assert by["coder"]["expertise"] in ("Python", "debugging")
    assert by["coder"]["own_cos"] > -1.0 and by["coder"]["answer_cos"] == -1.0  # its own answer, nobody else's
    assert by["designer"]["own_cos"] == -1.0 and by["designer"]["answer_cos"] > -1.0
    assert all(f["unread"] == 0.0 for f in feats)


@pytest.mark.model  # the packaged embedders
def test_the_embedding_judge_flags_a_message_its_embedder_cannot_read() -> None:
    config = HandRaiseConfig(judge_method="embedding", embedder="minilm")
    judge = WillJudge(DEFAULT_CAST, {}, config)  # no model is called
    english, _ = asyncio.run(judge.judge([Turn("user", "My Python test fails with a KeyError.")]))
    japanese, _ = asyncio.run(judge.judge([Turn("user", "転職の面接対策を教えてください")]))
    assert not any(f.startswith("embedder_unread:") for c in english for f in c.flags)
    shares = {f for c in japanese for f in c.flags if f.startswith("embedder_unread:")}
    assert len(shares) == 1 and float(next(iter(shares)).split(":")[1]) >= 0.2
    # The multilingual embedder (the default) reads every word piece of it: no flag.
    multilingual = WillJudge(DEFAULT_CAST, {}, config.model_copy(update={"embedder": "use-m3"}))
    read, _ = asyncio.run(multilingual.judge([Turn("user", "転職の面接対策を教えてください")]))
    assert not any(f.startswith("embedder_unread:") for c in read for f in c.flags)


@pytest.mark.model
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
    # The default judge is Gemma averaged with SmolLM2-135M-Instruct, read through that pair's own map.
    assert all("ensemble:gemma3-270m+smollm2-135m" in c.flags for c in components)
    # Nobody has answered yet: every participant's novelty is the fitted novelty map at "no answer" (−1, −1).
    cal = load_calibration("handraise.likelihood", "gemma3-270m+smollm2-135m")
    assert cal is not None and all(f"calibration:{cal.version}" in c.flags for c in components)
    fresh = round(cal.apply("novelty", {"answer_cos": -1.0, "own_cos": -1.0}), 4)
    assert all(0 <= c.relevance <= 1 and 0 <= c.confidence <= 1 and c.novelty == fresh for c in components)
    # Gemma scores both topic cues, SmolLM2 the first (the content-free baselines are cached or counted apart).
    assert facts.calls == 3


@pytest.mark.model
def test_last_message_features_score_the_message_to_answer_alone(store) -> None:
    # An unanswered design question, then a code question: the last-message features are the window features
    # of the code question on its own (the same prompts, so the same scores), and they put the coder first;
    # a window of one message costs no extra call.
    from engine.handraise.likelihood import handraise_features
    from models.catalog import load_catalog
    from models.registry import ModelHub

    model = ModelHub(load_catalog(), call_log=store).get("gemma3-270m")
    question = Turn("user", "My Python script crashes with a KeyError when it reads the config. How do I fix it?")
    window = [Turn("user", "Which font pairs well with a geometric sans for headings?"), question]
    both, calls = asyncio.run(handraise_features(model, DEFAULT_CAST, window, 3))
    alone, alone_calls = asyncio.run(handraise_features(model, DEFAULT_CAST, [question], 3))
    assert len(calls) == 4 and len(alone_calls) == 2
    for p in DEFAULT_CAST:
        assert both[p.id]["pmi_last_mean"] == pytest.approx(alone[p.id]["pmi_mean"], abs=1e-6)
        assert both[p.id]["pmi_last_rel"] == pytest.approx(alone[p.id]["pmi_rel"], abs=1e-6)
        assert alone[p.id]["pmi_last_rel"] == alone[p.id]["pmi_rel"]
    assert both["coder"]["pmi_last_rel"] > max(both["designer"]["pmi_last_rel"], both["researcher"]["pmi_last_rel"])


def _Scorer(model_id: str, bias: float, fail: Exception | None = None) -> FnModel:
    """A scripted scoring model: each option's log-probability is a function of the option and the prompt (the
    content-free baseline is the same template with "N/A"), shifted by `bias` so two scorers disagree."""
    from models.types import Request, ScoreResult

    class Scorer(FnModel):
        async def _score(self, request: Request) -> ScoreResult:
            self.requests.append(request)
            if fail is not None:
                raise fail
            prompt, options = request.prompt or "", request.options or []
            lps = [
                -1.0
                - bias * len(o) / 10
                - (0.0 if ("KeyError" in prompt and o.strip() in ("Python", "debugging")) else 2.0)
                for o in options
            ]
            return ScoreResult(logprobs=lps, token_counts=[1] * len(options), prompt_tokens=10)

    return Scorer(lambda r: "{}", model_id=model_id)


def _judge_with(models: dict, monkeypatch, **config):
    from models.base import ChatModel

    monkeypatch.setattr(ChatModel, "_BASELINES", {})
    judge = WillJudge(DEFAULT_CAST, models, HandRaiseConfig(judge_method="likelihood", **config))
    turns = [Turn("user", "My Python script crashes with a KeyError. How do I debug it?")]
    return asyncio.run(judge.judge(turns))


def test_an_ensemble_averages_each_items_pmi_over_its_models(monkeypatch) -> None:
    from engine.handraise.likelihood import handraise_features
    from models.base import ChatModel

    monkeypatch.setattr(ChatModel, "_BASELINES", {})
    a, b = _Scorer("gemma3-270m", 0.0), _Scorer("smollm2-135m", 3.0)
    turns = [Turn("user", "Old topic: which font?"), Turn("user", "My Python script raises a KeyError.")]
    fa, ca = asyncio.run(handraise_features(a, DEFAULT_CAST, turns, 3))
    fb, _ = asyncio.run(handraise_features(b, DEFAULT_CAST, turns, 3))
    both, calls = asyncio.run(handraise_features(a, DEFAULT_CAST, turns, 3, partners=[b]))
    # the judge model scores both cues, the partner the first (first: it fails before the judge spends a call),
    # on the window and on the last message alone
    assert len(ca) == 4 and [c.model_id for c in calls] == ["smollm2-135m", "gemma3-270m", "gemma3-270m"] * 2
    for p in DEFAULT_CAST:
        # linear in the item PMIs: the mean of the models (this scorer's PMI does not depend on the cue)
        for f in ("pmi_mean", "pmi_rel", "pmi_last_mean", "pmi_last_rel"):
            assert both[p.id][f] == pytest.approx((fa[p.id][f] + fb[p.id][f]) / 2, abs=1e-9)


@pytest.mark.model  # the packaged embedder (its novelty feature)
def test_the_ensemble_is_used_with_its_own_map_and_falls_back_to_the_judge_alone_flagged(monkeypatch) -> None:
    from engine.handraise.judge import ensemble_id
    from models.errors import CannotScore, ModelUnavailable

    pair = ensemble_id("gemma3-270m", ["smollm2-135m"])
    assert pair == "gemma3-270m+smollm2-135m" == ensemble_id("gemma3-270m", ["gemma3-270m", "smollm2-135m"])
    assert load_calibration("handraise.likelihood", pair) is not None  # the shipped default ensemble's map
    gemma, smol = _Scorer("gemma3-270m", 0.0), _Scorer("smollm2-135m", 3.0)
    out, facts = _judge_with({"gemma3-270m": gemma, "smollm2-135m": smol}, monkeypatch)
    assert facts.calls == 3 and len(smol.requests) == 1 + 1  # the partner's one cue (+ its baseline)
    assert all(f"ensemble:{pair}" in c.flags for c in out)
    assert max(out, key=lambda c: c.relevance).model == "coder"
    # A partner the lookup does not know, or one that cannot run: the judge model alone, with its own map.
    for models in (
        {"gemma3-270m": _Scorer("gemma3-270m", 0.0)},
        {
            "gemma3-270m": _Scorer("gemma3-270m", 0.0),
            "smollm2-135m": _Scorer("smollm2-135m", 0, ModelUnavailable("gone", model_id="smollm2-135m")),
        },
        {
            "gemma3-270m": _Scorer("gemma3-270m", 0.0),
            "smollm2-135m": _Scorer("smollm2-135m", 0, CannotScore("no log-probabilities", model_id="smollm2-135m")),
        },
    ):
        out, facts = _judge_with(models, monkeypatch)
        assert facts.calls == 2
        assert all("ensemble_unavailable:smollm2-135m" in c.flags for c in out)
        alone = load_calibration("handraise.likelihood", "gemma3-270m")
        assert alone is not None and all(f"calibration:{alone.version}" in c.flags for c in out)
    # An ensemble nobody fitted a map for: the judge model alone, flagged; none at all: no flag.
    out, facts = _judge_with({"gemma3-270m": gemma, "other": smol}, monkeypatch, likelihood_ensemble=["other"])
    assert facts.calls == 2 and all("ensemble_unmapped" in c.flags for c in out)
    out, facts = _judge_with({"gemma3-270m": gemma}, monkeypatch, likelihood_ensemble=[])
    assert facts.calls == 2 and not any(f.startswith("ensemble") for c in out for f in c.flags)


def test_item_pmi_weighs_each_model_alike_whatever_its_number_of_cues() -> None:
    from engine.likelihood import item_pmi
    from models.types import OptionScores

    def call(model_id: str, pmi: float) -> OptionScores:
        return OptionScores(
            model_id=model_id,
            options=[" a", " b"],
            logprobs=[-1.0, -2.0],
            token_counts=[1, 1],
            probabilities=[0.7, 0.3],
            baseline=[-1.0 - pmi, -2.0],
        )

    # the judge's two cues average to 2, the partner's one cue says 0: the item's PMI is 1, not (1 + 3 + 0) / 3
    assert item_pmi([call("p", 0.0), call("j", 1.0), call("j", 3.0)]) == pytest.approx([1.0, 0.0])


def test_map_choice_is_the_rule_the_judge_applies_and_the_pages_describe(tmp_path: Path, monkeypatch) -> None:
    import engine.judgemaps as judgemaps
    from engine.handraise.judge import map_choice

    pair = map_choice("likelihood", "gemma3-270m", ["gemma3-270m", "smollm2-135m"])
    assert pair.scorers == ("gemma3-270m", "smollm2-135m") and pair.map_id == "gemma3-270m+smollm2-135m"
    assert pair.calibration is not None and pair.flags == ()
    assert pair.describe().startswith("Scored by gemma3-270m + smollm2-135m. Calibration: handraise.likelihood")
    unmapped = map_choice("likelihood", "gemma3-270m", ["other"])
    assert unmapped.scorers == ("gemma3-270m",) and unmapped.flags == ("ensemble_unmapped",)
    assert unmapped.calibration is not None and unmapped.map_id == "gemma3-270m"
    assert unmapped.describe().startswith("no map for gemma3-270m+other: gemma3-270m scores alone. Scored by")
    down = map_choice("likelihood", "gemma3-270m", ["smollm2-135m"], unavailable="smollm2-135m")
    assert down.scorers == ("gemma3-270m",) and down.flags == ("ensemble_unavailable:smollm2-135m",)
    assert down.describe().startswith("smollm2-135m cannot score: gemma3-270m scores alone.")
    embedding = map_choice("embedding", "gemma3-270m")  # the default embedder's map: the multilingual USE
    assert embedding.map_id == embedding.scorers[0] == "use-m3" and embedding.calibration is not None
    assert embedding.describe().startswith("Calibration: handraise.embedding · use-m3")
    minilm = map_choice("embedding", "gemma3-270m", embedder="minilm")
    assert minilm.map_id == "minilm" and minilm.calibration is not None
    assert minilm.describe().startswith("Calibration: handraise.embedding · minilm")
    with pytest.raises(ValueError, match="unknown embedder 'nope' — known: minilm, use-m3"):
        map_choice("embedding", "gemma3-270m", embedder="nope")
    assert map_choice("judge", "gemma3-270m").describe() == "Calibration: none (the judge writes its numbers)"
    # Another directory: no map for the model falls back to a `default` map, then to none (uncalibrated);
    # an unreadable file is an error, not a silent fallback.
    shipped_dir = judgemaps.CALIBRATION_DIR
    monkeypatch.setattr(judgemaps, "CALIBRATION_DIR", tmp_path)
    none = map_choice("likelihood", "gemma3-270m")
    assert none.calibration is None and "uncalibrated scores, flagged" in none.describe()
    shipped = load_calibration("handraise.likelihood", "gemma3-270m", shipped_dir)
    assert shipped is not None
    save_calibration(shipped.model_copy(update={"model_id": "default"}), tmp_path)
    fallback = map_choice("likelihood", "gemma3-270m")
    assert fallback.map_id == "default" and fallback.calibration is not None
    (tmp_path / "handraise.likelihood.gemma3-270m.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a valid calibration file"):
        map_choice("likelihood", "gemma3-270m")
