"""`judgelab jury run | eval | replay`."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import fail, require_models, say, usable_model, with_options
from dashboard.mechanism_ui import DemoFlow, FigureBuilder, LabelWords, MechanismUI
from dashboard.text import in_words

if TYPE_CHECKING:
    from engine.jury.view import JuryView
    from engine.refit import RefitJob
    from engine.store import Run, Store


app = typer.Typer(
    help="Collaborative jury: parallel evaluation, discussion rounds, final judgment.", no_args_is_help=True
)
# This mechanism's page, sub-app, report figures and calibration job (`dashboard.mechanism_ui`).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
Panel = Annotated[str, typer.Option("--panel", help="A panel of models/catalog.yaml (e.g. local, seed-api).")]
Jurors = Annotated[
    list[str] | None, typer.Option("--juror", help="MODEL:ROLE NAME[:FOCUS], repeatable; replaces --panel.")
]
Rounds = Annotated[
    int | None,
    typer.Option("--rounds", min=0, help="Max discussion rounds (default: JURY_MAX_DISCUSSION_ROUNDS or 3)."),
]
Threshold = Annotated[
    float | None, typer.Option("--threshold", help="Consensus threshold (default: JURY_CONSENSUS_THRESHOLD or 2.0).")
]
Collaborative = Annotated[
    bool | None,
    typer.Option(
        "--collaborative/--no-collaborative",
        help="The seed's collaborative jury (phase 1, discussion rounds, final judgment) or, with "
        "--no-collaborative, a simple parallel jury: phase 1 and the final judgment only (default: "
        "JURY_USE_COLLABORATIVE or true).",
    ),
]
Method = Annotated[str | None, typer.Option("--method", help="majority_vote | weighted_average | final_judge.")]
JudgeModel = Annotated[str | None, typer.Option("--final-judge-model", help="Model of the final judge.")]
JudgeKind = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="auto (default: likelihood for a base model that can score, like the bundled Gemma; generate for "
        "the others) | generate (jurors write JSON) | likelihood (the fitted channel map for the default labels; "
        "the calibrated likelihood of the label words for other rubrics).",
    ),
]
Replay = Annotated[
    bool,
    typer.Option(
        "--replay",
        help="Answer from recorded calls instead of running models; a request never recorded stops with an error.",
    ),
]
Fallthrough = Annotated[
    bool,
    typer.Option(
        "--replay-fallthrough", help="Replay, but send a request never recorded to the live model (and record it)."
    ),
]


@dataclass(frozen=True)
class JuryOptions:
    """The options `jury run` and `jury eval` share: the panel, the jury's settings, replay, the output."""

    panel: Panel = "local"
    jurors: Jurors = None
    rounds: Rounds = None
    threshold: Threshold = None
    collaborative: Collaborative = None
    method: Method = None
    judge_model: JudgeModel = None
    replay: Replay = False
    fallthrough: Fallthrough = False
    as_json: JsonFlag = False
    judge: JudgeKind = None


def _setup(opts: JuryOptions) -> tuple[Any, Any]:
    """(store, Jury) with every model checked, or a clear exit."""
    # CLI start-up: loaded when the command runs
    from engine.config import ConfigError
    from engine.jury.config import JuryConfig, panel_seats
    from engine.jury.runner import Jury
    from engine.store import Store, StoreError
    from models.catalog import CatalogError, load_catalog
    from models.registry import ModelHub

    try:
        config = JuryConfig.from_env(
            use_collaborative=opts.collaborative,
            max_discussion_rounds=opts.rounds,
            consensus_threshold=opts.threshold,
            final_judgment_method=opts.method,
            final_judge_model=opts.judge_model,
            judge=opts.judge,
        )
        catalog = load_catalog()
        if opts.jurors:
            rows = []
            for text in opts.jurors:
                model, _, rest = text.partition(":")
                role, _, focus = rest.partition(":")
                rows.append({"model": model.strip(), "role_name": role.strip(), "role_focus": focus.strip()})
            seats = panel_seats(rows)
        else:
            seats = panel_seats(opts.panel, catalog)
        store = Store()
    except (ConfigError, CatalogError, StoreError, ValueError) as exc:
        raise fail(str(exc)) from None
    except KeyError as exc:
        raise fail(str(exc.args[0])) from None
    needed = Jury(seats, {}, config).models_needed()
    for model_id in sorted(needed):
        if model_id not in catalog.ids:
            raise fail(f"unknown model '{model_id}' — known models: {', '.join(catalog.ids)}")
    if not opts.replay or opts.fallthrough:  # a strict replay answers from recorded calls: no model need be reachable
        require_models(catalog, needed)
    hub = ModelHub(catalog, call_log=store)
    replay = opts.replay or opts.fallthrough
    return store, Jury(seats, lambda m: hub.get(m, replay=replay, fallthrough=opts.fallthrough), config)


def _replay_miss(case_id: str, exc: Exception) -> typer.Exit:
    return fail(f"case {case_id}: {exc}. Nothing was guessed; the run is stored as failed", code=4)


def _cases(path: Path) -> list[Any]:
    from engine.jury.config import CaseError, load_cases  # CLI start-up

    try:
        return load_cases(path)
    except CaseError as exc:
        raise fail(str(exc)) from None


def _short(text: str, width: int = 200) -> str:
    """A juror's reasoning on one line, cut at a word (never mid-word) when longer than `width`."""

    return textwrap.shorten(text, width=width, placeholder=" …")


def _print_view(view: JuryView, *, rounds: bool = True) -> None:
    case = view.case
    say(f"Case {case.get('id')}: {case.get('title', '')}")
    from engine.jury.decisions import failed_fields  # CLI start-up

    for e in view.phase1:
        tag = "  [fallback, no vote: " + str(e.get("fallbackReason")) + "]" if e.get("fallback") else ""
        tag += f"  ⚠ {', '.join(failed_fields(e.get('flags') or []))}" if failed_fields(e.get("flags") or []) else ""
        say(
            f"  {view.role(e['juror']):<20} {e['verdict']:<14} {e['score']:>5.0f}  conf {e['confidence']:.2f}"
            f"  {_short(e['reasoning'])}{tag}"
        )
    if view.identical_seats:
        from engine.jury.decisions import IDENTICAL_SEATS_TEXT  # CLI start-up

        say(f"  phase 1: {IDENTICAL_SEATS_TEXT}")
    elif view.phase1_consensus:
        c = view.phase1_consensus
        say(
            f"  consensus after phase 1: {c['consensusStatus']} ({c['agreementLevel']:.2f})"
            + (f", {c['failedSeats']} failed seat(s) not voting" if c.get("failedSeats") else "")
            + (" — reached" if c["consensusReached"] else "")
        )
    if view.skipped:
        say(f"  {view.skipped.get('text', 'no discussion round was run')}")
    for rnd in view.rounds:
        if rounds:
            say(f" round {rnd['round']}")
        for st in rnd["statements"]:
            badge = " [立場変更 / position changed]" if st["positionChanged"] else ""
            head = f"  {view.role(st['juror'])}: ({st['newVerdict']}, {st['newScore']:.0f}){badge}"
            say(f"{head} {_short(st['statement'])}")
        if rnd["completed"] and rounds:
            c = rnd["completed"]
            say(f"  → {c['consensusStatus']} ({c['agreementLevel']:.2f}), moved {c.get('moved', 0)}")
    if view.ended:
        say(f"  discussion ended: {view.ended['reason']} after {view.ended['totalRounds']} round(s)")
    if view.final:
        f = view.final
        if view.no_verdict:
            say(f"FINAL NO VERDICT ({f['method']}) {f['reasoning'][:120]}")
        else:
            say(f"FINAL {f['verdict']} {f['score']:.1f} ({f['method']}) {_short(f['reasoning'])}")
        if f.get("flags"):
            say(f"  flags: {', '.join(f['flags'])}")


@app.command("run")
@with_options(JuryOptions)
def run_cmd(
    case_file: Annotated[Path, typer.Option("--case", help="A case file (YAML or JSONL).")],
    case_id: Annotated[str | None, typer.Option("--id", help="Which case of the file (default: the first).")] = None,
    *,
    opts: JuryOptions,
) -> None:
    """Judge one case; the run (events, calls, result) is stored and can be replayed."""
    # CLI start-up: loaded when the command runs
    from engine.jury.runner import run_case
    from engine.jury.view import JuryView
    from models.errors import ReplayMiss

    cases = _cases(case_file)
    case = cases[0] if case_id is None else next((c for c in cases if c.id == case_id), None)
    if case is None:
        raise fail(f"no case '{case_id}' in {case_file} — ids: {', '.join(c.id for c in cases)}")
    store, jury = _setup(opts)
    try:
        run_id, result = asyncio.run(run_case(store, jury, case))
    except ReplayMiss as exc:
        raise _replay_miss(case.id, exc) from None
    if opts.as_json:
        say(json.dumps({"run_id": run_id, "result": result.model_dump(mode="json")}, ensure_ascii=False, indent=2))
        return
    events = [(e.type, e.payload) for e in store.events(run_id)]
    _print_view(JuryView.fold(events))
    say(f"run {run_id}  ({result.wall_s:.1f} s, {result.prompt_tokens}+{result.completion_tokens} tokens)")


@app.command("eval")
@with_options(JuryOptions)
def eval_cmd(
    cases_file: Annotated[Path, typer.Option("--cases", help="Labelled cases (JSONL or YAML) with `gold`.")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N cases.")] = None,
    *,
    opts: JuryOptions,
) -> None:
    """Accuracy against gold, agreement among jurors (Fleiss κ, Krippendorff α) before and after the
    discussion, how often the discussion changed the outcome, rounds, tokens and cost: per case and in
    total. The totals are computed from the per-case lines only."""
    # CLI start-up: loaded when the command runs
    from engine.jury.evaluation import evaluate_cases
    from models.errors import ReplayMiss

    cases = _cases(cases_file)[:limit]
    store, jury = _setup(opts)
    current: list[str] = []

    def line(item: dict[str, Any]) -> None:
        if not opts.as_json:
            mark = {True: "✓", False: "✗", None: "-"}[item["correct"]]
            final = "NO VERDICT" if item["no_verdict"] else item["final_verdict"]
            say(
                f"{mark} {item['id']:<20} gold {str(item['gold']):<14} final {final:<14} "
                f"rounds {item['rounds']}  changed {item['outcome_changed']}",
                err=True,
            )

    try:
        eval_id, items, totals = asyncio.run(
            evaluate_cases(
                store,
                jury,
                cases,
                source=str(cases_file),
                on_case=lambda case: current.__setitem__(slice(None), [case.id]),
                on_item=line,
            )
        )
    except ReplayMiss as exc:
        raise _replay_miss(current[0] if current else "?", exc) from None
    if opts.as_json:
        say(
            json.dumps(
                {
                    "run_id": eval_id,
                    "config": jury.config.model_dump(),
                    "jurors": [s.model_dump() for s in jury.seats],
                    "items": items,
                    "totals": totals,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    say(json.dumps(totals, ensure_ascii=False, indent=2))
    say(f"run {eval_id}")


SplitData = Annotated[
    Path,
    typer.Option(
        "--data", help="Labelled cases (JSONL or YAML with `gold`): a calibration split, never the benchmark."
    ),
]
JURY_SPLIT = Path("data/calibration/jury-calib.jsonl")


@app.command("calibrate")
def calibrate_cmd(
    data: SplitData = JURY_SPLIT,
    model_id: Annotated[str, typer.Option("--model")] = "gemma3-270m",
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where the fitted map goes (default: data/calibration/).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Refit the likelihood jury's map (the channel features of every case → the rubric's labels,
    multinomial logistic) on a calibration split, and the weight of the others' verdicts in a discussion
    round (the other seats of the catalog's first panel each say the verdict the phase-1 map gives); then each
    role's map on its own cues and the panel's map over every seat's features (engine/jury/roles.py); every
    call is recorded as a run of kind `calibration`."""
    from dashboard.commands import calibrate_and_save  # CLI start-up

    calibrate_and_save(calibration_job(data, model_id), output_dir, as_json)


def calibration_job(data: Path, model_id: str = "gemma3-270m", limit: int | None = None) -> RefitJob:
    """The jury map's refit (`limit`: the split's first N cases only, for a quick check)."""
    # CLI start-up: loaded when the command runs
    from engine.jury.decisions import DEFAULT_VERDICTS
    from engine.jury.likelihood import fit_jury_calibration, jury_calibration_rows
    from models.catalog import load_catalog

    cases = _cases(data)[:limit]
    if any(c.gold is None for c in cases):
        raise fail(f"{data}: every calibration case needs a gold verdict")
    if any(c.rubric is not None and c.rubric.verdicts != list(DEFAULT_VERDICTS) for c in cases):
        raise fail(f"{data}: the jury map is fitted for the default labels ({', '.join(DEFAULT_VERDICTS)})")
    store, model = usable_model(model_id)
    labels = [str(c.gold) for c in cases]
    groups = [c.id for c in cases]
    panel = next(iter(load_catalog().panels.values()), [])
    others = [s.role_name for s in panel[1:]] or ["Juror 2", "Juror 3"]
    from engine.jury.roles import cue_features, fit_role_calibrations  # CLI start-up
    from engine.refit import RefitJob  # the store and the models: CLI start-up time

    async def rows() -> list[dict[str, float]]:
        """The channel features (and a round's move), then each case's role cues (one more call a case)."""
        channel = await jury_calibration_rows(model, cases, labels, DEFAULT_VERDICTS, others)
        return [{**row, **(await cue_features(model, case))[0]} for row, case in zip(channel, cases, strict=True)]

    return RefitJob(
        store,
        "jury",
        model_id,
        data,
        rows,
        lambda rows: [
            fit_jury_calibration(rows, labels, DEFAULT_VERDICTS, model_id, data, groups),
            *fit_role_calibrations(rows, labels, DEFAULT_VERDICTS, model_id, data),
        ],
        limit,
    )


@app.command("calibrate-panel")
def calibrate_panel_cmd(
    data: SplitData = JURY_SPLIT,
    panel: Panel = "local",
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where the fitted maps go (default: data/calibration/).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Refit a panel of different judges (engine/jury/panelfit.py): each seat's map on the split (likelihood seats:
    their channel features, and the cues where they measured better; the neighbours seat: its multilingual
    embeddings), then the stack over the seats' out-of-fold readings with its round weight and selective cuts, and
    every figure cross-validated. Every call is recorded as a run of kind `calibration`."""
    from dashboard.commands import calibrate_and_save  # CLI start-up

    calibrate_and_save(panel_job(data, panel), output_dir, as_json)


def panel_job(data: Path, panel: str = "local", limit: int | None = None) -> RefitJob:
    """The refit of a panel whose seats judge by distributions (likelihood or neighbours)."""
    # CLI start-up: loaded when the command runs
    from engine.embeddings import RecordedEmbedder
    from engine.jury.config import panel_seats
    from engine.jury.decisions import DEFAULT_VERDICTS
    from engine.jury.panelfit import Seat, fit_panel, seat_rows, split_problem
    from engine.refit import RefitJob

    cases = _cases(data)[:limit]
    if any(c.gold is None for c in cases):
        raise fail(f"{data}: every calibration case needs a gold verdict")
    problem = split_problem([str(c.gold) for c in cases], DEFAULT_VERDICTS)
    if problem:
        raise fail(f"{data}: {problem}")
    if any(c.rubric is not None and c.rubric.verdicts != list(DEFAULT_VERDICTS) for c in cases):
        raise fail(f"{data}: the panel is fitted for the default labels ({', '.join(DEFAULT_VERDICTS)})")
    try:
        seats = panel_seats(panel)
    except (ValueError, KeyError) as exc:
        raise fail(str(exc)) from None
    if any(s.judge not in ("likelihood", "neighbours") for s in seats):
        raise fail(f"panel {panel}: every seat needs judge: likelihood or judge: neighbours to be stacked")
    if len({s.model_id for s in seats}) != len(seats):
        raise fail(f"panel {panel}: a stacked panel has one seat per model")
    fitted = [Seat(s.model_id, s.judge) for s in seats]
    store, models = None, {}
    for s in seats:
        if s.judge == "likelihood":
            store, models[s.model_id] = usable_model(s.model_id)
    if store is None:
        from engine.store import Store  # CLI start-up: the store only when no seat loaded a model

        store = Store()
    embedders = {s.model_id: RecordedEmbedder(store, embedder_id=s.model_id) for s in seats if s.judge == "neighbours"}
    rows_of: dict[str, list[dict[str, float]]] = {}

    async def rows() -> list[dict[str, float]]:
        for seat in fitted:
            rows_of[seat.key] = await seat_rows(seat, cases, models.get(seat.key), embedders.get(seat.key))
        return [{"case": float(i)} for i in range(len(cases))]

    source = [{"id": c.id, "title": c.title, "gold": c.gold, "language": c.language} for c in cases]
    return RefitJob(
        store,
        "jury",
        "+".join(s.model_id for s in seats),
        data,
        rows,
        lambda _rows: fit_panel(fitted, rows_of, source, DEFAULT_VERDICTS, data),
        limit,
    )


@app.command("replay")
def replay_cmd(
    run_id: Annotated[str, typer.Argument(help="A stored jury run (see `judgelab runs list`).")],
    show_rounds: Annotated[bool, typer.Option("--rounds/--no-rounds", help="Show round numbers.")] = True,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun", help="Run the jury again from the recorded calls and say whether the result is identical."
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show a stored jury run step by step as the page showed it; optionally re-run it from its calls.
    A run that did not finish (interrupted, cancelled, failed, still running) is shown up to its last
    event and said to be incomplete; `--rerun` then says it has nothing to compare with (exit 1)."""
    # CLI start-up: loaded when the command runs
    from engine.events import incomplete_note
    from engine.jury.view import JuryView
    from engine.store import Store, StoreError

    try:
        store = Store()
        run = store.get_run(run_id)
    except StoreError as exc:
        raise fail(str(exc)) from None
    if run is None or not run.kind.startswith("jury."):
        raise fail(f"no jury run '{run_id}' — `judgelab runs list` shows the stored runs")
    rows = store.events(run_id)
    events = [(e.type, e.payload) for e in rows]
    note = incomplete_note(run.status, rows, run.error)
    view = JuryView.fold(events)
    identical = None
    if rerun and note is None:
        identical = _rerun(store, run)
    if as_json:
        say(
            json.dumps(
                {
                    "run_id": run_id,
                    "kind": run.kind,
                    "status": run.status,
                    "incomplete": note,
                    "events": [{"type": t, "payload": p} for t, p in events],
                    "rerun_identical": identical,
                },
                ensure_ascii=False,
                indent=2,
                default=str,
            )
        )
        if rerun and not identical:
            raise typer.Exit(1)
        return
    _print_view(view, rounds=show_rounds)
    if note:
        say(note)
    if rerun:
        if note:
            say(
                f"rerun from recorded calls: not compared — the run is {run.status}, so it has no final "
                "result to compare with"
            )
            raise typer.Exit(1)
        say("rerun from recorded calls: " + ("identical" if identical else "DIFFERENT"))
        if not identical:
            raise typer.Exit(1)


def _rerun(store: Store, run: Run) -> bool:
    # CLI start-up: loaded when the command runs
    from engine.jury.config import JuryCase, JuryConfig
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, comparable, run_case
    from models.errors import ReplayMiss
    from models.registry import ModelHub

    config = run.config or {}
    hub = ModelHub(call_log=store)
    jury = Jury(
        [JurorSeat.model_validate(s) for s in config["jurors"]],
        lambda m: hub.get(m, replay=True),
        # Runs stored before the `judge` setting existed were generated.
        JuryConfig.model_validate({"judge": "generate", **config["jury"]}),
    )
    try:
        _, result = asyncio.run(run_case(store, jury, JuryCase.model_validate(config["case"]), kind="jury.replay"))
    except ReplayMiss as exc:
        say(f"rerun from recorded calls: DIFFERENT — a request was never recorded ({exc})")
        return False
    original = (run.summary or {}).get("result")
    return original is not None and comparable(result.model_dump(mode="json")) == comparable(original)


def figures() -> Sequence[FigureBuilder]:
    # loaded when used: the report's charts load plotly
    from dashboard.mechanisms.jury.report import jury, jury_eval

    return (
        jury,
        jury_eval,
    )


def demo() -> DemoFlow:
    # loaded when used: the flow loads the engine
    from dashboard.mechanisms.jury.demo import record_page

    return record_page


def benchmarks() -> tuple[object, ...]:
    # loaded when used: `judgelab bench` only
    from dashboard.mechanisms.jury import bench, bench_default_case

    return (
        bench_default_case,
        bench,
    )


UI = MechanismUI(
    "jury",
    page="pages/jury.py",
    title="Jury",
    icon="⚖️",
    url_path="jury",
    cli=app,
    figures=figures,
    calibration_split="jury-calib.jsonl",
    calibration_job=calibration_job,
    labels=LabelWords(
        "Jury (the right verdict)",
        words=in_words,
        choices=("safe_pass", "needs_review", "unsafe_fail"),
    ),
    demo=demo,
    bench=benchmarks,
)
