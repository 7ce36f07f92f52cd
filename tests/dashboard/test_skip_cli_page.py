"""`judgelab skip simulate` and the Skip cache page, on small workloads with recorded judgments (and one
run with the bundled model as a live judge)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import simulate
from engine.skip.workload import WorkloadSpec, dump_workload, generate_workload
from tests.dashboard.rendered import settle_runs, shown
from tests.engine.test_skip_simulation import HashJudge
from tests.fakes.forms import wkey

runner = CliRunner()
SMALL = WorkloadSpec(channels=4, hours=3, bursts_per_hour=1.0, seed=5)


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    """A workload file and judgments recorded for every state it can reach."""
    messages = generate_workload(SMALL)
    workload = tmp_path / "w.jsonl"
    dump_workload(messages, workload)
    judge = RecordedJudge({}, HashJudge())
    asyncio.run(simulate(messages, judge, with_cache=False, hours=SMALL.hours))
    recording = tmp_path / "rec.jsonl"
    judge.dump(recording)
    return workload, recording


def test_simulate_from_files_json(recorded: tuple[Path, Path]) -> None:
    workload, recording = recorded
    code, out = invoke(
        "skip", "simulate", "--workload", str(workload), "--recorded", str(recording), "--hours", "3", "--json"
    )
    assert code == 0, out
    result = json.loads(out)
    a, b = result["without_cache"], result["with_cache"]
    assert a["messages"] == b["messages"] == len(workload.read_text().splitlines())
    assert b["judge_calls"] < a["judge_calls"]
    assert result["calls_saved_pct"] == round(100 * (1 - b["judge_calls"] / a["judge_calls"]), 2)
    assert result["delay_bound_met"] is True and b["delay_max_s"] <= result["delay_bound_s"] == 360
    assert b["failures"] == 0 and a["failures"] == 0


def test_simulate_takes_the_skip_windows(recorded: tuple[Path, Path]) -> None:
    """Shorter windows save fewer calls on the same workload and judge; the windows are the run's config."""
    from engine.store import Store

    workload, recording = recorded
    base = ["skip", "simulate", "--workload", str(workload), "--recorded", str(recording), "--hours", "3", "--json"]
    code, out = invoke(*base)
    assert code == 0, out
    seeded = json.loads(out)
    code, out = invoke(*base, "--skip", "0.9=60", "--skip", "0.5=30", "--default-skip", "0")
    assert code == 0, out
    short = json.loads(out)
    assert short["calls_saved_pct"] < seeded["calls_saved_pct"]
    run = Store().get_run(short["run_id"])
    assert run is not None
    assert run.config["response"]["judgment_skip"] == {
        "enabled": True,
        "thresholds": [{"min_confidence": 0.9, "skip_seconds": 60}, {"min_confidence": 0.5, "skip_seconds": 30}],
        "default_skip_seconds": 0,
    }
    plain = base[:-1]  # errors are read on the terminal
    for bad, says in (("0.9", "expected CONFIDENCE=SECONDS"), ("1.5=60", "less than or equal to 1"), ("x=1", "x")):
        code, out = invoke(*plain, "--skip", bad)
        assert code == 1 and f"--skip {bad}" in out and says in out, out
    code, out = invoke(*plain, "--skip", "0.9=60", "--skip", "0.9=30")
    assert code == 1 and "each confidence once" in out


def test_delay_bound_is_n_a_when_nothing_was_judged(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    workload, _ = recorded
    empty = tmp_path / "none.jsonl"
    # A recording of a state this workload never reaches: every state is a miss, nothing is judged.
    empty.write_text(
        '{"state": "X:top|none", "should_respond": false, "reason": "r", "confidence": 0.5}\n', encoding="utf-8"
    )
    code, out = invoke(
        "skip", "simulate", "--workload", str(workload), "--recorded", str(empty), "--hours", "3", "--json"
    )
    assert code == 0, out
    result = json.loads(out)
    assert result["with_cache"]["judge_calls"] == 0 and result["with_cache"]["delay_max_s"] is None
    assert result["delay_bound_met"] is None
    code, out = invoke("skip", "simulate", "--workload", str(workload), "--recorded", str(empty), "--hours", "3")
    assert code == 0 and "n/a (nothing was judged)" in out and "within bound" not in out


def test_simulate_needs_a_judge_and_reports_bad_workloads(tmp_path: Path) -> None:
    code, out = invoke("skip", "simulate", "--generate", "--channels", "3")
    assert code == 1 and "choose a judge" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": "soon", "channel": "C", "id": "x"}\n', encoding="utf-8")
    code, out = invoke("skip", "simulate", "--workload", str(bad), "--recorded", str(bad))
    assert code == 1 and f"{bad}:1" in out
    code, out = invoke("skip", "simulate", "--generate", "--model", "gpt-4o")
    assert code == 2 and "OPENAI_API_KEY" in out


@pytest.mark.model
def test_simulate_with_the_bundled_model_as_live_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.skip.likelihood import SKIP_CUES
    from models.base import ChatModel

    monkeypatch.setattr(ChatModel, "_BASELINES", {})  # the baselines this run scores are counted below
    record = tmp_path / "live.jsonl"
    code, out = invoke(
        "skip",
        "simulate",
        "--generate",
        "--channels",
        "1",
        "--hours",
        "1",
        "--rate",
        "2",
        "--seed",
        "11",
        "--model",
        "gemma3-270m",
        "--record",
        str(record),
        "--json",
    )
    assert code == 0, out
    result = json.loads(out)
    assert result["live_calls"] == len(record.read_text().splitlines()) > 0
    assert result["with_cache"]["failures"] == 0
    code, shown = invoke("runs", "show", result["run_id"], "--json")
    calls = json.loads(shown)["calls"]
    # The default likelihood judge: one scoring call per cue and state, plus each cue's content-free
    # calibration baseline, scored once per process.
    cues = len(SKIP_CUES)
    assert len(calls) == cues * result["live_calls"] + cues and all(c["backend"] == "llamacpp" for c in calls)


def _simulate_small(at: AppTest) -> None:
    """Set the page's generated workload to SMALL and run the simulation."""
    at.number_input(key=wkey(at, "skip.channels")).set_value(SMALL.channels)
    at.number_input(key=wkey(at, "skip.hours")).set_value(SMALL.hours)
    at.number_input(key=wkey(at, "skip.rate")).set_value(SMALL.bursts_per_hour)
    at.number_input(key=wkey(at, "skip.seed")).set_value(SMALL.seed)
    at.button(key="skip.run").click().run()
    settle_runs(at, "skip.simulate")  # the page watches the run: rerun until it has ended


def _page() -> None:
    from pages import skip as skipcache

    skipcache.render()


def test_page_simulates_with_recorded_judgments(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, recording = recorded
    data = tmp_path / "data"
    (data / "recordings").mkdir(parents=True)
    (data / "recordings" / "skipcache-default.jsonl").write_text(recording.read_text(), encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(data))
    at = AppTest.from_function(_page, default_timeout=120).run()
    assert not at.exception
    at.toggle(key="details.skip.toggle").set_value(True).run()  # the sweep's table is research detail
    _simulate_small(at)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    without = int(metrics["Judge calls without cache"].replace(",", ""))
    with_cache = int(metrics["With cache"].replace(",", ""))
    assert with_cache < without
    assert "within bound" in [m.proto.delta for m in at.metric if m.label == "max"][0]
    sweep = next(df.value for df in at.dataframe if "pareto" in df.value.columns)
    assert len(sweep) == 16 and sweep["pareto"].any() and (sweep["misses"] == 0).all()  # the page's 4 × 4 grid
    from dashboard import state

    runs = state.get_store().list_runs(kind="skip.simulate")
    assert len(runs) == 1 and runs[0].summary["calls_saved_pct"] > 0
    # the sweep is the engine run's, stored with it: the page shows it and computes nothing itself
    assert runs[0].summary["sweep"] == sweep.to_dict("records")
    low, high = runs[0].summary["result"]["calls_saved_pct_ci"]
    saved = runs[0].summary["calls_saved_pct"]
    conversations = runs[0].summary["result"]["conversations"]
    line = f"{saved:.0f}% of the judge calls saved ({low:.0f}–{high:.0f}% with 95 % confidence, resampling the "
    line += f"{conversations} conversations)"
    assert any(shown(c.value).startswith(line) for c in at.caption), [shown(c.value) for c in at.caption]
    assert metrics["Calls saved"] == f"{saved:.0f}%"  # said as a saving, not a negative change


def test_page_shows_n_a_for_the_bound_when_nothing_was_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    (data / "recordings").mkdir(parents=True)
    (data / "recordings" / "skipcache-default.jsonl").write_text(  # a state never reached: nothing is judged
        '{"state": "X:top|none", "should_respond": false, "reason": "r", "confidence": 0.5}\n', encoding="utf-8"
    )
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(data))
    at = AppTest.from_function(_page, default_timeout=120).run()
    _simulate_small(at)
    assert not at.exception
    delta = [m.proto.delta for m in at.metric if m.label == "max"][0]
    assert delta == "n/a (nothing was judged)"


def test_page_names_the_judge_and_its_calibration() -> None:
    from engine.judgemaps import load_calibration
    from engine.skip.likelihood import SKIP

    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    assert any(shown(c.value).startswith("Judged by the recorded judgments in ") for c in at.caption)
    signal = " Judge: ✅ measurable signal — AUC 0.91 (0.86–0.96) on 160 items, above 0.5."
    assert any(shown(c.value).endswith(signal) for c in at.caption)  # the map the recording was judged through
    at.selectbox(key=wkey(at, "skip.judge")).set_value("gemma3-270m").run()
    assert any(shown(c.value) == "Judged live by gemma3-270m (likelihood)." + signal for c in at.caption)
    at.toggle(key="details.skip.toggle").set_value(True).run()  # the fitted map is research detail
    cal = load_calibration(SKIP, "gemma3-270m")
    assert cal is not None
    line = f"Judged live by gemma3-270m (likelihood) · calibration {cal.label} (cross-validated AUC "
    assert any(shown(c.value).startswith(line) for c in at.caption)
    at.selectbox(key=wkey(at, "skip.method")).set_value("structured").run()
    assert any(shown(c.value) == "Judged live by gemma3-270m (structured; no fitted map)." for c in at.caption)


def test_page_says_what_checks_and_calls_are_in_human_durations_and_a_reload_restores_the_form(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S1: '121 checks' next to '119 judge calls' read as a discrepancy: the page says what each counts. S3: raw
    seconds ('6120 s') read as durations ('1 h 42 min'). F1: a reload on the run's URL shows its settings."""
    from dashboard import state
    from dashboard.components import duration

    _, recording = recorded
    data = tmp_path / "data"
    (data / "recordings").mkdir(parents=True)
    (data / "recordings" / "skipcache-default.jsonl").write_text(recording.read_text(), encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(data))
    at = AppTest.from_function(_page, default_timeout=120).run()
    at.number_input(key=wkey(at, "skip.high_s")).set_value(7200)
    at.number_input(key=wkey(at, "skip.interval")).set_value(120)
    at.number_input(key=wkey(at, "skip.min_wait")).set_value(600)
    _simulate_small(at)
    assert not at.exception and not at.error
    (run,) = state.get_store().list_runs(kind="skip.simulate")
    without = run.summary["result"]["without_cache"]
    (said,) = [shown(c.value) for c in at.caption if c.value.startswith("The checker")]
    assert f"every 2 min: {without['checks']:,} checks" in said
    assert f"{without['judge_calls']:,} judge calls without the cache" in said and "once per conversation" in said
    assert any("is trusted for 2 h, at ≥ 0.7 for 1 h, otherwise for 10 min" in shown(c.value) for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Bound (min wait + interval)"] == "12 min"
    assert metrics["Staleness p95"] == duration(run.summary["result"]["with_cache"]["staleness_p95_s"])
    assert not any(v.endswith(".0 s") for v in metrics.values())
    assert [duration(s) for s in (45, 360, 365, 6120, 7345, 90000, None)] == [
        "45 s",
        "6 min",
        "6 min 5 s",
        "1 h 42 min",
        "2 h 2 min",
        "1 d 1 h",
        "—",
    ]

    state.clear_reads()
    reloaded = AppTest.from_function(_page, default_timeout=120)
    reloaded.query_params["run"] = run.id
    reloaded.run()
    assert not reloaded.exception
    assert reloaded.number_input(key=wkey(reloaded, "skip.channels")).value == SMALL.channels
    assert reloaded.number_input(key=wkey(reloaded, "skip.seed")).value == SMALL.seed
    assert reloaded.number_input(key=wkey(reloaded, "skip.high_s")).value == 7200
    assert (
        reloaded.number_input(key=wkey(reloaded, "skip.interval")).value,
        reloaded.number_input(key=wkey(reloaded, "skip.min_wait")).value,
    ) == (
        120,
        600,
    )
    assert reloaded.selectbox(key=wkey(reloaded, "skip.judge")).value == "Recorded Gemma judgments (default workload)"
    reloaded.number_input(key=wkey(reloaded, "skip.seed")).set_value(11).run()  # the user's change stays theirs
    assert reloaded.number_input(key=wkey(reloaded, "skip.seed")).value == 11


def test_skip_record_refuses_bad_options_before_any_call(tmp_path: Path) -> None:
    code, out = invoke("skip", "record", "--model", "mock", "--output", str(tmp_path / "x.jsonl"), "--mode", "vibes")
    assert code == 1 and "--mode must be 'likelihood', 'structured' or 'probability'" in out
    code, out = invoke("skip", "record", "--model", "mock", "--output", str(tmp_path / "nowhere" / "x.jsonl"))
    assert code == 1 and out == f"error: --output {tmp_path / 'nowhere' / 'x.jsonl'}: no such folder\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"state": "C1:top|m1"}\n', encoding="utf-8")
    code, out = invoke(
        "skip", "record", "--model", "mock", "--output", str(tmp_path / "x.jsonl"), "--alongside", str(broken)
    )
    assert code == 1 and "broken.jsonl:1" in out
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow  # ~20 s: the default workload simulated twice, 531 states judged
def test_skip_record_judges_the_shipped_states_with_another_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-in mock as the other model: every state of the shipped recording judged once, then the same
    command again resumes with nothing left to ask."""
    from tests.fakes.mock_catalog import mock_catalog

    monkeypatch.setenv("JUDGELAB_CATALOG", str(mock_catalog(tmp_path)))
    out_file = tmp_path / "skipcache-smollm2-135m.jsonl"
    code, out = invoke("skip", "record", "--model", "smollm2-135m", "--output", str(out_file))
    shipped = Path(__file__).parents[2] / "data" / "recordings" / "skipcache-default.jsonl"
    states = set(RecordedJudge.load(shipped).records)
    assert code == 0 and f"{len(states)} states judged by smollm2-135m" in out and f"({len(states)} calls now)" in out
    assert set(RecordedJudge.load(out_file).records) == states
    code, out = invoke("skip", "record", "--model", "smollm2-135m", "--output", str(out_file))
    assert code == 0 and "(0 calls now)" in out
