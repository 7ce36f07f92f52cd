"""The judges' agreement with the labels, equal to a hand computation; export → import unchanged (JSONL and CSV,
hostile text included); a bad import reports its lines and writes nothing; the labelling queue's three rules."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.labels import (
    LabelImportError,
    add_label,
    agreement,
    export_labels,
    import_labels,
    label_queue,
    labelable_items,
    list_labels,
)
from engine.store import Store

DAY1 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)

# (truth, predicted, will) for ten hands at the threshold 0.6: 4 TP, 1 FN, 2 FP, 3 TN.
PAIRS = [
    ("speak", "speak", 0.9),
    ("speak", "speak", 0.8),
    ("speak", "speak", 0.7),
    ("speak", "speak", 0.65),
    ("speak", "skip", 0.2),  # the most confidently wrong: 0.40 from the cut
    ("skip", "speak", 0.95),  # 0.35 from the cut
    ("skip", "speak", 0.62),
    ("skip", "skip", 0.1),
    ("skip", "skip", 0.3),
    ("skip", "skip", 0.5),
]


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()


def _hands(store: Store, user: str = "ann") -> None:
    for i, (truth, predicted, will) in enumerate(PAIRS):
        add_label(
            store,
            mechanism="handraise",
            run_id="run-a",
            item_key=f"t{i + 1}/coder",
            label=truth,
            source="approval",
            user=user,
            context={
                "predicted": predicted,
                "will": will,
                "threshold": 0.6,
                "judge_method": "likelihood",
                "map_id": "gemma3-270m",
                "map_version": "v1",
                "text": f"message {i + 1}",
            },
            created_at=DAY1 if i < 6 else DAY2,
        )


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_agreement_equals_a_hand_computation(store: Store) -> None:
    _hands(store)
    (a,) = agreement(store, mechanism="handraise")
    assert a.judge == "likelihood:gemma3-270m@v1" and a.n == 10 and a.labels == ["speak", "skip"]
    assert a.confusion == {"speak": {"speak": 4, "skip": 1}, "skip": {"speak": 2, "skip": 3}}
    assert a.accuracy == pytest.approx(0.7)
    low, high = wilson(7, 10)
    assert (
        a.accuracy_ci is not None
        and a.accuracy_ci.low == pytest.approx(low)
        and a.accuracy_ci.high == pytest.approx(high)
    )
    # κ = (p_o − p_e) / (1 − p_e): p_o = 0.7, p_e = 0.5·0.6 + 0.5·0.4 = 0.5 → 0.4
    assert a.kappa == pytest.approx(0.4)
    assert a.kappa_ci is not None and a.kappa_ci.low < 0.4 < a.kappa_ci.high and a.kappa_ci.method == "bootstrap"
    assert a.base_rates == {"speak": (0.5, 0.6), "skip": (0.5, 0.4)}
    wrong = a.confidently_wrong
    assert [w["key"] for w in wrong] == ["t5/coder", "t6/coder", "t7/coder"]
    assert wrong[0] == {
        "key": "t5/coder",
        "run_id": "run-a",
        "label": "speak",
        "predicted": "skip",
        "probability": 0.2,
        "cut": 0.6,
        "margin": 0.4,  # |0.2 − 0.6|: how far from the cut the judge was
        "text": "message 5",
    }
    day1, day2 = a.over_time
    assert (day1["date"], day1["n"], day1["accuracy"]) == ("2026-11-20", 6, round(4 / 6, 4))
    assert (day2["date"], day2["n"], day2["accuracy"]) == ("2026-11-21", 4, 0.75)
    json.dumps(a.to_json())  # the --json shape is JSON


def test_agreement_is_per_judge_and_per_user(store: Store) -> None:
    _hands(store, "ann")
    add_label(
        store,
        mechanism="handraise",
        item_key="t1/x",
        label="skip",
        user="bob",
        context={"predicted": "skip", "judge": "other"},
    )
    add_label(store, mechanism="handraise", item_key="t2/x", label="skip", user="bob")  # no prediction: not counted
    judges = [a.judge for a in agreement(store, mechanism="handraise")]
    assert judges == ["likelihood:gemma3-270m@v1", "other"]
    (bob,) = agreement(store, mechanism="handraise", user="bob")
    assert bob.n == 1 and bob.accuracy == 1.0 and bob.kappa is None  # one value everywhere: κ undefined
    assert agreement(store, mechanism="handraise", judge="other")[0].n == 1


HOSTILE = [
    "=cmd|' /C calc'!A0",
    "'quoted",
    "+1",
    'line\nbreak, "quotes"',
    "日本語 <script>alert(1)</script>",
    "@SUM(A1)",
]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_labels_survive_export_then_import_unchanged(store: Store, tmp_path: Path, fmt: str) -> None:
    _hands(store)
    for i, text in enumerate(HOSTILE):
        add_label(
            store,
            mechanism="jury",
            item_key=f"case-{i}",
            label=text.replace("\n", " "),
            note=text,
            user=text[:20],
            context={"text": text},
        )
    add_label(store, mechanism="director", run_id=None, item_key="line3", label="retry", source="manual", user="ann")
    before = list_labels(store, latest=False)
    path = tmp_path / f"labels.{fmt}"
    path.write_text(export_labels(before, fmt), encoding="utf-8", newline="")  # type: ignore[arg-type]
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    report = import_labels(fresh, path)
    assert report.imported == len(before) and report.already_present == 0
    after = list_labels(fresh, latest=False)
    strip = [(lab.to_json()) for lab in before]
    assert [lab.to_json() for lab in after] == strip
    assert export_labels(after, fmt) == export_labels(before, fmt)  # type: ignore[arg-type]
    assert import_labels(fresh, path).imported == 0  # the same file again adds nothing
    fresh.dispose()


def test_a_bad_import_reports_its_lines_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    good = {"mechanism": "handraise", "item_key": "t1/coder", "label": "speak", "user": "ann"}
    lines = [
        json.dumps(good),
        json.dumps(good | {"label": "perhaps"}),
        "{not json",
        json.dumps(good | {"mechanism": "astrology"}),
        json.dumps(["a list"]),
        json.dumps(good | {"created_at": "yesterday"}),
        json.dumps(good | {"surprise": 1}),
        json.dumps(good | {"item_key": "t2/coder"}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabelImportError) as err:
        import_labels(store, path)
    message = str(err.value)
    assert "6 bad row(s); nothing was imported" in message
    for n, field in [
        (2, "label"),
        (3, "not JSON"),
        (4, "mechanism"),
        (5, "expected an object"),
        (6, "created_at"),
        (7, "surprise"),
    ]:
        assert f"{path}:{n}: {field}" in message
    assert f"{path}:1:" not in message and f"{path}:8:" not in message
    assert list_labels(store, latest=False) == []
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text(
        "mechanism,item_key,label\r\nhandraise,t1/coder,speak\r\nhandraise,t2/coder\r\n", encoding="utf-8"
    )
    with pytest.raises(LabelImportError, match=r"bad.csv:3: 2 cells for 3 columns"):
        import_labels(store, csv_path)
    assert list_labels(store, latest=False) == []


def _conversation_run(store: Store) -> str:
    """A stored conversation run with judged hands (the shape `open_conversation` stores)."""
    from engine.events import run_context
    from engine.handraise.cast import DEFAULT_CAST
    from engine.handraise.conversation import ConversationConfig

    config = ConversationConfig(participants=DEFAULT_CAST).model_dump(mode="json")
    wills = {"t1": (0.9, 0.59, 0.1), "t2": (0.61, 0.3, 0.05), "t3": (0.2, 0.7, 0.58)}
    with run_context(store, "handraise.conversation", config) as run:
        for turn, values in wills.items():
            run.emit(
                "user_message", turn=turn, text=f"question {turn}", mentions=[], mentionAll=False, unknownMentions=[]
            )
            run.emit(
                "hands",
                turn=turn,
                method="likelihood",
                hands=[
                    {
                        "model": p.id,
                        "relevance": w,
                        "novelty": w,
                        "confidence": w,
                        "raw_will": w,
                        "will": w,
                        "status": "raised" if w >= 0.6 else "lowered",
                        "flags": ["likelihood", "calibration:v1"],
                        "features": {"pmi_mean": w},
                    }
                    for p, w in zip(DEFAULT_CAST, values, strict=True)
                ],
            )
        return run.run_id


def test_labelable_items_and_the_queue_rules(store: Store) -> None:
    run_id = _conversation_run(store)
    items = labelable_items(store, store.get_run(run_id))  # type: ignore[arg-type]
    assert len(items) == 9 and {i.key for i in items} >= {"t1/coder", "t3/researcher"}
    first = next(i for i in items if i.key == "t1/coder")
    assert first.predicted == "speak" and first.probability == 0.9 and first.cut == 0.6
    assert first.context["features"] == {"pmi_mean": 0.9} and first.context["predicted"] == "speak"
    assert first.context["judge"] == "likelihood:gemma3-270m@v1"  # the name a label from use gets too
    nearest = label_queue(store, mechanism="handraise", rule="uncertainty", n=3, user="ann")
    assert [i.probability for i in nearest] == [0.59, 0.61, 0.58]
    strat = label_queue(store, mechanism="handraise", rule="stratified", n=4, user="ann")
    assert sorted(str(i.predicted) for i in strat) == ["skip", "skip", "speak", "speak"]
    drawn = label_queue(store, mechanism="handraise", rule="random", n=9, user="ann", seed=3)
    assert len(drawn) == 9 and drawn == label_queue(
        store, mechanism="handraise", rule="random", n=9, user="ann", seed=3
    )
    # A labelled item leaves the user's queue (not another user's).
    add_label(
        store,
        mechanism="handraise",
        run_id=run_id,
        item_key="t1/designer",
        label="skip",
        user="ann",
        context=nearest[0].context,
    )
    assert "t1/designer" not in {
        i.key for i in label_queue(store, mechanism="handraise", rule="random", n=20, user="ann")
    }
    assert "t1/designer" in {i.key for i in label_queue(store, mechanism="handraise", rule="random", n=20, user="bob")}
