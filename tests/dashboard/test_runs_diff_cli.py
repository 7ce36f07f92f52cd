"""`judgelab runs diff` and `runs compare`: which items flipped between two stored runs of one kind, with
both outputs, and B − A with its paired interval and exact p-value — computed by hand here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.events import run_context
from engine.outcomes import diff_runs
from engine.store import Store

runner = CliRunner()

# 14 cases: A right on 7, B on 12; A right & B wrong on 1 case (6), A wrong & B right on 6 (7–12), both wrong on 13.
A_RIGHT = [True] * 6 + [True] + [False] * 6 + [False]
B_RIGHT = [True] * 6 + [False] + [True] * 6 + [False]


def _jury_item(n: int, right: bool) -> dict[str, Any]:
    gold = "unsafe_fail" if n % 2 else "safe_pass"
    other = "safe_pass" if gold == "unsafe_fail" else "unsafe_fail"
    verdict = gold if right else other
    return {
        "id": f"case-{n:02d}",
        "run_id": f"jury-case-{n}",
        "gold": gold,
        "final_verdict": verdict,
        "final_score": 0.7,
        "correct": right,
        "final_positions": {"a": verdict, "b": verdict},
    }


def _store_eval(store: Store, flags: list[bool], name: str) -> str:
    with run_context(store, "jury.eval", {"cases": "x.jsonl", "name": name}) as run:
        for n, right in enumerate(flags):
            run.emit("jury_eval_item", **_jury_item(n, right))
    return run.run_id


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def two_evals() -> tuple[str, str]:
    store = Store()
    ids = _store_eval(store, A_RIGHT, "a"), _store_eval(store, B_RIGHT, "b")
    store.dispose()
    return ids


def test_runs_diff_lists_the_flipped_items_with_both_outputs(two_evals: tuple[str, str]) -> None:
    a, b = two_evals
    code, out = invoke("runs", "diff", a, b, "--json")
    assert code == 0, out
    diff = json.loads(out)
    assert diff["shared_items"] == 14 and diff["counts"] == {"right→wrong": 1, "wrong→right": 6, "label changed": 0}
    flipped = {c["key"]: c for c in diff["changes"]}
    assert flipped["case-06"]["change"] == "right→wrong"
    assert flipped["case-06"]["a"]["label"] == "safe_pass" and flipped["case-06"]["b"]["label"] == "unsafe_fail"
    assert flipped["case-06"]["a"]["link"] == "jury-case-6"  # the case's own run, to open it
    assert sorted(k for k, c in flipped.items() if c["change"] == "wrong→right") == [
        f"case-{n:02d}" for n in range(7, 13)
    ]
    accuracy = diff["comparisons"]["accuracy"]
    assert accuracy["a"] == pytest.approx(7 / 14) and accuracy["b"] == pytest.approx(12 / 14)
    assert accuracy["difference"] == pytest.approx(5 / 14)
    assert accuracy["discordant"] == [1, 6]
    assert accuracy["p_value"] == pytest.approx(2 * (1 + 7) / 2**7)  # exact McNemar: 2·P(X ≤ 1 | 7, ½)
    low, high = accuracy["difference_ci"]
    assert low < 5 / 14 < high

    code, text = invoke("runs", "diff", a, b)
    assert code == 0, text
    assert "1 right→wrong, 6 wrong→right" in text
    line = next(x for x in text.splitlines() if x.startswith("accuracy "))
    # Holm across the metrics compared (accuracy and each verdict's share): never below the raw p
    assert "p = 0.125, Holm" in line and line.endswith("(exact McNemar, 14 items)"), line
    assert any(x.startswith("share ") for x in text.splitlines())  # the rarer verdict's share


def test_runs_compare_adds_the_paired_comparison(two_evals: tuple[str, str]) -> None:
    a, b = two_evals
    code, out = invoke("runs", "compare", a, b, "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["kind"] == "jury.eval"
    assert data["config_changes"] == [{"path": "name", "change": "changed", "a": "a", "b": "b"}]
    assert data["paired"]["accuracy"]["test"] == "exact McNemar"
    assert data["paired"]["accuracy"]["p_value"] == pytest.approx(0.125)


def test_handraise_runs_compare_f1_by_dialogue() -> None:
    store = Store()

    def stored(speaks: dict[str, bool]) -> str:
        with run_context(store, "handraise.eval", {}) as run:
            for n in range(10):
                labels = {"coder": n % 2 == 0, "designer": n % 2 == 1}
                predictions = {p: {"will": 0.5, "speak": speaks[p] if n < 5 else labels[p]} for p in labels}
                run.emit(
                    "handraise_eval_item",
                    id=f"d{n}",
                    labels=labels,
                    runs=[{"predictions": predictions, "latency_s": 0.1, "tokens": 1, "calls": 1}],
                )
        return run.run_id

    a = stored({"coder": True, "designer": True})
    b = stored({"coder": False, "designer": False})
    run_a, run_b = store.get_run(a), store.get_run(b)
    assert run_a is not None and run_b is not None
    diff = diff_runs(store, run_a, run_b)
    # every metric both runs share: accuracy, F1, the will as a score of who speaks (AUC, ECE, Brier, AURC), raised
    assert diff.shared == 20 and set(diff.comparisons) == {
        "accuracy",
        "precision",
        "recall",
        "f1",
        "auc",
        "ece",
        "brier",
        "aurc",
        "share speaks",
    }
    # A says both speak in d0–d4 (5 right, 5 wrong), B says neither (5 right, 5 wrong): A's right are B's wrong
    assert diff.counts == {"right→wrong": 5, "wrong→right": 5, "label changed": 0}
    assert diff.comparisons["accuracy"].difference == pytest.approx(0.0)
    f1 = diff.comparisons["f1"]
    assert f1.a is not None and f1.b is not None and f1.b < f1.a  # B misses speakers: lower recall
    assert f1.interval is not None and f1.interval.n == 10  # resampled by dialogue, not by decision
    store.dispose()


def test_runs_diff_refuses_two_kinds_and_kinds_without_items(two_evals: tuple[str, str]) -> None:
    store = Store()
    with run_context(store, "models.prompt", {"model_id": "m"}) as run:
        pass
    with run_context(store, "models.prompt", {"model_id": "n"}) as other:
        pass
    store.dispose()
    code, out = invoke("runs", "diff", two_evals[0], run.run_id)
    assert code == 1 and "diff two runs of one kind" in out
    code, out = invoke("runs", "diff", run.run_id, other.run_id)
    assert code == 1 and "has no items to diff" in out and "jury.eval" in out
    code, out = invoke("runs", "diff", two_evals[0], "nope")
    assert code == 1 and "no run nope" in out
    code, out = invoke("runs", "compare", run.run_id, other.run_id, "--json")
    assert code == 0 and json.loads(out)["paired"] == {}


def test_two_experiment_cells_diff_and_compare_as_runs_do() -> None:
    """#38: `runs diff` / `runs compare` on two experiment cells read the outcomes each stored — the decisions that
    flipped, and every metric paired with its interval and Holm p."""
    from engine.experiments.evidence import binary_outcomes

    gold = [i % 3 == 0 for i in range(30)]
    keys = [f"d{i // 2}/p{i % 2}" for i in range(30)]
    store = Store()
    ids = []
    for wrong_every in (2, 10):
        said = [g if i % wrong_every else not g for i, g in enumerate(gold)]
        with run_context(store, "experiment.cell", {"experiment_id": "E", "cell": wrong_every}) as run:
            run.summary = {
                "row": {},
                "metrics": {},
                "outcomes": binary_outcomes(said, gold, [i // 2 for i in range(30)], keys),
            }
        ids.append(run.run_id)
    store.dispose()
    code, out = invoke("runs", "diff", *ids, "--json")
    assert code == 0, out
    diff = json.loads(out)
    assert diff["shared_items"] == 30 and diff["counts"]["wrong→right"] == 12 and diff["counts"]["right→wrong"] == 0
    assert {"accuracy", "precision", "recall", "f1", "share speaks"} <= set(diff["comparisons"])
    assert diff["comparisons"]["accuracy"]["p_holm"] >= diff["comparisons"]["accuracy"]["p_value"]
    code, out = invoke("runs", "compare", *ids)
    assert code == 0 and "paired on the 30 items both judged" in out and "accuracy 0." in out, out


def test_two_labelled_file_runs_compare_their_scores_and_decisions() -> None:
    """#38: director.eval and confidence.eval runs have no per-item right/wrong: their score against the file's
    label (AUC; ECE, Brier and AURC where it is a probability) and each decision's share compare, paired."""
    store = Store()
    ids: dict[str, list[str]] = {"director.eval": [], "confidence.eval": []}
    for shift in (0.0, 0.3):
        with run_context(store, "director.eval", {"lines": "x.jsonl", "shift": shift}) as run:
            for i in range(20):
                ok = i % 2 == 0
                run.emit(
                    "director_eval_item",
                    id=f"l{i}",
                    status="PASS" if ok or i % 3 else "RETRY",
                    acceptable=ok,
                    rubric_score=(4.0 if ok else 2.0) + shift * (i % 4),
                )
        ids["director.eval"].append(run.run_id)
        with run_context(store, "confidence.eval", {"cases": "x.jsonl", "shift": shift}) as run:
            for i in range(20):
                ok = i % 3 != 0
                run.emit(
                    "confidence_eval_item",
                    id=f"q{i}",
                    acted_level="SILENT" if ok else "ESCALATE",
                    supported=ok,
                    score=min(1.0, (0.8 if ok else 0.3) + shift * (i % 2)),
                )
        ids["confidence.eval"].append(run.run_id)
    store.dispose()
    code, out = invoke("runs", "compare", *ids["director.eval"], "--json")
    assert code == 0, out
    assert "auc" in json.loads(out)["paired"] and "ece" not in json.loads(out)["paired"]  # a 1–5 mean: no ECE
    code, out = invoke("runs", "compare", *ids["confidence.eval"], "--json")
    assert code == 0, out
    paired = json.loads(out)["paired"]
    assert {"auc", "ece", "brier", "aurc"} <= set(paired) and any(k.startswith("share ") for k in paired)
