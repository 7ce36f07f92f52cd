"""Experiments: definitions with file:line errors, zero-call re-decisions (the jury's prefix derivation proved
against live runs on the same replayed calls), the call store serving repeated cells, resume, search, and the
local and Ray executors giving one table."""

from __future__ import annotations

import asyncio
import hashlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

import engine.jury.decisions
from engine.experiments import (
    DefinitionError,
    HubModels,
    comparable_rows,
    derive_jury,
    parse_definition,
    run_experiment,
    show_experiment,
)
from engine.jury.config import JuryConfig, Rubric, load_cases, panel_seats
from engine.jury.experiment import JuryAdapter
from engine.jury.runner import Jury, comparable
from engine.runctx import RunCancelled, RunControl, controlled
from engine.store import CANCELLED, Store
from models.backends.replay import ReplayModel, replay_spec
from models.catalog import cached_catalog
from tests.fakes.scripted import FnModel

ROOT = Path(__file__).resolve().parents[2]
JURY_CASES = ROOT / "data" / "benchmarks" / "jury.jsonl"


def _verdict_enum(schema: dict[str, Any]) -> list[str]:
    prop = schema["properties"]["verdict"]
    if "$ref" in prop:
        prop = schema["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
    return list(prop["enum"])


def jury_answer(request: Any) -> dict[str, Any]:
    """A juror whose answer is a deterministic function of the whole request: positions move between rounds
    in a way no test chose, so different settings stop at different rounds."""
    schema = request.json_schema
    h = hashlib.sha256("".join(m.content for m in request.messages).encode()).digest()
    verdicts = _verdict_enum(schema)
    verdict = verdicts[h[0] % len(verdicts)] if h[1] % 3 else verdicts[0]
    axes = (
        {k: 30 + h[2] % 60 for k in schema["$defs"]["JuryAxes"]["properties"]}
        if "$defs" in schema and "JuryAxes" in schema["$defs"]
        else {}
    )
    text_key = "statement" if "statement" in schema["properties"] else "reasoning"
    out = {text_key: f"view {h[3]}", "verdict": verdict, "score": 10 + h[4] % 85, "confidence": round(h[5] / 255, 2)}
    if "axes" in schema["properties"]:
        out["axes"] = axes
    return out


def scripted_models(store: Store) -> Any:
    """Replay with fall-through to a scripted juror recorded under the bundled model's id (so the catalog's
    replay serves the same requests afterwards, on any worker)."""
    live = FnModel(jury_answer, model_id="gemma3-270m", call_log=store)
    replay = ReplayModel(replay_spec(cached_catalog().get("gemma3-270m")), source=store, call_log=store, live=live)
    return lambda model_id: replay


def jury_yaml(tmp_path: Path, space: str, extra: str = "") -> Path:
    path = tmp_path / "jury.yaml"
    lines = [
        "name: jury test",
        "mechanism: jury",
        f"cases: {JURY_CASES}",
        "limit: 5",
        "base: {panel: local-gemma, max_tokens: 64, judge: generate}",  # the scripted juror writes JSON
        "space:",
    ]
    lines += ["  " + line for line in textwrap.dedent(space).splitlines() if line.strip()]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def load(path: Path) -> Any:
    from engine.experiments import load_definition

    return load_definition(path)


# -- definitions ---------------------------------------------------------------------------------------------


def test_errors_name_file_line_and_field(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        name: bad
        mechanism: jury
        cases: data/benchmarks/jury.jsonl
        base:
          panel: local-gemma
        space:
          consensus_threshold: [0.5, 3.5]
          stagnation_rounds: {from: 1, to: 3, step: 1}
          final_judgment_method: [majority_vote, final_judge]
          colour: [red]
        repeats: 0
        """)
    with pytest.raises(DefinitionError) as err:
        parse_definition(text, "exp.yaml")
    assert "exp.yaml:11: repeats:" in str(err.value)
    fixed = text.replace("repeats: 0\n", "")
    with pytest.raises(DefinitionError) as err:
        parse_definition(fixed, "exp.yaml")
    message = str(err.value)
    assert "exp.yaml:10: space.colour: unknown parameter of jury" in message
    assert "exp.yaml:7: space.consensus_threshold[1]: 3.5" in message
    assert "exp.yaml:9: space.final_judgment_method[1]: final_judge needs a model call" in message
    assert "space.stagnation_rounds" not in message and "colour[0]" not in message
    with pytest.raises(DefinitionError) as err:
        parse_definition("name: x\nmechanism: jury\ncases: [unclosed\n", "broken.yaml")
    assert "broken.yaml:" in str(err.value) and "not valid YAML" in str(err.value)
    with pytest.raises(DefinitionError) as err:
        parse_definition("name: x\nmechanism: handraise\ncases: nowhere.jsonl\n", "nocases.yaml")
    assert "nocases.yaml:3: cases:" in str(err.value)


def test_grid_expands_into_groups_by_call_parameters(tmp_path: Path) -> None:
    definition = load(
        jury_yaml(
            tmp_path,
            """\
        consensus_threshold: [0.67, 1.0]
        temperature: [0.0, 0.5]
        tie_policy: [severe, lenient]
        """,
            "repeats: 2\n",
        )
    )
    from engine.experiments import expand

    cells = expand(definition, JuryAdapter.decision)
    assert len(cells) == 16
    assert len({c.group for c in cells}) == 4  # temperature × repeat: the only things that need calls
    assert {tuple(c.decision_params) for c in cells} == {("consensus_threshold", "tie_policy")}


# -- the jury: every stricter stop is a prefix of the widest recording -------------------------------------


@pytest.mark.slow  # 288 replayed jury runs (~11 s): the full suite's; the fast loop keeps the sweep tests below
def test_derived_jury_equals_live_runs_on_the_same_replayed_calls(store: Store) -> None:
    cases = load_cases(JURY_CASES)[:6]
    seats = panel_seats("local-gemma")
    models = scripted_models(store)
    widest = JuryConfig(
        consensus_threshold=2.0,
        stagnation_rounds=20,
        max_discussion_rounds=3,
        final_judgment_method="majority_vote",
        max_tokens=64,
        judge="generate",  # scripted JSON jurors (under `auto` the catalog's base Gemma would score)
    )
    recorded = {c.id: asyncio.run(Jury(seats, models, widest).run(c)) for c in cases}
    live_calls = store.call_count(live_only=True)
    assert live_calls == len(cases) * 3 * 4  # 3 jurors × (phase 1 + 3 rounds), nothing stopped early
    replay = ReplayModel(replay_spec(cached_catalog().get("gemma3-270m")), source=store, call_log=store)
    usage = {
        r.id: (r.prompt_tokens, r.completion_tokens, r.cost) for r in store.calls(limit=100_000) if r.id is not None
    }
    reasons: set[str] = set()
    compared = 0
    for threshold in (0.5, 0.67, 1.0, 2.0):
        for stagnation in (1, 2):
            for rounds in (0, 1, 3):
                for method in ("majority_vote", "weighted_average"):
                    config = widest.model_copy(
                        update={
                            "consensus_threshold": threshold,
                            "stagnation_rounds": stagnation,
                            "max_discussion_rounds": rounds,
                            "final_judgment_method": method,
                            "tie_policy": "lenient",
                        }
                    )
                    for case in cases:
                        live = asyncio.run(Jury(seats, lambda m: replay, config).run(case))
                        derived = derive_jury(recorded[case.id], config, case.rubric or Rubric(), usage)
                        assert comparable(derived.model_dump(mode="json")) == comparable(
                            live.model_dump(mode="json")
                        ), (case.id, threshold, stagnation, rounds, method)
                        reasons.add(derived.termination_reason)
                        compared += 1
    assert store.call_count(live_only=True) == live_calls  # every live run above was answered by replay
    assert compared == 4 * 2 * 3 * 2 * len(cases)
    assert {"stagnation", "max_rounds", "no_discussion"} <= reasons  # the settings really stopped differently
    assert len(reasons) >= 4, reasons


def test_derived_jury_uses_the_jurys_own_stop_rules(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """No copy of the stop rules: a change to engine.jury's rule is a change to every re-decision."""

    case = load_cases(JURY_CASES)[0]
    widest = JuryConfig(
        consensus_threshold=2.0,
        stagnation_rounds=20,
        max_discussion_rounds=3,
        final_judgment_method="majority_vote",
        judge="generate",
    )
    recorded = asyncio.run(Jury(panel_seats("local-gemma"), scripted_models(store), widest).run(case))
    assert recorded.total_rounds == 3
    config = widest.model_copy(update={"stagnation_rounds": 20})
    assert derive_jury(recorded, config, case.rubric or Rubric()).termination_reason == "max_rounds"
    monkeypatch.setattr(engine.jury.decisions, "round_stop", lambda consensus, still, number, **limits: "stagnation")
    derived = derive_jury(recorded, config, case.rubric or Rubric())
    assert (derived.termination_reason, derived.total_rounds) == ("stagnation", 1)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_jury_decision_sweep_costs_no_new_call_and_repeats_are_free(tmp_path: Path, store: Store) -> None:
    definition = load(
        jury_yaml(
            tmp_path,
            """\
        consensus_threshold: [0.5, 0.67, 1.0, 2.0]
        stagnation_rounds: [1, 2]
        max_discussion_rounds: [1, 2]
        final_judgment_method: [majority_vote, weighted_average]
        """,
        )
    )
    result = asyncio.run(run_experiment(definition, store, scripted_models(store)))
    assert len(result.rows) == 32
    recording_runs = {r["recording_run"] for r in result.rows}
    assert len(recording_runs) == 1
    (recording,) = recording_runs
    one_recording = store.call_count(recording)
    assert one_recording == 5 * 3 * 3  # 5 cases, 3 jurors, phase 1 + the widest 2 rounds
    assert result.new_calls == one_recording  # 32 cells cost what one recording costs
    assert all(store.call_count(r["run_id"]) == 0 for r in result.rows)
    assert sorted({r["rounds_mean"] for r in result.rows}) != [result.rows[0]["rounds_mean"]]
    again = asyncio.run(run_experiment(definition, store, scripted_models(store)))
    assert again.new_calls == 0  # every request is served from the call store
    assert comparable_rows(again.rows) == comparable_rows([{**r, "new_calls": 0} for r in result.rows])
    shown = show_experiment(store, result.experiment_id)
    assert shown["finished"] == 32 and shown["best"] is not None


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_cancelled_experiment_resumes_and_skips_finished_cells(tmp_path: Path, store: Store) -> None:
    definition = load(
        jury_yaml(
            tmp_path,
            """\
        consensus_threshold: [0.5, 0.67, 1.0]
        temperature: [0.0, 0.3]
        """,
            "concurrency: 1\n",
        )
    )
    ctrl = RunControl(on_progress=lambda p: ctrl.cancel("test stop") if p.done >= 2 else None)
    ids: list[str] = []

    async def first() -> None:
        with controlled(ctrl):
            await run_experiment(
                definition, store, scripted_models(store), on_row=lambda row: ids.append(row["run_id"])
            )

    with pytest.raises(RunCancelled):
        asyncio.run(first())
    experiment = store.list_runs("experiment", limit=100)
    killed = next(r for r in experiment if r.kind == "experiment")
    assert killed.status == CANCELLED
    experiment_id = killed.config["experiment_id"]
    finished_before = show_experiment(store, experiment_id)["finished"]
    assert 0 < finished_before < 6
    resumed = asyncio.run(run_experiment(definition, store, scripted_models(store), resume=experiment_id))
    assert resumed.skipped == finished_before and len(resumed.rows) == 6
    assert {r["run_id"] for r in resumed.rows} >= set(ids)  # finished cells were not run again
    fresh = asyncio.run(run_experiment(definition, store, scripted_models(store)))
    assert fresh.new_calls == 0
    strip = ("new_calls",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in comparable_rows(resumed.rows)] == [
        {k: v for k, v in r.items() if k not in strip} for r in comparable_rows(fresh.rows)
    ]


def test_search_finds_the_grid_best_with_no_call(tmp_path: Path, store: Store) -> None:
    grid = load(
        jury_yaml(
            tmp_path,
            """\
        consensus_threshold: [0.5, 0.67, 1.0, 2.0]
        final_judgment_method: [majority_vote, weighted_average]
        """,
        )
    )
    table = asyncio.run(run_experiment(grid, store, scripted_models(store)))
    calls = store.call_count()
    from engine.experiments import Search

    searched = grid.model_copy(update={"search": Search(metric="accuracy", n_trials=12)})
    result = asyncio.run(run_experiment(searched, store, scripted_models(store)))
    assert len(result.trials) == 12 and result.new_calls == 0
    assert store.call_count(live_only=True) == table.new_calls
    assert store.call_count() == calls + store.call_count(result.rows[0]["recording_run"])  # one replayed recording
    best_grid = max(r["accuracy"] for r in table.rows)
    assert result.best is not None and result.best["accuracy"] == best_grid
    listed = show_experiment(store, result.experiment_id)
    assert [r["trial"] for r in listed["rows"]] == list(range(12))


# -- executors ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_instance() -> Any:
    ray = pytest.importorskip("ray")
    from engine.experiments.ray_executor import ensure_ray

    started = not ray.is_initialized()
    ensure_ray()
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.server  # a local Ray instance
@pytest.mark.xdist_group("ray")  # one local Ray at a time (make test: --dist loadgroup)
def test_local_and_ray_give_the_same_table_on_replayed_calls(tmp_path: Path, store: Store, ray_instance: Any) -> None:
    definition = load(
        jury_yaml(
            tmp_path,
            """\
        consensus_threshold: [0.67, 2.0]
        temperature: [0.0, 0.4]
        tie_policy: [severe, lenient]
        """,
        )
    )
    asyncio.run(run_experiment(definition, store, scripted_models(store)))  # record once (scripted jurors)
    replayed = definition.model_copy(update={"calls": "replay"})
    local = asyncio.run(run_experiment(replayed, store, HubModels("replay"), executor="local"))
    ray_result = asyncio.run(run_experiment(replayed, store, HubModels("replay"), executor="ray"))
    assert local.new_calls == ray_result.new_calls == 0
    assert ray_result.executor == "ray" and len(ray_result.rows) == 8
    assert comparable_rows(local.rows) == comparable_rows(ray_result.rows)
    recordings = {r["recording_run"] for r in ray_result.rows}
    assert all(store.get_run(rid).status == "finished" for rid in recordings)  # type: ignore[union-attr]
    assert all(store.call_count(rid) == 5 * 3 * 4 for rid in recordings)  # the workers' replayed calls
    from engine.experiments.ray_executor import RayExecutor

    kept = RayExecutor(keep_actors=True)
    first = asyncio.run(run_experiment(replayed, store, HubModels("replay"), executor=kept))
    workers = list(kept._workers)
    second = asyncio.run(run_experiment(replayed, store, HubModels("replay"), executor=kept))
    assert kept._workers == workers  # the actors served both experiments
    asyncio.run(kept.shutdown())
    assert comparable_rows(first.rows) == comparable_rows(second.rows) == comparable_rows(local.rows)


# -- hand raise ------------------------------------------------------------------------------------------------

HANDRAISE_CASES = ROOT / "data" / "benchmarks" / "handraise.jsonl"


def will_answer(request: Any) -> dict[str, Any]:
    """A batched will judge whose numbers are a function of the request and the participant."""
    out = {}
    for pid in request.json_schema["properties"]:
        h = hashlib.sha256(("".join(m.content for m in request.messages) + pid).encode()).digest()
        out[pid] = {
            "relevance": round(h[0] / 255, 2),
            "novelty": round(h[1] / 255, 2),
            "confidence": round(h[2] / 255, 2),
            "reason": "r",
        }
    return out


def scripted_judge(store: Store) -> Any:
    from models.catalog import ModelSpec, Profile

    def adhoc_spec(model_id: str) -> ModelSpec:
        return ModelSpec(id=model_id, backend="replay", model=model_id, profile=Profile(name=model_id))

    live = FnModel(will_answer, model_id="scripted-judge", call_log=store)
    replay = ReplayModel(replay_spec(adhoc_spec("scripted-judge")), source=store, call_log=store, live=live)
    return lambda model_id: replay


def handraise_definition(tmp_path: Path, space: str) -> Any:
    path = tmp_path / "hr.yaml"
    path.write_text(
        "\n".join(
            [
                "name: hand raise test",
                "mechanism: handraise",
                f"cases: {HANDRAISE_CASES}",
                "base: {judge_method: judge, judge_model: scripted-judge}",
                "space:",
            ]
            + ["  " + line for line in textwrap.dedent(space).splitlines() if line.strip()]
        )
        + "\n"
    )
    return load(path)


def test_handraise_decision_sweep_makes_one_call_per_case_whatever_the_cells(tmp_path: Path, store: Store) -> None:
    definition = handraise_definition(
        tmp_path,
        """\
        threshold: {from: 0.3, to: 0.7, step: 0.1}
        cooldown_per_turn: [0.0, 0.3]
        mode: [focus, brainstorm, mention_only]
        """,
    )
    result = asyncio.run(run_experiment(definition, store, scripted_judge(store)))
    assert len(result.rows) == 30
    assert result.new_calls == 24  # one batched judgment per item, for 30 cells
    assert all(store.call_count(r["run_id"]) == 0 for r in result.rows)
    assert all(r["speak_rate"] == 0 for r in result.rows if r["mode"] == "mention_only")
    focus = [r for r in result.rows if r["mode"] == "focus" and r["cooldown_per_turn"] == 0.0]
    rates = [r["speak_rate"] for r in sorted(focus, key=lambda r: r["threshold"])]
    assert rates == sorted(rates, reverse=True) and rates[0] > rates[-1]  # a higher threshold raises fewer hands
    again = asyncio.run(run_experiment(definition, store, scripted_judge(store)))
    assert again.new_calls == 0
    assert [r["f1"] for r in comparable_rows(again.rows)] == [r["f1"] for r in comparable_rows(result.rows)]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_handraise_cell_decision_is_the_engines_redecide(tmp_path: Path, store: Store) -> None:
    from engine.handraise.decisions import HandRaiseConfig, TurnRecord, redecide
    from engine.handraise.experiment import HandRaiseAdapter, decide_handraise_item

    definition = handraise_definition(tmp_path, "threshold: [0.5]")
    mech = HandRaiseAdapter()
    cases = mech.load_cases(definition)

    async def record() -> Any:
        return await mech.record(definition, cases, {}, scripted_judge(store), store, "adhoc")

    recording = asyncio.run(record())
    checked = 0
    for item in recording.items:
        if item.prior:
            continue
        for config in (
            HandRaiseConfig(threshold=0.4),
            HandRaiseConfig(threshold=0.6, mode="brainstorm"),
            HandRaiseConfig(threshold=0.5, weights={"relevance": 0.8, "novelty": 0.1, "confidence": 0.1}),
        ):
            (outcome,) = redecide(
                [TurnRecord(turn=0, components=item.components, models=item.models)], config, unrecorded="approve"
            )
            decided = decide_handraise_item(item, config)
            assert sorted(m for m, s in decided.items() if s) == sorted(outcome.speakers)
            checked += 1
    assert checked >= 30


@pytest.mark.model
def test_model_sweep_on_the_bundled_model_pays_each_request_once(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "\n".join(
            [
                "name: model sweep",
                "mechanism: handraise",
                f"cases: {HANDRAISE_CASES}",
                "limit: 2",
                "models: [gemma3-270m]",
                "base: {judge_method: judge}",  # the JSON judge, as written: the likelihood pair is tested elsewhere
                "space:",
                "  context: ['1', '3']",
                "  threshold: [0.4, 0.6]",
            ]
        )
    )
    definition = load(path)
    first = asyncio.run(run_experiment(definition, store))  # the catalog, replay with fall-through
    assert len(first.rows) == 4 and len({r["recording_run"] for r in first.rows}) == 2
    assert first.new_calls == store.call_count(live_only=True) > 0
    repeated = asyncio.run(run_experiment(definition, store))
    assert repeated.new_calls == 0  # identical requests: served from the call store
    assert [r["f1"] for r in comparable_rows(repeated.rows)] == [r["f1"] for r in comparable_rows(first.rows)]


def test_confidence_sweep_rescores_the_labelled_set_with_the_engine(tmp_path: Path, store: Store) -> None:
    import json

    from engine.confidence.factors import parse_factors
    from engine.confidence.score import calculate
    from engine.confidence.settings import ConfidenceSettings
    from engine.experiments import load_definition
    from engine.reliability import calibrate

    definition = load_definition(ROOT / "data" / "experiments" / "confidence-decisions.yaml")
    result = asyncio.run(run_experiment(definition, store))
    assert len(result.rows) == 72 and result.new_calls == 0 and store.call_count() == 0
    lines = [
        json.loads(x) for x in (ROOT / "data" / "benchmarks" / "confidence.jsonl").read_text().splitlines() if x.strip()
    ]
    row = next(
        r
        for r in result.rows
        if r["weight_self_confidence"] == 0.5
        and r["thresholds.notify"] == 0.6
        and r["weight_source_agreement"] == 0.1
        and r["thresholds.confirm"] == 0.3
    )
    settings = ConfidenceSettings(
        weight_self_confidence=0.5, weight_source_agreement=0.1, thresholds={"notify": 0.6, "confirm": 0.3}
    )
    scores = [calculate(parse_factors(x["factors"]), settings).score for x in lines]
    assert row["ece"] == round(calibrate(scores, [x["correct"] for x in lines]).ece, 4)
    assert len({r["wrong_stopped"] for r in result.rows}) > 1
    with pytest.raises(DefinitionError) as err:
        parse_definition(
            "name: x\nmechanism: confidence\ncases: data/benchmarks/confidence.jsonl\nspace:\n"
            "  thresholds.notify: [0.95]\n",
            "c.yaml",
        )
    assert "c.yaml:5: space.thresholds.notify[0]" in str(err.value)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_skip_sweep_runs_the_checker_on_recorded_judgments(store: Store) -> None:
    from engine.experiments import load_definition
    from engine.skip.config import JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
    from engine.skip.recording import RecordedJudge
    from engine.skip.simulation import simulate
    from engine.skip.workload import EPOCH, WorkloadSpec, generate_workload

    definition = load_definition(ROOT / "data" / "experiments" / "skip-windows.yaml")
    result = asyncio.run(run_experiment(definition, store))
    assert len(result.rows) == 12 and result.new_calls == 0 and store.call_count() == 0
    assert all(r["replay_misses"] == 0 for r in result.rows)
    row = next(
        r
        for r in result.rows
        if r["high_confidence"] == 0.95 and r["high_skip_seconds"] == 3600 and r["default_skip_seconds"] == 300
    )
    recording = ROOT / "data" / "recordings" / "skipcache-default.jsonl"
    messages = [m for m in generate_workload(WorkloadSpec()) if (m.at - EPOCH).total_seconds() < 6 * 3600]
    config = ResponseConfig(
        judgment_skip=JudgmentSkipConfig(
            thresholds=[
                JudgmentSkipThreshold(min_confidence=0.95, skip_seconds=3600),
                JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),
            ],
            default_skip_seconds=300,
        )
    )
    live = asyncio.run(simulate(messages, RecordedJudge.load(recording), config, hours=6)).summary()
    assert row["judge_calls"] == live["judge_calls"] and row["delay_p95_s"] == live["delay_p95_s"]
    assert len({r["judge_calls"] for r in result.rows}) > 1


def test_director_cutoffs_equal_fresh_rule_evaluations(store: Store) -> None:
    from engine.director.config import DirectorConfig, load_character
    from engine.director.rules import evaluate_rules
    from engine.director.scripts import load_script
    from engine.experiments import load_definition

    definition = load_definition(ROOT / "data" / "experiments" / "director-cutoffs.yaml")
    result = asyncio.run(run_experiment(definition, store))
    assert len(result.rows) == 27 and result.new_calls == 0 and store.call_count() == 0
    lines = load_script(ROOT / "data" / "scripts" / "beach.jsonl")
    for row in result.rows[::5]:
        config = DirectorConfig(
            format_warn_lines=row["format_warn_lines"],
            scatter_warn_sentences=row["scatter_warn_sentences"],
            tone_pass=row["tone_pass"],
        )
        fresh = [evaluate_rules(x.text, load_character(x.character or "yana"), config).status for x in lines]
        assert row["pass_rate"] == round(sum(s.name == "PASS" for s in fresh) / len(fresh), 4)
    assert len({r["pass_rate"] for r in result.rows}) > 1


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_local_executor_decides_in_worker_processes_with_the_same_table(tmp_path: Path, store: Store) -> None:
    from engine.experiments import LocalExecutor

    definition = handraise_definition(
        tmp_path,
        """\
        threshold: {from: 0.3, to: 0.7, step: 0.1}
        weights.relevance: [0.3, 0.5, 0.7]
        mode: [focus, brainstorm]
        """,
    )
    in_process = asyncio.run(run_experiment(definition, store, scripted_judge(store)))
    pooled = asyncio.run(
        run_experiment(definition, store, scripted_judge(store), executor=LocalExecutor(processes=2, chunk=5))
    )
    assert len(pooled.rows) == 30 and pooled.new_calls == 0
    strip = ("new_calls",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in comparable_rows(pooled.rows)] == [
        {k: v for k, v in r.items() if k not in strip} for r in comparable_rows(in_process.rows)
    ]
