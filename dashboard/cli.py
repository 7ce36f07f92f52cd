"""The `judgelab` command. Heavy imports (torch, llama_cpp, streamlit) happen inside the commands
that need them, so `judgelab --help` and `judgelab runs list` start fast."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import check_output, fail, say, write_output

if TYPE_CHECKING:
    from types import FrameType

    from engine.store import Run

app = typer.Typer(
    name="judgelab",
    help="A workbench for the mechanisms that decide whether and how well an LLM should speak.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="The model catalog: list models, check one.", no_args_is_help=True)
runs_app = typer.Typer(help="Recorded runs and their LLM calls.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(runs_app, name="runs")


def _register_mechanisms() -> None:
    # Sub-apps import only typer at module level, so registering them keeps the start fast.
    # CLI start-up
    from dashboard.commands import calibrate, demo, experiment, labels
    from dashboard.ui_registry import uis

    for ui in uis():  # each mechanism's sub-app (`dashboard.mechanism_ui`)
        if ui.cli is not None:
            app.add_typer(ui.cli, name=ui.name)
    app.add_typer(experiment.app, name="experiment")
    app.command("scorecard")(experiment.scorecard_cmd)
    app.command("calibrate-judge")(calibrate.calibrate_judge_cmd)
    app.add_typer(demo.app, name="demo")
    app.add_typer(labels.app, name="labels")


_register_mechanisms()

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
APP_PATH = Path(__file__).with_name("app.py")
SERVER_PATH = Path(__file__).with_name("server.py")  # app.py behind the Host check


@app.callback()
def _safe_output() -> None:
    # Whatever a command prints or logs passes key redaction (main() does it too, before any output).
    from models.secrets import install_log_redaction, redact_std_streams  # CLI start-up

    install_log_redaction()
    redact_std_streams()


def emit_json(value: object) -> None:
    from models.secrets import redact  # CLI start-up

    say(redact(json.dumps(value, ensure_ascii=False, indent=2, default=str)))


def _store() -> Any:
    from engine.store import Store, StoreError  # CLI start-up

    try:
        return Store()
    except StoreError as exc:
        raise fail(str(exc)) from None


def _catalog() -> Any:
    from models.catalog import CatalogError, load_catalog  # CLI start-up

    try:
        return load_catalog()
    except CatalogError as exc:
        raise fail(str(exc)) from None


# -- dashboard ----------------------------------------------------------------------------------
@app.command()
def dashboard(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    headless: Annotated[bool, typer.Option(help="Do not open a browser.")] = True,
) -> None:
    """Start the Streamlit dashboard (bundled local model, SQLite store) on http://HOST:PORT.

    Only requests addressed to HOST or localhost are answered (others get 403: DNS rebinding);
    JUDGELAB_ALLOWED_HOSTS=name,… adds names, e.g. for a reverse proxy."""

    # CLI start-up: loaded when the command runs
    from dashboard.hostcheck import allowed_hosts
    from engine.config import get_settings

    upload_mb = max(1, math.ceil(get_settings().max_input_mb))  # uploads end at the input limit too

    args = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(SERVER_PATH),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
        "--server.maxUploadSize",
        str(upload_mb),
    ]
    for name in allowed_hosts(host):  # Streamlit's own WebSocket check, behind dashboard.hostcheck's
        args += ["--server.allowedHosts", name]
    say(f"judgelab dashboard on http://{host}:{port}")
    os.chdir(APP_PATH.parent.parent)  # .streamlit/config.toml and secrets.toml live at the project root
    os.execv(sys.executable, args)


# -- models -------------------------------------------------------------------------------------
@models_app.command("list")
def models_list(as_json: JsonFlag = False) -> None:
    """Every catalog entry, available or not, and why."""
    from models.registry import check_all, scoring_support  # CLI start-up

    catalog = _catalog()
    availability = {a.model_id: a for a in asyncio.run(check_all(catalog))}
    rows = [
        {
            "id": s.id,
            "backend": s.backend,
            "model": s.model,
            "name": s.profile.name,
            "available": availability[s.id].available,
            "reason": availability[s.id].reason,
            "price_in_per_1k": s.price_in_per_1k,
            "price_out_per_1k": s.price_out_per_1k,
            "default_for": s.default_for,
            "tuning": s.tuning,
            "scoring": scoring_support(s),
            "preferred_judge": s.preferred_judge,
        }
        for s in catalog.models
    ]
    if as_json:
        emit_json(rows)
        return
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        say("✓" if r["available"] else "✗", fg=typer.colors.GREEN if r["available"] else typer.colors.RED, nl=False)
        say(f" {r['id']:<{width}}  {r['backend']:<9}  {r['reason']}")


@models_app.command("judges")
def models_judges(as_json: JsonFlag = False) -> None:
    """Every shipped judge map and its diagnosis: measurable signal, or not (and why), from its stored
    cross-validated figures, then the director rubric's from the shipped scorecard — shown wherever the judge
    is offered."""
    from engine.diagnostics import shipped_diagnoses  # CLI start-up
    from engine.experiments.scorecard import scorecard_judge_diagnoses  # CLI start-up

    rows = [d.to_dict() for d in [*shipped_diagnoses(), *scorecard_judge_diagnoses()]]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        say(f"{r['label']:<28} {r['judge']}: {r['text']}")


@models_app.command("check")
def models_check(
    model_id: Annotated[str, typer.Argument(help="A catalog id, e.g. gemma3-270m.")],
    as_json: JsonFlag = False,
) -> None:
    """Send one structured test judgment through MODEL_ID; print the parsed JSON, tokens, latency."""
    # CLI start-up: loaded when the command runs
    from dashboard.commands import require_models
    from engine.modelruns import check_model
    from models.errors import ModelError
    from models.registry import ModelHub

    catalog = _catalog()
    require_models(catalog, [model_id])
    store = _store()
    hub = ModelHub(catalog, call_log=store)
    try:
        result = asyncio.run(check_model(store, hub.get(model_id), model_id))
    except ModelError as exc:
        raise fail(str(exc), code=3) from None
    if as_json:
        emit_json(result)
        return
    say(json.dumps(result["parsed"], ensure_ascii=False, indent=2))
    say(
        f"tokens: {result['prompt_tokens']} in / {result['completion_tokens']} out · "
        f"latency {result['latency_s']} s · {result['tokens_per_s']} tok/s · cost ${result['cost']:.6f}"
    )
    if result["flags"]:
        say(f"flags: {', '.join(result['flags'])}")
    say(f"recorded as run {result['run_id']}, call {result['call_id']}")


# -- runs ---------------------------------------------------------------------------------------
def _run_row(run: Run, totals: dict[str, float]) -> dict[str, Any]:
    return {
        "id": run.id,
        "kind": run.kind,
        "name": run.name,
        "status": run.status,
        "started_at": run.started_at.isoformat(),
        "duration_s": run.duration_s,
        "calls": int(totals.get("calls", 0)),
        "errors": int(totals.get("errors", 0)),
        "prompt_tokens": int(totals.get("prompt_tokens", 0)),
        "completion_tokens": int(totals.get("completion_tokens", 0)),
        "cost": totals.get("cost", 0.0),
        # replayed calls spend nothing; this is what the recorded originals cost (None: nothing replayed)
        "would_cost": totals.get("would_cost"),
        "error": run.error,
    }


def _when(value: str | None, option: str, end_of_day: bool = False) -> Any:
    """A --since/--until value: an ISO date (a whole day) or date and time; UTC unless it says otherwise."""

    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise fail(f"{option} {value!r} is not a date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM)") from None
    if end_of_day and len(value) <= 10:
        parsed = datetime.combine(parsed.date(), time()) + timedelta(days=1, microseconds=-1)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@runs_app.command("list")
def runs_list(
    kind: Annotated[str | None, typer.Option(help="Only runs whose kind starts with this.")] = None,
    search: Annotated[
        str,
        typer.Option(
            "--search",
            "-s",
            help="Words that must each appear in the run's id, name, kind, error or config (case-insensitive).",
        ),
    ] = "",
    status: Annotated[list[str] | None, typer.Option(help="Only runs with this status (repeatable).")] = None,
    model: Annotated[str, typer.Option(help="Only runs that called this model or name it in their config.")] = "",
    config_hash: Annotated[str, typer.Option("--hash", help="Only runs whose config hash starts with this.")] = "",
    tag: Annotated[list[str] | None, typer.Option(help="Only runs with this tag (repeatable: all of them).")] = None,
    since: Annotated[str | None, typer.Option(help="Started on or after this date (YYYY-MM-DD[THH:MM], UTC).")] = None,
    until: Annotated[str | None, typer.Option(help="Started on or before this date (the whole day).")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 50,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many matching runs (paging).")] = 0,
    cells: Annotated[
        bool,
        typer.Option(
            "--cells",
            help="List experiment cells and recordings too (by default an experiment is one line, "
            "its cells under it: `runs list --cells --search EXPERIMENT_ID`).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The recorded runs, newest first, filtered as on the Runs page; an experiment is one line."""
    # CLI start-up
    from engine.history import EXPERIMENT_KIND, MEMBER_KINDS, display_names, experiment_line, experiment_of
    from engine.store import RUN_STATUSES, RunFilter  # CLI start-up

    unknown = [s for s in status or [] if s not in RUN_STATUSES]
    if unknown:
        raise fail(f"unknown status {', '.join(unknown)} — one of {', '.join(RUN_STATUSES)}")
    grouped = not cells and not (kind or "").startswith(EXPERIMENT_KIND + ".")  # `--kind experiment.cell`: cells
    where = RunFilter(
        text=search,
        kind_prefix=kind or "",
        exclude_kinds=MEMBER_KINDS if grouped else (),
        statuses=tuple(status or ()),
        model=model,
        config_hash=config_hash,
        tags=tuple(tag or ()),
        started_from=_when(since, "--since"),
        started_to=_when(until, "--until", end_of_day=True),
    )
    store = _store()
    runs = store.search_runs(where, limit=limit, offset=offset)
    totals = store.run_totals([r.id for r in runs])
    tags = store.tags([r.id for r in runs])
    titles = display_names(store, runs)
    rows = [
        _run_row(r, totals.get(r.id, {}))
        | {
            "tags": tags.get(r.id, []),
            "title": titles[r.id],
            "experiment_id": experiment_of(r),
            "experiment": experiment_line(r) if r.kind == EXPERIMENT_KIND else None,
        }
        for r in runs
    ]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        unfiltered = where in (RunFilter(), RunFilter(exclude_kinds=MEMBER_KINDS))
        say("no runs match" if not unfiltered or offset else "no runs recorded yet")
        return
    for r in rows:
        say(
            f"{r['id']}  {r['kind']:<16} {r['status']:<11} calls={r['calls']:<3} "
            f"tokens={r['prompt_tokens'] + r['completion_tokens']:<6} cost=${r['cost']:.5f}"
            + _would_cost_text(r["would_cost"])
            + (f"  [{', '.join(r['tags'])}]" if r["tags"] else "")
            + (f"  {r['title']}" if r["title"] else "")
            + (f"  ({r['experiment']})" if r["experiment"] else "")
        )


@runs_app.command("export")
def runs_export(
    run_id: Annotated[str, typer.Argument()],
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv | json | html")] = "json",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="File to write (default RUN_ID.zip / RUN_ID.TABLE.csv / .json / .html here); - for stdout.",
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option(help="csv: only this table, as one CSV file (default: every table of the run in one zip)."),
    ] = None,
) -> None:
    """Export one run: CSV of its tables (a zip, or one --table), the whole run as JSON, or a self-contained
    HTML report (config, headline figures, interactive charts, event timeline) that opens offline."""
    from engine.exports import ExportError, csv_zip, load_run, run_json, table_csv, tables  # CLI start-up
    from models.files import shown_path  # CLI start-up

    if fmt not in ("csv", "json", "html"):
        raise fail(f"--format must be csv, json or html, not {fmt!r}")
    if table is not None and fmt != "csv":
        raise fail("--table goes with --format csv")
    store = _store()
    try:
        record = load_run(store, run_id)
        if fmt == "json":
            data, suffix = run_json(record).encode("utf-8"), ".json"
        elif fmt == "html":
            from dashboard.report import report_of  # CLI start-up

            data, suffix = report_of(record).encode("utf-8"), ".html"
        elif table is not None:
            data, suffix = table_csv(record, table), f".{table}.csv"
        else:
            data, suffix = csv_zip(record), ".zip"
    except ExportError as exc:
        raise fail(str(exc)) from None
    if str(output) == "-" and suffix == ".zip":
        raise fail(
            "a zip of every table does not go to stdout — give --table NAME or --output FILE "
            f"(tables: {', '.join(tables(record))})"
        )
    target = output or Path(f"{run_id}{suffix}")
    if write_output(target, data):  # stdout for -: the text, exactly (no byte order mark)
        say(f"wrote {shown_path(target)} ({len(data):,} bytes)")


def _would_cost_text(would_cost: float | None) -> str:
    return "" if would_cost is None else f" (replayed: would have cost ${would_cost:.5f})"


@runs_app.command("show")
def runs_show(run_id: Annotated[str, typer.Argument()], as_json: JsonFlag = False) -> None:
    """One run: its config, events and every LLM call."""
    store = _store()
    run = store.get_run(run_id)
    if run is None:
        raise fail(f"no run {run_id} — `judgelab runs list` shows the recorded ones")
    totals = store.run_totals([run_id]).get(run_id, {})
    data = _run_row(run, totals) | {
        "config": run.config,
        "summary": run.summary,
        "events": [
            {"seq": e.seq, "type": e.type, "ts": e.ts.isoformat(), "payload": e.payload} for e in store.events(run_id)
        ],
        "calls": [
            {
                "id": c.id,
                "purpose": c.purpose,
                "model_id": c.model_id,
                "backend": c.backend,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "latency_s": c.latency_s,
                "cost": c.cost,
                "would_cost": c.would_cost,
                "error": c.error,
                "error_type": c.error_type,
                "flags": json.loads(c.flags_json),
                "raw_text": c.raw_text,
                "parsed": json.loads(c.parsed_json) if c.parsed_json else None,
                "request": json.loads(c.request_json),
            }
            for c in store.calls(run_id)
        ],
    }
    if as_json:
        emit_json(data)
        return
    say(f"run {run.id} · {run.kind} · {run.status} · started {run.started_at:%Y-%m-%d %H:%M:%S}")
    say(f"config: {json.dumps(run.config, ensure_ascii=False)}")
    say(f"calls: {len(data['calls'])} · cost ${data['cost']:.5f}" + _would_cost_text(data["would_cost"]))
    if run.error:
        say(f"error: {run.error}")
    for e in data["events"]:
        say(f"  [{e['seq']:>3}] {e['type']}")
    for c in data["calls"]:
        status = c["error_type"] or "ok"
        say(
            f"  call {c['id']}: {c['model_id']} ({c['purpose']}) {status} · "
            f"{c['prompt_tokens']}+{c['completion_tokens']} tokens · {c['latency_s']:.2f} s · ${c['cost']:.5f}"
            + _would_cost_text(c["would_cost"])
        )


def _two_runs(a: str, b: str) -> tuple[Any, Any, Any]:
    store = _store()
    runs = []
    for run_id in (a, b):
        run = store.get_run(run_id)
        if run is None:
            raise fail(f"no run {run_id} — `judgelab runs list` shows the recorded ones")
        runs.append(run)
    return store, runs[0], runs[1]


@runs_app.command("compare")
def runs_compare(
    a: Annotated[str, typer.Argument(help="Run A (the baseline).")],
    b: Annotated[str, typer.Argument(help="Run B, of the same kind.")],
    as_json: JsonFlag = False,
) -> None:
    """Two runs of one kind: what their configs change; where the kind has items, every metric both share as B − A
    with its interval and p-value (paired on the items both judged — a two-sample test where they judged different
    items, said so), Holm-adjusted across the metrics; the other headline figures side by side, rounded to what
    their intervals support."""
    # CLI start-up: loaded when the command runs
    from engine.comparison import comparison_row
    from engine.history import NotComparable, cell, compare_runs, figure_rows
    from engine.outcomes import NoItems, comparison_text, diff_runs

    store, run_a, run_b = _two_runs(a, b)
    try:
        comparison = compare_runs(run_a, run_b, store.run_totals([a, b]))
    except NotComparable as exc:
        raise fail(str(exc)) from None
    try:
        diff = diff_runs(store, run_a, run_b)
        paired, items_note = diff.comparisons, diff.basis
    except NoItems as exc:
        paired, items_note = {}, str(exc)
    if as_json:
        emit_json(
            {
                "a": a,
                "b": b,
                "kind": run_a.kind,
                "config_changes": [
                    {"path": c.path, "change": c.change, "a": c.a, "b": c.b} for c in comparison.changes
                ],
                "figures": [{"name": n, "a": x, "b": y} for n, x, y in comparison.figures],
                "paired": {name: comp.to_dict() for name, comp in paired.items()},
                "comparison": [comparison_row(name, comp) for name, comp in paired.items()],
                "items": items_note,
            }
        )
        return
    say(f"{a} → {b} ({run_a.kind})")
    say("config: " + ("the same" if not comparison.changes else f"{len(comparison.changes)} change(s)"))
    for change in comparison.changes:
        say(f"  {change.change:<8} {change.path}: {cell(change.a, 60)} → {cell(change.b, 60)}")
    say(f"items: {items_note}")
    for name, comp in paired.items():
        say("  " + comparison_text(name, comp))
    rows = [r for r in figure_rows(comparison, frozenset(paired)) if r["A"] != r["B"]]
    if rows:
        say("other figures (one value per run, no interval):")
    for row in rows:
        say(f"  {row['figure']}: {row['A']} → {row['B']}" + (f" ({row['B − A']})" if row["B − A"] else ""))


@runs_app.command("diff")
def runs_diff(
    a: Annotated[str, typer.Argument(help="Run A (the baseline).")],
    b: Annotated[str, typer.Argument(help="Run B, of the same kind.")],
    as_json: JsonFlag = False,
) -> None:
    """The items whose outcome differs between two runs of one kind (right→wrong, wrong→right, a changed
    label), each with both outputs, and B − A on the items both judged."""
    # CLI start-up: loaded when the command runs
    from engine.history import NotComparable
    from engine.outcomes import NoItems, diff_runs, diff_text

    store, run_a, run_b = _two_runs(a, b)
    try:
        diff = diff_runs(store, run_a, run_b)
    except (NotComparable, NoItems) as exc:
        raise fail(str(exc)) from None
    if as_json:
        emit_json(diff.to_json())
        return
    for line in diff_text(diff):
        say(line)


# -- bench --------------------------------------------------------------------------------------
@app.command()
def bench(
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only this benchmark, or those a glob matches ('experiment.*'; repeatable)."),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Repetitions per measurement.")] = 5,
    as_json: JsonFlag = False,
    output: Annotated[Path | None, typer.Option(help="Also write the JSON report here.")] = None,
) -> None:
    """The benchmark harness: median, min, max over repeated runs and the ratios each exists to show."""
    from dashboard.bench import UnknownBenchmark, run_benchmarks, select_benchmarks  # CLI start-up

    try:
        names = select_benchmarks(only)
    except UnknownBenchmark as exc:
        raise fail(str(exc)) from None
    check_output(output)  # before the benchmarks run
    results = run_benchmarks(names, repeat=repeat, progress=None if as_json else say)
    report = [r.model_dump() for r in results]
    if output:
        write_output(output, json.dumps(report, indent=2, ensure_ascii=False))  # redacted, atomic
    if as_json:
        emit_json(report)
        return
    for r in results:
        say("")
        say(r.describe())


# -- the process: stop signals and errors -------------------------------------------------------
_stop_signal: list[int] = []


def _on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    """SIGINT / SIGTERM: cancel the work so every open run closes as `cancelled` with its events so far.
    Inside an event loop its tasks are cancelled (as asyncio does for Ctrl-C); elsewhere KeyboardInterrupt
    unwinds. A second SIGINT stops at once; a second SIGTERM is ignored while the runs are closed."""
    from engine.events import set_cancel_reason  # CLI start-up

    if _stop_signal:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        return
    _stop_signal.append(signum)
    name = signal.Signals(signum).name
    set_cancel_reason(f"{name} received" + (" (Ctrl-C)" if signum == signal.SIGINT else ""))
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon_threadsafe(lambda: None)  # wake the loop if it waits on I/O


def _known_errors() -> tuple[type[BaseException], ...]:
    # CLI start-up: loaded when the command runs
    from engine.config import ConfigError
    from engine.inputs import InputError
    from engine.store import StoreError

    return ConfigError, InputError, StoreError


def main() -> None:
    """Run the CLI: a clear one-line error (never a traceback) for bad input or environment, and exit
    130 / 143 after SIGINT / SIGTERM with the running run(s) recorded as cancelled."""
    from models.secrets import install_log_redaction, redact_std_streams  # CLI start-up

    install_log_redaction()
    redact_std_streams()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_stop_signal)
    try:
        app()  # usage errors and typer.Exit end here as SystemExit
        code = 0
    except SystemExit:
        if not _stop_signal:
            raise
        code = _cancelled()
    except (KeyboardInterrupt, asyncio.CancelledError):
        code = _cancelled()
    except _known_errors() as exc:
        say(f"error: {exc}", fg=typer.colors.RED, err=True)
        code = 1
    except Exception as exc:
        if os.environ.get("JUDGELAB_DEBUG"):
            raise
        say(
            f"error: unexpected {type(exc).__name__}: {exc} (JUDGELAB_DEBUG=1 shows where)",
            fg=typer.colors.RED,
            err=True,
        )
        code = 1
    sys.exit(code)


def _cancelled() -> int:
    from engine.events import cancel_reason  # CLI start-up

    signum = _stop_signal[0] if _stop_signal else signal.SIGINT
    say(
        f"cancelled: {cancel_reason(KeyboardInterrupt())} — any run in progress is recorded as cancelled "
        "with its events so far",
        fg=typer.colors.YELLOW,
        err=True,
    )
    return 128 + signum


if __name__ == "__main__":
    main()
