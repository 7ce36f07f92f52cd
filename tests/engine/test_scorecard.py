"""The model scorecard: every role's shipped benchmark for each model and method, stored as runs; a quick
one on scripted models (any request answered from its JSON schema, deterministically), and one on the
bundled model (slow)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from engine.experiments.scorecard import ScorecardPlan, latest_scorecard, run_scorecard, targets
from engine.handraise.benchmark import top1
from engine.reliability import rank_auc
from engine.store import Store
from tests.fakes.scripted import FnModel


def schema_answer(request: Any) -> dict[str, Any]:
    """A valid answer to any structured request, a function of the request's text (so repeats agree)."""
    seed = hashlib.sha256("".join(m.content for m in request.messages).encode()).digest()
    schema = request.json_schema or {"type": "object", "properties": {}}
    defs = schema.get("$defs", {})

    def value(node: dict[str, Any], depth: int) -> Any:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        for key in ("anyOf", "oneOf"):
            if key in node:
                return value(next(n for n in node[key] if n.get("type") != "null"), depth)
        if "enum" in node:
            return node["enum"][seed[depth % 32] % len(node["enum"])]
        kind = node.get("type")
        if kind == "object":
            return {k: value(v, depth + i + 1) for i, (k, v) in enumerate(node.get("properties", {}).items())}
        if kind in ("integer", "number"):
            low, high = node.get("minimum", 0), node.get("maximum", 100)
            picked = low + (high - low) * seed[depth % 32] / 255
            return int(round(picked)) if kind == "integer" else round(picked, 3)
        if kind == "boolean":
            return bool(seed[depth % 32] % 2)
        if kind == "array":
            return [value(node.get("items", {"type": "string"}), depth + 1)]
        return "because"

    return value(schema, 0)


def scripted(store: Store) -> Any:
    models: dict[str, FnModel] = {}

    def get(model_id: str) -> FnModel:
        if model_id not in models:
            models[model_id] = FnModel(schema_answer, model_id=model_id, call_log=store)
        return models[model_id]

    return get


def test_top1_is_the_most_willing_participant_being_a_speaker() -> None:
    lines = [
        {"labels": {"a": True, "b": False}, "runs": [{"predictions": {"a": {"will": 0.9}, "b": {"will": 0.2}}}] * 2},
        {"labels": {"a": False, "b": True}, "runs": [{"predictions": {"a": {"will": 0.7}, "b": {"will": 0.1}}}]},
        {"labels": {"a": False}, "runs": [{"predictions": {"a": {"will": 0.7}}}]},  # nobody should speak: not scored
    ]
    assert top1(lines) == round(2 / 3, 4)
    tie = {"labels": {"a": True, "b": False}, "runs": [{"predictions": {"a": {"will": 0.6}, "b": {"will": 0.6}}}]}
    both = {"labels": {"a": True, "b": True}, "runs": [{"predictions": {"a": {"will": 0.6}, "b": {"will": 0.6}}}]}
    assert top1([tie]) == 0.0 and top1([both]) == 1.0  # a tie with one who should stay quiet is not first
    assert top1([]) is None


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_scorecard_on_scripted_models_stores_every_role_with_its_runs(store: Store) -> None:
    plan = ScorecardPlan(models=["gemma3-270m"], limit=2, repeats=2, can_score=lambda m: False)
    out = asyncio.run(run_scorecard(store, plan, scripted(store)))
    by_role = {(r["role"], r["method"]): r for r in out["rows"]}
    assert set(by_role) == {
        ("handraise", "judge"),
        ("jury", "generate"),
        ("director", "generate"),
        ("skip", "likelihood"),
        ("confidence", "factors"),
        ("confidence", "generate"),
    }  # likelihood methods left out: the model cannot score (its skip row is the shipped likelihood recording)
    assert all(r["error"] is None for r in out["rows"]), [r["error"] for r in out["rows"]]
    hr = by_role[("handraise", "judge")]
    base = {"f1", "top1", "consistency", "f1_ci", "top1_ci", "consistency_ci"}
    assert base <= set(hr["metrics"]) and all(k.startswith("f1_") for k in set(hr["metrics"]) - base)
    assert hr["metrics"]["consistency"] == 1.0  # a deterministic model decides alike in both repeats
    assert hr["calls"] > 0 and hr["tokens"] >= 0 and hr["latency_s"] is not None
    jury = by_role[("jury", "generate")]
    assert {"accuracy", "kappa_phase1", "kappa_final", "alpha_final", "outcome_changed_rate"} <= set(jury["metrics"])
    assert jury["calls"] == 2 * 3 * 4  # 2 cases, 3 seats, phase 1 + 3 rounds (threshold 2.0 recording)
    director = by_role[("director", "generate")]
    assert 0 <= director["metrics"]["agreement"] <= 1 and director["metrics"]["lines_scored"] >= 1
    director_run = store.get_run(director["runs"][0])
    assert director_run is not None
    rows = [e.payload for e in store.events(director_run.id) if e.type == "director_line"]  # one a line
    scored = [r for r in rows if r["rubric"] is not None]
    flagged = [r["rubric"] for r in scored if r["rules_status"] != "PASS"]
    rank = rank_auc([r["rubric"] for r in scored if r["rules_status"] == "PASS"], flagged)
    assert director["metrics"]["auc_rules_pass"] == (None if rank is None else round(rank, 3))
    skip = by_role[("skip", "likelihood")]
    assert skip["model"] == "gemma3-270m" and skip["calls"] == 0
    # The skip benchmark's own workload (the default 24 h), not a part of it: the same AUC as `bench skip.simulate`.
    from engine.skip.quality import generated_labels, judge_quality
    from engine.skip.recording import RecordedJudge
    from engine.skip.workload import WorkloadSpec, generate_workload

    recorded = RecordedJudge.load(Path(__file__).parents[2] / "data" / "recordings" / "skipcache-default.jsonl")
    expected = judge_quality(recorded, generated_labels(generate_workload(WorkloadSpec())))
    assert skip["metrics"]["auc"] == expected["auc"] and 0 < skip["metrics"]["calls_saved_pct"] < 100
    low, high = skip["metrics"]["calls_saved_pct_ci"]  # over conversation scopes, around the experiment's figure
    assert low <= skip["metrics"]["calls_saved_pct"] <= high and skip["metrics"]["replay_misses"] == 0
    assert 0.0 <= by_role[("confidence", "factors")]["metrics"]["ece"] <= 1.0
    own = by_role[("confidence", "generate")]  # the model's own self-evaluation in place of the recorded one
    assert own["model"] == "gemma3-270m" and own["calls"] == own["metrics"]["items"] == 2
    hr_calls = store.calls(run_id=hr["runs"][0], limit=100)
    assert hr_calls and {c.model_id for c in hr_calls} == {"gemma3-270m"}  # the row's model is the judge
    # every row is marked against its role's target by its interval (two cases: far too few to decide)
    for row in out["rows"]:
        mark = row["target"]
        assert mark["metric"] == targets()[row["role"]].metric
        assert mark["mark"] in {"good", "not_good", "undecided", "unmeasured"}
    assert jury["metrics"]["cases"] == 2 and jury["target"]["mark"] in {"undecided", "unmeasured"}
    for row in out["rows"]:  # every figure traces to stored runs
        assert row["runs"] and all(store.get_run(r) is not None for r in row["runs"])
    latest = latest_scorecard(store)
    assert (
        latest is not None
        and latest["run_id"] == out["run_id"]
        and latest["rows"] == json.loads(json.dumps(out["rows"]))
    )


def test_a_role_that_fails_is_a_row_with_its_error(store: Store) -> None:
    plan = ScorecardPlan(models=["no-such-model"], roles=("director",), methods={"director": ("generate",)}, limit=1)
    out = asyncio.run(run_scorecard(store, plan, lambda model_id: (_ for _ in ()).throw(KeyError(model_id))))
    (row,) = out["rows"]
    assert row["error"] and "no-such-model" in row["error"] and row["runs"] == []


@pytest.mark.model
def test_scorecard_on_the_bundled_model(store: Store) -> None:
    from engine.experiments import HubModels

    plan = ScorecardPlan(
        models=["gemma3-270m"],
        limit=2,
        repeats=1,
        methods={"handraise": ("likelihood",), "jury": ("likelihood",), "director": ("likelihood",)},
    )
    out = asyncio.run(run_scorecard(store, plan, HubModels("live")))
    assert all(r["error"] is None for r in out["rows"]), [r["error"] for r in out["rows"]]
    assert {r["role"] for r in out["rows"]} == {"handraise", "jury", "director", "skip", "confidence"}
    assert all(r["calls"] > 0 for r in out["rows"] if r["role"] in ("handraise", "jury", "director"))


def test_target_marks_follow_the_interval() -> None:
    """Good enough only when the whole interval clears the bar; not good enough when it all misses; otherwise
    undecided — computed by hand for both directions (F1 higher is better, ECE lower is better)."""
    from engine.experiments.scorecard import target_mark

    assert target_mark("handraise", {"f1": 0.8, "f1_ci": [0.72, 0.88]})["mark"] == "good"
    assert target_mark("handraise", {"f1": 0.6, "f1_ci": [0.5, 0.69]})["mark"] == "not_good"
    undecided = target_mark("jury", {"accuracy": 0.5, "accuracy_ci": [0.27, 0.73]})
    assert undecided["mark"] == "undecided" and undecided["text"] == "accuracy 0.50 (0.27–0.73) against accuracy ≥ 0.6"
    assert target_mark("confidence", {"ece": 0.05, "ece_ci": [0.02, 0.09]})["mark"] == "good"
    assert target_mark("confidence", {"ece": 0.2, "ece_ci": [0.12, 0.3]})["mark"] == "not_good"
    assert target_mark("skip", {"auc": 0.9})["mark"] == "unmeasured"  # no interval, no verdict


def test_models_of_one_role_are_compared_with_the_best_on_the_same_items(store: Store) -> None:
    """Two models through the hand-raise, jury and director benchmarks: every row but the role's best carries B − A
    with its paired test (F1 by dialogue, accuracy and the rubric's agreement with the rules by exact McNemar).
    The scripted models answer alike, so the difference is 0 and nothing is significant."""
    plan = ScorecardPlan(
        models=["gemma3-270m", "smollm2-135m"],
        roles=("handraise", "jury", "director"),
        limit=8,
        repeats=1,
        can_score=lambda m: False,
    )
    out = asyncio.run(run_scorecard(store, plan, scripted(store)))
    director = [r for r in out["rows"] if r["role"] == "director"]
    assert director[1]["versus_best"]["n"] == director[1]["metrics"]["lines_scored"]  # line by line, both scored
    for role, metric_test in (
        ("handraise", "paired bootstrap"),
        ("jury", "exact McNemar"),
        ("director", "exact McNemar"),
    ):
        rows = [r for r in out["rows"] if r["role"] == role]
        assert len(rows) == 2 and rows[0]["versus_best"] == {"best": True}
        other = rows[1]["versus_best"]
        assert other["best_model"] == "gemma3-270m" and other["test"] == metric_test
        assert other["difference"] == 0 and (other["p_value"] is None or other["p_value"] == 1.0)


def _other_recording(tmp_path: Path, flip_every: int) -> Path:
    """The shipped skip recording with every `flip_every`-th judgment reversed: another model's recording of the
    same states, judging some of them the other way."""
    source = Path(__file__).parents[2] / "data" / "recordings" / "skipcache-default.jsonl"
    lines = []
    for i, line in enumerate(source.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        if i % flip_every == 0:
            row["should_respond"] = not row["should_respond"]
        lines.append(json.dumps(row))
    path = tmp_path / "skipcache-smollm2-135m.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_skip_and_confidence_compare_models_on_the_same_items(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skip judge on a recording made with each model, and confidence with each model's own self-evaluation:
    every row but the role's best carries B − A on the same items (AUC over the shared states, ECE over the
    labelled items, both by paired bootstrap), and that difference is the rows' own figures apart."""
    import engine.skip.scorecard as scorecard
    from engine.skip.quality import generated_labels, judge_quality
    from engine.skip.recording import RecordedJudge
    from engine.skip.workload import WorkloadSpec, generate_workload

    other = _other_recording(tmp_path, flip_every=3)
    shipped = scorecard.skip_recording("gemma3-270m")
    monkeypatch.setattr(scorecard, "skip_recording", lambda m: shipped if m == "gemma3-270m" else other)
    plan = ScorecardPlan(
        models=["gemma3-270m", "smollm2-135m"], roles=("skip", "confidence"), limit=6, can_score=lambda m: False
    )
    out = asyncio.run(run_scorecard(store, plan, scripted(store)))
    rows = {(r["role"], r["model"]): r for r in out["rows"]}
    assert all(r["error"] is None for r in out["rows"]), [r["error"] for r in out["rows"]]
    best, worse = rows[("skip", "gemma3-270m")], rows[("skip", "smollm2-135m")]
    labels = generated_labels(generate_workload(WorkloadSpec()))
    assert worse["metrics"]["auc"] == judge_quality(RecordedJudge.load(other), labels)["auc"]
    assert best["metrics"]["auc"] > worse["metrics"]["auc"] and best["versus_best"] == {"best": True}
    versus = worse["versus_best"]
    assert versus["best_model"] == "gemma3-270m" and versus["test"] == "paired bootstrap"
    assert versus["difference"] == pytest.approx(worse["metrics"]["auc"] - best["metrics"]["auc"], abs=1e-3)
    low, high = versus["difference_ci"]
    assert low <= versus["difference"] <= high < 0 and versus["p_value"] < 0.05  # a third reversed: clearly worse
    confidence = [r for r in out["rows"] if r["role"] == "confidence"]
    assert [(r["model"], r["method"]) for r in confidence] == [
        (None, "factors"),
        ("gemma3-270m", "generate"),
        ("smollm2-135m", "generate"),
    ]
    top = min(confidence, key=lambda r: r["metrics"]["ece"])
    assert top["versus_best"] == {"best": True}
    for row in confidence:
        assert row["metrics"]["items"] == 6 and len(row["metrics"]["ece_ci"]) == 2
        if row is not top:
            got = row["versus_best"]
            assert got["n"] == 6 and got["test"] == "paired bootstrap"
            assert got["difference"] == pytest.approx(row["metrics"]["ece"] - top["metrics"]["ece"], abs=1e-3)


def test_a_model_without_a_skip_recording_says_how_to_make_one(store: Store) -> None:
    plan = ScorecardPlan(models=["no-recording-model"], roles=("skip",), can_score=lambda m: True)
    (row,) = asyncio.run(run_scorecard(store, plan, scripted(store)))["rows"]
    assert row["error"] == (
        "no skip recording made with no-recording-model: make one with `judgelab skip record --model "
        "no-recording-model --mode likelihood --output data/recordings/skipcache-no-recording-model.jsonl`"
    )
    assert row["target"]["mark"] == "unmeasured"


def test_scorecards_merge_by_role_model_and_method(store: Store) -> None:
    """Roles measured one command at a time make one scorecard: a new row replaces the old one of the same role,
    model and method, the others stay, and each role is compared with its best again."""
    from engine.experiments.scorecard import merge_scorecards

    first = asyncio.run(
        run_scorecard(
            store,
            ScorecardPlan(
                models=["gemma3-270m", "smollm2-135m"],
                roles=("handraise",),
                limit=2,
                repeats=1,
                can_score=lambda m: False,
            ),
            scripted(store),
        )
    )
    second = asyncio.run(
        run_scorecard(
            store,
            ScorecardPlan(
                models=["smollm2-135m"],
                roles=("handraise", "confidence"),
                limit=2,
                repeats=1,
                can_score=lambda m: False,
            ),
            scripted(store),
        )
    )
    merged = merge_scorecards(merge_scorecards(None, first, store), second, store)
    keys = [(r["role"], r["model"], r["method"]) for r in merged["rows"]]
    assert keys == [
        ("handraise", "gemma3-270m", "judge"),
        ("handraise", "smollm2-135m", "judge"),
        ("confidence", None, "factors"),
        ("confidence", "smollm2-135m", "generate"),
    ]
    assert merged["rows"][1]["runs"] == second["rows"][0]["runs"]  # replaced by the newer measurement
    assert merged["rows"][0]["runs"] == first["rows"][0]["runs"]  # kept
    assert merged["run_ids"] == [first["run_id"], second["run_id"]]
    assert merged["roles"] == ["handraise", "confidence"] and merged["models"] == ["gemma3-270m", "smollm2-135m"]
    handraise = merged["rows"][:2]
    assert sum(r.get("versus_best") == {"best": True} for r in handraise) == 1  # compared again after the merge
    assert all("versus_best" in r for r in handraise)


def test_the_director_rubrics_diagnoses_come_from_the_stored_scorecard(store: Store) -> None:
    """What the Director page and `models judges` say of a rubric: the stored diagnoses of its scorecard row (no
    measurable signal when its AUC interval holds 0.5; flat scale), or, for a row stored before the signal was,
    the same diagnosis from its AUC figures; nothing for a model and method never measured."""
    from engine.director.scorecard import rubric_diagnoses
    from engine.experiments.scorecard import scorecard_judge_diagnoses

    plan = ScorecardPlan(models=["gemma3-270m"], roles=("director",), methods={"director": ("generate",)})
    out = asyncio.run(run_scorecard(store, plan, scripted(store)))
    (row,) = out["rows"]
    found = rubric_diagnoses(store, "gemma3-270m", "generate")
    assert [d.to_dict() for d in found] == [row["metrics"]["signal"], row["metrics"]["scale"]]
    auc, (low, high) = row["metrics"]["auc_rules_pass"], row["metrics"]["auc_rules_pass_ci"]
    assert found[0].mark == ("no_signal" if low <= 0.5 <= high or high < 0.5 else "signal") and auc is not None
    assert rubric_diagnoses(store, "gemma3-270m", "likelihood", out) == []  # not measured: nothing said
    older = {"rows": [{**row, "metrics": {k: v for k, v in row["metrics"].items() if k != "signal"}}]}
    (signal, scale) = rubric_diagnoses(None, "gemma3-270m", "generate", older)
    assert signal.to_dict() == row["metrics"]["signal"] | {"evidence": signal.evidence} and scale.mark == found[1].mark
    listed = scorecard_judge_diagnoses(out)
    assert [d.judge for d in listed] == ["director rubric · gemma3-270m · generate"] * 2


def test_a_rows_latency_is_its_live_calls_not_the_replayed_ones(store: Store) -> None:
    """A scorecard measured in several sittings replays what it made before: those calls count, but their
    latency (none) does not pull down the median per call."""
    from engine.events import run_context
    from engine.experiments.scorecard import usage
    from models.recording import CallRecord

    with run_context(store, "handraise.eval", {}, name="bench") as run:
        for i, (latency, would_cost) in enumerate([(2.0, None), (4.0, None), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]):
            store.record_call(
                CallRecord(
                    run_id=run.run_id,
                    model_id="gemma3-270m",
                    backend="llamacpp",
                    request_hash=f"h{i}",
                    request={},
                    prompt_tokens=10,
                    completion_tokens=5,
                    latency_s=latency,
                    would_cost=would_cost,
                )
            )
    assert usage(store, [run.run_id]) == {"calls": 5, "replayed": 3, "tokens": 75, "latency_s": 3.0}


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_each_row_is_handed_on_as_soon_as_it_is_measured(store: Store) -> None:
    """`on_row` gets the scorecard so far after every row (the CLI writes it, so a sitting cut short keeps what
    it finished): one call a row, each with the rows before it."""
    seen: list[list[tuple[str, str | None]]] = []
    plan = ScorecardPlan(models=["gemma3-270m"], roles=("skip", "confidence"), limit=2, can_score=lambda m: False)
    out = asyncio.run(
        run_scorecard(
            store,
            plan,
            scripted(store),
            on_row=lambda so_far: seen.append([(r["role"], r["method"]) for r in so_far["rows"]]),
        )
    )
    final = [(r["role"], r["method"]) for r in out["rows"]]
    assert seen == [final[: i + 1] for i in range(len(final))] and len(final) == 3


def test_figures_by_language_are_flat_metrics_with_their_intervals() -> None:
    from engine.experiments.scorecard import by_language

    figures: dict[str, dict[str, Any] | None] = {
        "ja": {"f1": 0.82, "f1_ci": [0.67, 0.95], "top1": 0.9},
        "en": {"f1": 0.76, "f1_ci": None},
        "xx": None,
    }
    assert by_language(figures, ("f1",)) == {"f1_en": 0.76, "f1_ja": 0.82, "f1_ja_ci": [0.67, 0.95]}
    assert by_language({}, ("auc",)) == {}


def test_a_comparison_made_where_the_runs_were_is_kept_and_only_while_its_best_stands(store: Store) -> None:
    """A scorecard file merged in a store that lacks its runs keeps each row's comparison with the best it was made
    against; a new best (measured here) drops the old comparisons it cannot redo, rather than show stale ones."""
    from engine.experiments.scorecard import compare_with_best

    versus = {"best_model": "a", "best_method": "likelihood", "difference": -0.1, "p_value": 0.7}
    rows = [
        {"role": "jury", "model": "a", "method": "likelihood", "metrics": {"accuracy": 0.5}, "runs": ["gone-1"]},
        {
            "role": "jury",
            "model": "b",
            "method": "likelihood",
            "metrics": {"accuracy": 0.4},
            "runs": ["gone-2"],
            "versus_best": dict(versus),
        },
    ]
    compare_with_best(store, rows)
    assert rows[0]["versus_best"] == {"best": True} and rows[1]["versus_best"] == versus
    rows.append({"role": "jury", "model": "c", "method": "likelihood", "metrics": {"accuracy": 0.6}, "runs": ["x"]})
    compare_with_best(store, rows)
    assert rows[2]["versus_best"] == {"best": True} and "versus_best" not in rows[1]  # not against the old best
