"""`judgelab skip simulate`: the skip cache on a workload in simulated time, with and without the cache."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import check_output, fail, say, usable_model
from dashboard.mechanism_ui import DemoFlow, FigureBuilder, LabelWords, MechanismUI

if TYPE_CHECKING:
    from engine.refit import RefitJob

app = typer.Typer(help="Judgment skip cache: simulate what it saves and what it delays.", no_args_is_help=True)
# This mechanism's page, sub-app, report figures and calibration job (`dashboard.mechanism_ui`).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def default_recording() -> Path:
    from engine.config import get_settings  # CLI start-up

    return get_settings().data_dir / "recordings" / "skipcache-default.jsonl"


_fail = fail


# `skip simulate`'s options: the workload (a file or a generated one), the judge, the checker and the skip windows.
WorkloadOpt = Annotated[
    Path | None, typer.Option("--workload", help="JSONL of {t, channel, thread, id, author, text}.")
]
GenerateOpt = Annotated[
    bool, typer.Option("--generate", help="Generate a workload (the default one if no other option is given).")
]
ChannelsOpt = Annotated[int, typer.Option(min=1, help="Generated workload: channels.")]
HoursOpt = Annotated[
    float | None,
    typer.Option(
        min=0.1,
        max=24 * 14,
        help="Simulated hours (generated: 24; a file: until its last message could be judged).",
    ),
]
RateOpt = Annotated[float, typer.Option(min=0.001, help="Generated: bursts per channel per hour.")]
BurstOpt = Annotated[float, typer.Option(min=1, help="Generated: mean messages per burst.")]
SeedOpt = Annotated[int, typer.Option(help="Generated: random seed.")]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Judge with this model (each conversation state once; repeats are replayed)."),
]
RecordedOpt = Annotated[Path | None, typer.Option("--recorded", help="Judge from recorded judgments (JSONL).")]
RecordOpt = Annotated[Path | None, typer.Option("--record", help="Write the judgments made to this JSONL.")]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="How a live model judges: 'likelihood' (scored phrases and a "
        "fitted map; models that can score), 'structured' (its JSON "
        "answer) or 'probability' (next-token p(true)).",
    ),
]
CheckIntervalOpt = Annotated[int, typer.Option(min=1, max=86_400)]
MinWaitOpt = Annotated[int, typer.Option(min=0, max=86_400)]
SkipOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--skip",
        help="A skip window: CONFIDENCE=SECONDS — a judgment at least this confident is not made again for "
        "that long (repeatable; replaces the seed's 0.9=43200 0.7=3600).",
    ),
]
DefaultSkipOpt = Annotated[
    int | None,
    typer.Option("--default-skip", min=0, help="Seconds a judgment below every --skip threshold is kept (600)."),
]


@app.command("simulate")
def simulate_cmd(
    workload: WorkloadOpt = None,
    generate: GenerateOpt = False,
    channels: ChannelsOpt = 50,
    hours: HoursOpt = None,
    rate: RateOpt = 0.25,
    burst: BurstOpt = 3.0,
    seed: SeedOpt = 7,
    model_id: ModelOpt = None,
    recorded: RecordedOpt = None,
    record: RecordOpt = None,
    mode: ModeOpt = "likelihood",
    check_interval: CheckIntervalOpt = 60,
    min_wait: MinWaitOpt = 300,
    skip: SkipOpt = None,
    default_skip: DefaultSkipOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the periodic checker with and without the cache on the same workload and judge; a run of kind
    `skip.simulate` (the same entry point as the Skip cache page)."""
    # CLI start-up: loaded when the command runs
    from engine.skip.config import ResponseConfig
    from engine.skip.run import SimulationConfig

    if workload is not None and generate:
        raise _fail("give either --workload or --generate, not both")
    check_output(record, option="--record")
    messages, spec, file_ref = _workload(workload, channels, hours, rate, burst, seed)
    recorded = _judge(model_id, recorded, mode, spec)
    response = ResponseConfig(check_interval_seconds=check_interval, min_wait_seconds=min_wait)
    if skip or default_skip is not None:
        response.judgment_skip = _skip_windows(skip or [], default_skip, response.judgment_skip)
    config = SimulationConfig(
        workload=spec,
        workload_file=file_ref,
        hours=hours if file_ref else None,
        model_id=model_id,
        method=mode,
        recording=str(recorded) if recorded else None,
        response=response,
    )
    report = _run(config, messages, model_id)
    result = report.comparison | {"run_id": report.run_id}
    if record:
        _write_record(report.records, record)
    if model_id is not None:
        result["live_calls"] = report.live_calls
    if as_json:
        say(json.dumps(result, ensure_ascii=False, indent=2, default=str))
        return
    _say_simulation(result)


def _judge(model_id: str | None, recorded: Path | None, mode: str, spec: Any) -> Path | None:
    """The recording to judge from (--recorded, or the shipped one for the default workload when no --model is
    given), checked before anything runs: a missing judge, a bad --mode or a broken recording is an error."""
    # CLI start-up: loaded when the command runs
    from engine.skip.recording import RecordedJudge
    from engine.skip.workload import WorkloadError, WorkloadSpec

    if model_id is None and recorded is None:
        if default_recording().is_file() and spec is not None and spec == WorkloadSpec():
            recorded = default_recording()
        else:
            raise _fail("choose a judge: --model ID, or --recorded FILE (recorded judgments)")
    if mode not in ("likelihood", "structured", "probability"):
        raise _fail(f"--mode must be 'likelihood', 'structured' or 'probability', not '{mode}'")
    if recorded is not None:
        try:
            RecordedJudge.load(recorded)  # a broken recording is named before anything runs
        except WorkloadError as exc:
            raise _fail(str(exc)) from None
    return recorded


def _write_record(records: Any, record: Path) -> None:
    """--record: the judgments the simulation made, as a recording (a file it cannot write is an error)."""
    from engine.skip.recording import RecordedJudge  # CLI start-up
    from models.files import OutputError  # CLI start-up

    try:
        RecordedJudge(records).dump(record)
    except OutputError as exc:
        raise _fail(f"--record {exc}") from None
    except OSError as exc:
        raise _fail(f"--record {record}: cannot write ({exc.strerror or exc})") from None


def _workload(
    workload: Path | None, channels: int, hours: float | None, rate: float, burst: float, seed: int
) -> tuple[Any, Any, Any]:
    """(messages, spec, file reference): a workload file's messages and its reference, or a generated workload's
    spec; a bad file or option is an error naming it."""
    from pydantic import ValidationError  # CLI start-up

    # CLI start-up: loaded when the command runs
    from engine.inputs import InputError, read_text
    from engine.skip.run import FileRef
    from engine.skip.workload import WorkloadError, WorkloadSpec, parse_workload

    try:
        if workload is not None:
            content = read_text(workload)
            messages = parse_workload(content, str(workload))
            return messages, None, FileRef.of(workload.name, content, len(messages))
        spec = WorkloadSpec(
            channels=channels, hours=hours or 24.0, bursts_per_hour=rate, mean_burst_messages=burst, seed=seed
        )
        return None, spec, None
    except (InputError, WorkloadError) as exc:
        raise _fail(str(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = {
            "channels": "--channels",
            "hours": "--hours",
            "bursts_per_hour": "--rate",
            "mean_burst_messages": "--burst",
        }.get(str(err["loc"][0]) if err["loc"] else "", "generated workload")
        raise _fail(f"{where}: {err['msg']}") from None


def _say_simulation(result: dict[str, Any]) -> None:
    """A simulation's figures in a few lines."""
    from engine.skip.simulation import bound_text  # CLI start-up

    a, b = result["without_cache"], result["with_cache"]
    say(f"{a['messages']} messages · {a['checks']} checks")
    say(f"judge calls: {a['judge_calls']} without cache → {b['judge_calls']} with ({result['calls_saved_pct']}% saved)")
    say(
        f"first-judgment delay (s): median {b['delay_median_s']}, p95 {b['delay_p95_s']}, max {b['delay_max_s']}"
        f" (bound: {result['delay_bound_s']} — {bound_text(result['delay_bound_met'])})"
    )
    if b.get("flagged_judgments"):
        say(
            f"⚠ {b['flagged_judgments']} judgments with a failed confidence (missing, out of range, cut off "
            "or unparseable): confidence 0.0, never cached"
        )
    say(f"run {result['run_id']}")


def _skip_windows(pairs: list[str], default_s: int | None, current: Any) -> Any:
    """`--skip 0.9=43200 --skip 0.7=3600 --default-skip 600` as the config's judgment_skip (a bad pair is an
    error naming it)."""
    from pydantic import ValidationError  # CLI start-up

    from engine.skip.config import JudgmentSkipConfig, JudgmentSkipThreshold  # CLI start-up

    thresholds = list(current.thresholds)
    if pairs:
        thresholds = []
        for pair in pairs:
            confidence, sep, seconds = pair.partition("=")
            try:
                if not sep:
                    raise ValueError("expected CONFIDENCE=SECONDS")
                thresholds.append(JudgmentSkipThreshold(min_confidence=float(confidence), skip_seconds=int(seconds)))
            except (ValueError, ValidationError) as exc:
                detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise _fail(f"--skip {pair}: {detail} (e.g. --skip 0.9=43200)") from None
        if len({t.min_confidence for t in thresholds}) != len(thresholds):
            raise _fail("--skip: each confidence once")
    return JudgmentSkipConfig(
        thresholds=sorted(thresholds, key=lambda t: -t.min_confidence),
        default_skip_seconds=current.default_skip_seconds if default_s is None else default_s,
    )


def _progress_printer(quiet_s: float = 2.0) -> Any:
    """Progress on stderr for a long simulation: nothing in its first seconds, then a line at most every
    `quiet_s` seconds."""

    started = time.monotonic()
    last = [started]

    def show(progress: Any) -> None:
        now = time.monotonic()
        if now - started >= quiet_s and now - last[0] >= quiet_s:
            last[0] = now
            say(f"simulating {progress.step}: {progress.fraction or 0:.0%} ({now - started:.0f} s)", err=True)

    return show


def _run(config: Any, messages: list[Any] | None, model_id: str | None) -> Any:
    # CLI start-up: loaded when the command runs
    from engine.runctx import RunControl, controlled
    from engine.skip.run import run_simulation
    from engine.store import Store, StoreError

    if model_id is not None:
        store, model = usable_model(model_id)
        models = lambda _id: model  # noqa: E731
    else:
        try:
            store, models = Store(), None
        except StoreError as exc:
            raise _fail(str(exc)) from None

    async def go() -> Any:
        with controlled(RunControl(on_progress=_progress_printer())):
            return await run_simulation(config, models, store, messages=messages)

    return asyncio.run(go())


@app.command("record")
def record_cmd(
    model_id: Annotated[str, typer.Option("--model", help="The model whose judgments to record.")],
    output: Annotated[
        Path, typer.Option("--output", help="The recording to write (a partial one is resumed, not started over).")
    ],
    alongside: Annotated[
        Path | None,
        typer.Option("--alongside", help="The recording whose states to judge (default: the shipped one)."),
    ] = None,
    mode: Annotated[str, typer.Option("--mode", help="likelihood | structured | probability")] = "likelihood",
) -> None:
    """Record another model's skip judgments of the very conversation states a recording holds (the default
    workload, driven by that recording so the same replies come before each state): what the scorecard compares
    models on. Written every 25 judgments, so an interrupted recording resumes where it stopped."""
    # CLI start-up
    from engine.skip.judges import LikelihoodJudge, ModelJudge, ProbabilityJudge
    from engine.skip.recording import RecordedJudge, record_alongside
    from engine.skip.workload import WorkloadError, WorkloadSpec, generate_workload
    from models.files import OutputError, shown_path  # CLI start-up

    source = alongside or default_recording()
    if mode not in ("likelihood", "structured", "probability"):
        raise _fail(f"--mode must be 'likelihood', 'structured' or 'probability', not '{mode}'")
    check_output(output)
    try:
        RecordedJudge.load(source)
        if output.is_file():
            RecordedJudge.load(output)
    except WorkloadError as exc:
        raise _fail(str(exc)) from None
    _, model = usable_model(model_id)
    kinds = {"likelihood": LikelihoodJudge, "probability": ProbabilityJudge, "structured": ModelJudge}
    spec = WorkloadSpec()

    async def go() -> tuple[int, int]:
        shown = _progress_printer()

        def progress(share: float) -> None:
            shown(SimpleNamespace(step="recording", fraction=share))

        return await record_alongside(
            generate_workload(spec), source, kinds[mode](model), output, hours=spec.hours, progress=progress
        )

    try:
        judged, calls = asyncio.run(go())
    except OutputError as exc:
        raise _fail(f"--output {exc}") from None
    except OSError as exc:
        raise _fail(f"--output {output}: cannot write ({exc.strerror or exc})") from None
    say(f"{judged} states judged by {model_id} in {shown_path(output)} ({calls} calls now)")


@app.command("calibrate")
def calibrate_cmd(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="Labelled conversations: {messages: [{author, text}], should_respond} a line; never the benchmark.",
        ),
    ] = Path("data/calibration/skip-calib.jsonl"),
    model_id: Annotated[str, typer.Option("--model")] = "gemma3-270m",
    output_dir: Annotated[Path | None, typer.Option("--output-dir")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Refit the likelihood skip judge's map (PMI → p(respond)) on a calibration split, recorded as a run."""
    from dashboard.commands import calibrate_and_save  # CLI start-up

    calibrate_and_save(calibration_job(data, model_id), output_dir, as_json)


def calibration_job(data: Path, model_id: str = "gemma3-270m", limit: int | None = None) -> RefitJob:
    """The skip judge's refit (`limit`: the split's first N items only, for a quick check)."""
    # CLI start-up: loaded when the command runs
    from engine.judgemaps import fit_single_map, read_jsonl_items
    from engine.skip.likelihood import SKIP, SKIP_FEATURES, skip_features

    try:
        items = read_jsonl_items(data, {"messages": list, "should_respond": bool})[:limit]
        history = [[(str(m["author"]), str(m["text"])) for m in it["messages"][-5:]] for it in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise _fail(f"{data}: every message needs author and text ({exc})") from None
    store, model = usable_model(model_id)

    async def rows() -> list[dict[str, float]]:
        return [(await skip_features(model, h))[0] for h in history]

    from engine.refit import RefitJob  # the store and the models: CLI start-up time

    return RefitJob(
        store,
        "skip",
        model_id,
        data,
        rows,
        lambda f: [
            fit_single_map(SKIP, model_id, "respond", SKIP_FEATURES, f, [it["should_respond"] for it in items], data)
        ],
        limit,
    )


def figures() -> Sequence[FigureBuilder]:
    # loaded when used: the report's charts load plotly
    from dashboard.mechanisms.skip.report import simulation_charts

    return (simulation_charts,)


def demo() -> DemoFlow:
    # loaded when used: the flow loads the engine
    from engine.skip.demo import record_page

    return record_page


def benchmarks() -> tuple[object, ...]:
    # loaded when used: `judgelab bench` only
    from dashboard.mechanisms.skip import bench

    return (bench,)


UI = MechanismUI(
    "skip",
    page="pages/skip.py",
    title="Skip cache",
    icon="⏱️",
    url_path="skip",
    cli=app,
    figures=figures,
    calibration_split="skip-calib.jsonl",
    calibration_job=calibration_job,
    labels=LabelWords(
        "Skip cache (reply or not)",
        buttons={"reply": "Should have replied", "no_reply": "Should not have replied"},
        answers={"reply": "reply", "no_reply": "no reply"},
    ),
    demo=demo,
    bench=benchmarks,
)
