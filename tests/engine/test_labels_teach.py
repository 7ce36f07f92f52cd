"""#38 (6): the queue ordered by what a label would teach most, and κ before and after a refit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.handraise.scripted_labeller import USER, label_items, load_recording
from engine.labels import label_queue, refit_from_labels
from engine.labels.items import LabelItem, teaching
from engine.store import Store


def _item(p: float | None = None, votes: list[str] | None = None) -> LabelItem:
    return LabelItem(
        key="k", mechanism="jury", run_id="r", text="", probability=p, cut=0.5, context={"votes": votes or []}
    )


def test_a_label_teaches_most_where_the_judge_is_unsure_or_its_seats_split() -> None:
    assert teaching(_item(0.5)) == pytest.approx(1.0)
    assert teaching(_item(0.5)) > teaching(_item(0.7)) > teaching(_item(0.99)) >= 0
    assert teaching(_item(None)) == pytest.approx(0.5)  # no probability: neither sure nor unsure
    unanimous = teaching(_item(None, ["safe", "safe", "safe"]))
    split = teaching(_item(None, ["safe", "unsafe", "unsafe"]))
    three_ways = teaching(_item(None, ["safe", "unsafe", "needs_review"]))
    assert unanimous < split < three_ways
    assert three_ways == pytest.approx(1.5)
    assert teaching(_item(0.99), run_wrong=0.8) > teaching(_item(0.99))  # a run whose judge you often overrule


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    s = Store(f"sqlite:///{tmp_path / 'teach.db'}")
    yield s
    s.dispose()


def test_the_teach_queue_puts_the_judges_least_sure_hands_first(store: Store) -> None:
    run_id = load_recording(store)
    queue = label_queue(store, mechanism="handraise", rule="teach", n=20, seed=0, user=USER, run_ids=[run_id])
    rest = label_queue(store, mechanism="handraise", rule="random", n=200, seed=0, user=USER, run_ids=[run_id])
    assert len(queue) == 20
    first = [teaching(i) for i in queue]
    assert first == sorted(first, reverse=True) and min(first) >= max(teaching(i) for i in rest if i not in queue)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_refit_says_kappa_before_and_after_on_the_same_held_out_labels(store: Store) -> None:
    run_id = load_recording(store)
    label_items(
        store, label_queue(store, mechanism="handraise", rule="random", n=60, seed=0, user=USER, run_ids=[run_id])
    )
    refit = refit_from_labels(store, user=USER)
    kappa = refit.kappas()
    assert kappa["before"] is not None and kappa["after"] is not None
    for side in ("before", "after"):
        value, (low, high) = kappa[side]["kappa"], kappa[side]["kappa_ci"]
        assert -1 <= low <= value <= high <= 1
    assert refit.to_json()["kappa"] == kappa
