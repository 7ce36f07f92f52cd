"""The hand-raise embedding judge's embedder (`HandRaiseConfig.embedder`): minilm or use-m3, each through its own
fitted map; the embeddings are calls of the run under the embedder's id, replayed bit for bit. The real embedders
run here (no stand-in for them)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from dashboard.cli import app
from engine.embeddings import USE_BACKEND, USE_DIMENSION, USE_MODEL, decode_vector, embedding_request
from engine.handraise.cast import DEFAULT_CAST, Turn
from engine.handraise.decisions import DEFAULT_EMBEDDER, HandRaiseConfig
from engine.handraise.judge import WillJudge
from engine.handraise.maps import fit_calibrations
from engine.judgemaps import load_calibration
from models.errors import ReplayMiss
from models.recording import call_context
from models.registry import ModelHub

TURNS = [Turn("user", "転職の面接対策を教えてください。志望動機はどう話せばいいですか？")]
runner = CliRunner()


def test_the_default_is_the_multilingual_embedder_and_a_config_stores_it_only_for_the_embedding_judge() -> None:
    assert DEFAULT_EMBEDDER == HandRaiseConfig().embedder == "use-m3"
    embedding = HandRaiseConfig(judge_method="embedding", embedder="minilm")
    assert embedding.model_dump(mode="json")["embedder"] == "minilm"
    assert HandRaiseConfig.model_validate(embedding.model_dump(mode="json")) == embedding
    # Every other judge reads no embedder setting: its config dumps (and hashes, and replays) as before.
    for method in ("likelihood", "judge", "self", "hybrid"):
        assert "embedder" not in HandRaiseConfig(judge_method=method, embedder="minilm").model_dump(mode="json")


def test_an_unknown_embedder_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="unknown embedder 'nope' — known: minilm, use-m3"):
        HandRaiseConfig(judge_method="embedding", embedder="nope")
    bench = "data/benchmarks/handraise.jsonl"
    result = runner.invoke(
        app, ["handraise", "eval", "--benchmark", bench, "--judge", "embedding", "--embedder", "nope"]
    )
    assert result.exit_code == 1
    assert "--embedder 'nope': unknown embedder 'nope' — known: minilm, use-m3" in result.output
    monkeypatch.setenv("HANDRAISE_EMBEDDER", "bert")
    result = runner.invoke(app, ["handraise", "eval", "--benchmark", bench, "--judge", "embedding"])
    assert result.exit_code == 1 and "HANDRAISE_EMBEDDER 'bert': unknown embedder 'bert'" in result.output
    result = runner.invoke(app, ["handraise", "calibrate", "--judge", "embedding", "--embedder", "use-m3,nope"])
    assert result.exit_code == 1 and "--embedder: unknown embedder 'nope' — known: minilm, use-m3" in result.output


@pytest.mark.model  # the multilingual embedder, live, then replayed
def test_use_m3_embeddings_are_recorded_under_its_id_and_replay_identically(store: Any) -> None:
    config = HandRaiseConfig(judge_method="embedding", embedder="use-m3")
    hub = ModelHub(call_log=store)
    with call_context(run_id=None, purpose="test.embedding"):
        live, facts = asyncio.run(WillJudge(DEFAULT_CAST, hub.get, config).judge(TURNS))
    recorded = store.calls(limit=None)
    # One call a distinct text (the context and the last message are the same text here, the profiles, the
    # expertise items), every one use-m3's: MiniLM does not run for this judge.
    texts = {TURNS[0].text} | {p.profile_text() for p in DEFAULT_CAST} | {e for p in DEFAULT_CAST for e in p.expertise}
    assert facts.calls == 0 and len(recorded) == len(texts)
    for call in recorded:
        request = json.loads(call.request_json)
        assert call.model_id == "use-m3" and call.backend == USE_BACKEND and call.model_name == USE_MODEL
        assert request == embedding_request(request["embed"], "use-m3") and request["embed"] in texts
        assert decode_vector(json.loads(call.parsed_json)["vector"]).size == USE_DIMENSION and call.error is None
    # The judgment went through use-m3's own map, and it reads every word piece of the Japanese message.
    version = load_calibration("handraise.embedding", "use-m3").version  # type: ignore[union-attr]
    assert all(f"calibration:{version}" in c.flags and "embedding" in c.flags for c in live)
    assert not any(f.startswith("embedder_unread:") for c in live for f in c.flags)  # it reads Japanese

    replayed, _ = asyncio.run(WillJudge(DEFAULT_CAST, lambda m: hub.get(m, replay=True), config).judge(TURNS))
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live]
    again = store.calls(limit=None)[len(recorded) :]
    assert len(again) == len(recorded) and all(c.backend == "replay" and c.model_id == "use-m3" for c in again)
    assert sorted(c.parsed_json for c in again) == sorted(c.parsed_json for c in recorded)  # bit for bit
    # The replay reads recorded vectors only: a message never recorded is a miss under use-m3, not a live embedding.
    with pytest.raises(ReplayMiss) as miss:
        asyncio.run(
            WillJudge(DEFAULT_CAST, lambda m: hub.get(m, replay=True), config).judge([Turn("user", "never said")])
        )
    assert miss.value.model_id == "use-m3"


@pytest.mark.model  # MiniLM, live
def test_minilm_chosen_is_recorded_under_its_own_id_and_map(store: Any) -> None:
    config = HandRaiseConfig(judge_method="embedding", embedder="minilm")
    hub = ModelHub(call_log=store)
    with call_context(run_id=None, purpose="test.embedding"):
        live, _ = asyncio.run(WillJudge(DEFAULT_CAST, hub.get, config).judge(TURNS))
    # MiniLM's cosines, and the gate's one multilingual vector of the message (engine/handraise/gate.py)
    assert sorted(c.model_id for c in store.calls(limit=None)).count("use-m3") == 1
    assert {c.model_id for c in store.calls(limit=None)} == {"minilm", "use-m3"}
    version = load_calibration("handraise.embedding", "minilm").version  # type: ignore[union-attr]
    assert all(f"calibration:{version}" in c.flags for c in live)
    assert any(f.startswith("embedder_unread:") for c in live for f in c.flags)  # MiniLM cannot read most kanji


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_refit_fits_one_map_per_embedder_with_held_out_figures_by_language() -> None:
    def rows(embedder: str, spread: float) -> list[dict[str, Any]]:
        return [
            {
                "item": f"i{i}",
                "cast": f"cast{i % 7}",
                "participant": pid,
                "label": pid == "a",
                "language": "ja" if i % 2 else "en",
                "embedder": embedder,
                "last_cos": (spread if pid == "a" else -spread) + 0.05 * (i % 3),
                "last_rel": spread if pid == "a" else -spread,
                "last_exp_cos": spread if pid == "a" else -spread,
                "last_exp_rel": spread if pid == "a" else -spread,
                "answer_cos": -1.0,
                "own_cos": -1.0,
            }
            for i in range(35)
            for pid in ("a", "b")
        ]

    split = rows("minilm", 0.3) + rows("use-m3", 0.4)
    cals = fit_calibrations(split, None, "split.jsonl", "0" * 64)
    assert [(c.name, c.model_id, c.n_items) for c in cals] == [
        ("handraise.embedding", "minilm", 70),
        ("handraise.embedding", "use-m3", 70),
    ]
    for cal in cals:
        m = cal.metrics
        assert m["cv_f1"] == 1.0 and m["cv_f1_ci"][1] == 1.0 > m["cv_f1_ci"][0] > 0.8 and m["cv_top1_ci"][1] == 1.0
        assert set(m["cv_by_language"]) == {"en", "ja"}
        assert m["cv_by_language"]["ja"]["items"] == 17 and m["cv_by_language"]["en"]["items"] == 18
    only = fit_calibrations(split, None, "split.jsonl", "0" * 64, embedders=["use-m3"])
    assert [c.model_id for c in only] == ["use-m3"]
    with pytest.raises(ValueError, match="no calibration rows with the features of minilm"):
        fit_calibrations(rows("use-m3", 0.4), "gemma3-270m", "split.jsonl", "0" * 64)  # the likelihood map reads MiniLM


def test_a_run_stored_before_the_embedder_setting_replays_with_minilm() -> None:
    """Its recorded vectors are MiniLM's: read back without an `embedder`, its config says minilm, not the new
    default (which would replay as a miss)."""
    from engine.handraise.decisions import HandRaiseConfig, stored_config

    assert HandRaiseConfig().embedder == "use-m3"
    assert stored_config({"judge_method": "embedding"}).embedder == "minilm"
    assert stored_config({"judge_method": "embedding", "embedder": "use-m3"}).embedder == "use-m3"
