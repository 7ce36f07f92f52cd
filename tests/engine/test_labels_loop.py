"""The loop, on the real judge's features: a scripted labeller whose preference differs from the shipped map
(front-end performance questions are the Designer's, not the Coder's) labels 60 hands of a cast judged by the
likelihood judge on the bundled Gemma 3 270M + SmolLM2-135M (recorded once: data/recordings/
labels-designer-perf.jsonl, `python -m engine.handraise.scripted_labeller --record`; replayed here with no model
call). The map refitted from those labels beats the shipped map on the labeller's held-out labels with a significant
paired test; saved, it is used only once adopted, and every version (the shipped one too) can be restored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.handraise.judge import map_choice
from engine.handraise.label_refit import whatif_map
from engine.handraise.scripted_labeller import USER, label_items, learning, load_recording, preference
from engine.judgemaps import load_calibration
from engine.labels import (
    adopt_map,
    label_queue,
    labelable_items,
    map_in_use,
    map_versions,
    refit_from_labels,
    save_candidate,
)
from engine.store import Store


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))  # adopted maps stay in the test
    s = Store(f"sqlite:///{tmp_path / 'loop.db'}")
    yield s
    s.dispose()


def test_the_recording_holds_the_real_judges_features(store: Store) -> None:
    run_id = load_recording(store)
    run = store.get_run(run_id)
    assert run is not None and run.kind == "handraise.conversation"
    calls = store.calls(run_id, limit=None)
    assert {c.model_id for c in calls} == {"gemma3-270m", "smollm2-135m"} and all(
        c.backend == "llamacpp" for c in calls
    )
    items = labelable_items(store, run)
    assert len(items) == 3 * 40  # 40 messages, 3 participants
    for item in items:
        assert {"pmi_mean", "pmi_rel", "pmi_last_rel", "pmi_max", "max_rel", "answer_cos", "own_cos"} <= set(
            item.context["features"]
        )
        assert item.context["map_id"] == "gemma3-270m+smollm2-135m" and item.context["map_version"]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_map_refitted_from_60_labels_beats_the_shipped_one_and_is_adopted_only_on_request(store: Store) -> None:
    run_id = load_recording(store)
    queue = label_queue(store, mechanism="handraise", rule="random", n=60, seed=0, user=USER, run_ids=[run_id])
    labels = label_items(store, queue)
    assert len(labels) == 60 and {lab.label for lab in labels} == {"speak", "skip"}
    assert sum(lab.label != lab.context["predicted"] for lab in labels) >= 8  # the labeller disagrees with the map

    refit = refit_from_labels(store, user=USER)
    messages = {lab.item_key.partition("/")[0] for lab in labels}
    assert refit.n_labels == 60 and refit.folds == len(messages) and refit.model_id == "gemma3-270m+smollm2-135m"
    shipped = load_calibration("handraise.likelihood", refit.model_id)
    assert refit.current is not None and shipped is not None and refit.current.version == shipped.version
    # The same held-out labels, paired: the candidate is right where the shipped map is wrong, significantly.
    assert refit.candidate_score is not None and refit.current_score is not None
    assert refit.candidate_score > refit.current_score
    comparison = refit.comparison
    assert comparison.test == "exact McNemar" and comparison.n == 60
    assert comparison.p_value is not None and comparison.p_value < 0.05, comparison
    assert comparison.discordant is not None and comparison.discordant[1] > comparison.discordant[0]
    assert refit.provenance.startswith("learnt from 60 of your approvals")
    # The map carries what the refit measured, so a page that offers it says so (not "no figure stored").
    diagnosis = refit.candidate.metrics["diagnosis"]
    assert diagnosis["mark"] == "signal", diagnosis
    assert diagnosis["evidence"]["agreement with your labels"] == round(refit.candidate_score, 4)
    # The held-out predictions agree with the figures.
    assert sum(h["candidate"] == h["label"] for h in refit.held_out) == round(refit.candidate_score * 60)

    # The What-if: how the candidate would have decided the hands already played.
    whatif = whatif_map(store, run_id, refit.candidate)
    assert len(whatif) == 3 * 40 and {w["then"] for w in whatif} == {"speak", "skip"}
    wanted = {
        i.key: preference(str(i.context["text"]), str(i.context["participant"]))
        for i in labelable_items(store, store.get_run(run_id))  # type: ignore[arg-type]
    }
    agree_then = sum(w["then"] == wanted[w["key"]] for w in whatif)
    agree_candidate = sum(w["candidate"] == wanted[w["key"]] for w in whatif)
    assert agree_candidate > agree_then

    path = save_candidate(refit)
    assert path.is_file()
    assert map_in_use("handraise", refit.model_id).version == "shipped"  # type: ignore[union-attr]
    assert map_choice("likelihood", "gemma3-270m", ["smollm2-135m"]).calibration.version == shipped.version  # type: ignore[union-attr]

    adopt_map(store, "handraise", refit.model_id, refit.candidate.version)
    in_use = map_in_use("handraise", refit.model_id)
    assert in_use is not None and in_use.version == refit.candidate.version and in_use.n_labels == 60
    assert in_use.provenance.startswith("learnt from 60 of your approvals")
    chosen = map_choice("likelihood", "gemma3-270m", ["smollm2-135m"]).calibration  # what the judge reads
    assert (
        chosen is not None
        and chosen.version == refit.candidate.version
        and "is:designer" in chosen.maps["relevance"].features
    )

    adopt_map(store, "handraise", refit.model_id, "shipped")  # restore the shipped map
    assert [v.version for v in map_versions("handraise", refit.model_id)] == ["shipped", refit.candidate.version]
    assert map_choice("likelihood", "gemma3-270m", ["smollm2-135m"]).calibration.version == shipped.version  # type: ignore[union-attr]


def test_agreement_with_the_labeller_rises_by_ten_points_from_40_approvals(store: Store) -> None:
    run_id = load_recording(store)
    result = learning(store, run_id, n=40, seed=0)
    assert result.held_out == 80
    assert result.gain_points >= 10, result


def test_the_labeller_gives_front_end_performance_to_the_designer() -> None:
    text = "Our JavaScript bundle is 2 MB. How do we shrink it with tree shaking and code splitting?"
    assert preference(text, "designer") == "speak" and preference(text, "coder") == "skip"
    assert preference(text, "researcher") == "skip"


def test_a_refit_that_cannot_be_made_says_why(store: Store) -> None:
    from engine.labels import LabelError

    with pytest.raises(LabelError, match="at least 10 are needed"):
        refit_from_labels(store, user=USER)
    run_id = load_recording(store)
    label_items(store, label_queue(store, mechanism="handraise", rule="random", n=20, user=USER, run_ids=[run_id]))
    with pytest.raises(LabelError, match="with_split: the shipped split's features need the judge model"):
        refit_from_labels(store, user=USER, with_split=True)
    with pytest.raises(LabelError, match="mechanism"):
        refit_from_labels(store, mechanism="jury")
    with pytest.raises(LabelError, match="no version"):
        adopt_map(store, "handraise", "gemma3-270m+smollm2-135m", "20000101T000000Z")


@pytest.mark.model  # the packaged embedder (MiniLM, for novelty); the Gemma and SmolLM2 calls are replayed
def test_the_hand_raise_judge_decides_with_the_adopted_map(store: Store) -> None:
    import asyncio

    from engine.handraise.cast import DEFAULT_CAST, Turn
    from engine.handraise.decisions import HandRaiseConfig, decide_hands
    from engine.handraise.judge import WillJudge
    from models.registry import ModelHub

    run_id = load_recording(store)
    label_items(store, label_queue(store, mechanism="handraise", rule="random", n=60, user=USER, run_ids=[run_id]))
    refit = refit_from_labels(store, user=USER)
    save_candidate(refit)
    adopt_map(store, "handraise", refit.model_id, refit.candidate.version)
    # A front-end performance message the shipped map gave to the Coder and the candidate gives to the Designer.
    whatif = {w["key"]: w for w in whatif_map(store, run_id, refit.candidate)}
    items = {i.key: i for i in labelable_items(store, store.get_run(run_id))}  # type: ignore[arg-type]
    turn = next(
        k.partition("/")[0]
        for k, w in whatif.items()
        if k.endswith("/coder")
        and w["then"] == "speak"
        and w["candidate"] == "skip"
        and whatif[k.replace("/coder", "/designer")]["candidate"] == "speak"
    )
    text = str(items[f"{turn}/coder"].context["text"])
    hub = ModelHub(call_log=store)
    config = HandRaiseConfig(context_turns=1, gate=False)  # the recording predates the gate: replayed as it was
    judge = WillJudge(DEFAULT_CAST, lambda m: hub.get(m, replay=True), config)
    components, facts = asyncio.run(judge.judge([Turn("user", text)]))
    assert facts.calls == 3 and all(f"calibration:{refit.candidate.version}" in c.flags for c in components)
    hands = {h.model: h for h in decide_hands(components, config)}
    assert hands["designer"].status == "raised" and hands["coder"].status == "lowered"
    assert preference(text, "designer") == "speak" and preference(text, "coder") == "skip"
    adopt_map(store, "handraise", refit.model_id, "shipped")
    shipped_components, _ = asyncio.run(judge.judge([Turn("user", text)]))
    assert all(f"calibration:{refit.current.version}" in c.flags for c in shipped_components)  # type: ignore[union-attr]
    assert {h.model: h.status for h in decide_hands(shipped_components, config)}["coder"] == "raised"
