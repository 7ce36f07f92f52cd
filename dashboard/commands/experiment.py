"""`judgelab experiment run | list | show | export`."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import check_output, fail, say, write_output
from engine.registry import scorecard_roles

if TYPE_CHECKING:
    from engine.experiments.scorecard import ScorecardPlan
    from engine.store import Store


app = typer.Typer(
    help="Experiments: sweeps and searches over case sets (decision parameters cost no call).", no_args_is_help=True
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _store() -> Any:
    from engine.store import Store, StoreError  # CLI start-up

    try:
        return Store()
    except StoreError as exc:
        raise fail(str(exc)) from None


def _print(value: object) -> None:
    from models.secrets import redact  # CLI start-up

    say(redact(json.dumps(value, indent=2, ensure_ascii=False, default=str)))


def _shown(store: Store, experiment_id: str) -> dict[str, Any]:
    from engine.experiments import show_experiment  # CLI start-up

    try:
        shown = show_experiment(store, experiment_id)
    except KeyError as exc:
        raise fail(str(exc.args[0])) from None
    return shown


@app.command("validate")
def validate_cmd(
    file: Annotated[Path, typer.Argument(help="The experiment's YAML file.")], as_json: JsonFlag = False
) -> None:
    """Check a definition as `run` does (schema, mechanism, every combination of the grid), running nothing."""
    from engine.experiments import DefinitionError, load_definition  # CLI start-up

    try:
        definition = load_definition(file)
    except DefinitionError as exc:
        raise fail(str(exc)) from None
    axes = definition.axis_lengths()
    if as_json:
        _print({"valid": True, "name": definition.name, "cells": definition.cell_count(), "axes": axes})
        return
    shape = " × ".join(f"{name} {n}" for name, n in axes.items()) or "no axes"
    cells = definition.cell_count()
    say(f"{file}: valid — {cells} cell{'' if cells == 1 else 's'} ({shape}; repeats {definition.repeats})")


@app.command("run")
def run_cmd(
    file: Annotated[Path, typer.Argument(help="The experiment's YAML file.")],
    executor: Annotated[str, typer.Option("--executor", help="local | ray (RAY_ADDRESS, else a local Ray).")] = "local",
    resume: Annotated[
        str | None, typer.Option("--resume", help="Resume experiment ID, skipping its finished cells.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run an experiment definition; every cell is a stored run tagged with the experiment id."""
    # CLI start-up: loaded when the command runs
    from engine.experiments import DefinitionError, load_definition, mechanism, run_experiment
    from models.errors import ReplayMiss

    if executor not in ("local", "ray"):
        raise fail(f"unknown executor {executor!r}: local or ray")
    try:
        definition = load_definition(file)
    except DefinitionError as exc:
        raise fail(str(exc)) from None
    store = _store()

    def line(row: dict[str, Any]) -> None:
        if not as_json:
            metric = definition.metric or mechanism(definition.mechanism).default_metric
            say(f"cell {row['cell']}: {metric_text(row, metric)} new_calls={row['new_calls']}")

    try:
        result = asyncio.run(
            run_experiment(definition, store, executor=executor, resume=resume, source=str(file), on_row=line)
        )
    except DefinitionError as exc:
        raise fail(str(exc)) from None
    except ReplayMiss as exc:
        raise fail(f"{exc} (the definition's calls: replay only)") from None
    if as_json:
        _print(result.as_dict())
    else:
        say(
            f"experiment {result.experiment_id}: {len(result.rows)} cells ({result.skipped} resumed), "
            f"{result.new_calls} new model calls, executor {result.executor}"
        )
        if result.best:
            say(f"best ({result.metric}): cell {result.best['cell']} = {result.best.get(result.metric)}")
        ties = store.get_run(result.run_id)
        if ties is not None and (ties.summary.get("ties") or {}).get("text"):
            say(ties.summary["ties"]["text"])


def metric_text(row: Mapping[str, Any], metric: str) -> str:
    """'accuracy=0.82'; a cell the settings refused, 'error: …'; a metric the cell has none of, 'accuracy=—'."""
    value = row.get(metric)
    if value is None and row.get("error"):
        return f"error: {row['error']}"
    return f"{metric}={'—' if value is None or value != value else value}"  # (value != value: NaN)


@app.command("list")
def list_cmd(as_json: JsonFlag = False) -> None:
    """Every experiment in the store (its latest run)."""
    from engine.experiments import list_experiments  # CLI start-up

    rows = list_experiments(_store())
    if as_json:
        _print(rows)
        return
    for r in rows:
        best = r.get("best") or {}
        say(
            f"{r['experiment_id']}  {r['status']:<11} {r['mechanism']:<10} cells={r['cells']} "
            f"best {metric_text(best, r.get('metric') or '')}  {r['name']}"
        )


@app.command("show")
def show_cmd(experiment_id: str, as_json: JsonFlag = False) -> None:
    """An experiment's definition, status and table (its finished cells)."""
    shown = _shown(_store(), experiment_id)
    if as_json:
        _print(shown)
        return
    say(
        f"{shown['experiment_id']} {shown['name']} — {shown['status']}, {shown['finished']}/{shown['cells']} "
        f"cells, {shown['new_calls']} new calls"
    )
    metric = shown["metric"]
    for row in shown["rows"]:
        params = " ".join(f"{p}={row.get(p)}" for p in shown["parameters"])
        ci = row.get(f"{metric}_ci")
        spread = f" ({ci[0]:.2f}–{ci[1]:.2f})" if isinstance(ci, list) else ""
        tie = " ≈ best" if row.get("tied_with_best") and row.get("cell") != (shown["best"] or {}).get("cell") else ""
        say(f"  cell {row['cell']}: {params} → {metric_text(row, metric)}{spread}{tie} (run {row['run_id']})")
    if shown["best"]:
        say(f"best: cell {shown['best']['cell']}")
    if (shown.get("ties") or {}).get("text"):
        say(shown["ties"]["text"])


@app.command("export")
def export_cmd(
    experiment_id: str,
    fmt: Annotated[str, typer.Option("--format", help="csv | json | html (self-contained report)")] = "csv",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write this file (default, or -: stdout).")
    ] = None,
) -> None:
    """Export an experiment's table."""
    from dashboard.report import experiment_export  # CLI start-up
    from models.files import shown_path  # CLI start-up

    if fmt not in ("csv", "json", "html"):
        raise fail(f"unknown format {fmt!r}: csv, json or html")
    shown = _shown(_store(), experiment_id)
    if write_output(output, experiment_export(shown, fmt)):  # stdout piped: the file's bytes exactly
        say(f"wrote {shown_path(str(output))}")


def _role_names() -> tuple[str, ...]:
    """The scorecard's roles, in its order (every registered mechanism with one)."""
    return tuple(scorecard_roles())


def _method_choices() -> dict[str, tuple[str, ...]]:
    """The judge methods `--methods` may pick, per role that has a choice."""
    return {name: role.methods for name, role in scorecard_roles().items() if role.methods}


def _scorecard_roles(given: list[str] | None) -> tuple[str, ...]:
    """--roles as a tuple in the scorecard's order; an unknown role is named with the known ones."""
    known = _role_names()
    if not given:
        return known
    chosen = {r.strip() for value in given for r in value.split(",") if r.strip()}
    unknown = sorted(chosen - set(known))
    if unknown:
        raise fail(f"--roles: unknown role {', '.join(unknown)}: {', '.join(known)}")
    return tuple(r for r in known if r in chosen)


def _methods_help() -> str:
    """The roles' judge methods in words, roles with the same choice together: 'handraise: judge, likelihood; jury
    and director: generate, likelihood'."""
    grouped: dict[tuple[str, ...], list[str]] = {}
    for name, methods in _method_choices().items():
        grouped.setdefault(methods, []).append(name)
    return "; ".join(f"{_and(names)}: {', '.join(methods)}" for methods, names in grouped.items())


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _scorecard_methods(given: list[str] | None) -> dict[str, tuple[str, ...]]:
    """--methods ROLE=M1,M2 as `ScorecardPlan.methods` (each role's choice, its default where not given); a bad role
    or method is named."""
    choices = _method_choices()
    out = dict(choices)
    for value in given or []:
        role, sep, listed = value.partition("=")
        role = role.strip()
        if not sep or role not in choices:
            raise fail(f"--methods {value!r}: ROLE=M1,M2 with ROLE one of {', '.join(choices)}")
        picked = tuple(dict.fromkeys(m.strip() for m in listed.split(",") if m.strip()))
        bad = [m for m in picked if m not in choices[role]]
        if bad or not picked:
            raise fail(f"--methods {value!r}: {role} takes {', '.join(choices[role])}")
        out[role] = picked
    return out


# `scorecard`'s options (--roles and --methods name the registered mechanisms: their help is read when the command
# is built, in its signature).
ModelsOpt = Annotated[
    list[str] | None,
    typer.Option("--models", help="A model to score (repeatable; default: every available model)."),
]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="local | ray (for the experiment cells).")]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="Only the first N cases of each benchmark (a quick look).")
]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, help="Hand-raise repeats (for consistency).")]
CallsOpt = Annotated[
    str, typer.Option("--calls", help="replay_fallthrough (default: a request made before is free) | replay | live")
]
ScorecardOutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        help="Also write the scorecard (rows, targets, marks) as JSON here — data/scorecard/bundled.json is "
        "the one the Models page shows before any scorecard is run. An existing file keeps its other rows: "
        "the rows measured now replace those of the same role, model and method.",
    ),
]


def scorecard_cmd(
    models: ModelsOpt = None,
    executor: ExecutorOpt = "local",
    roles: Annotated[
        list[str] | None,
        typer.Option("--roles", help="Only these roles (repeatable or comma-separated): " + ", ".join(_role_names())),
    ] = None,
    methods: Annotated[
        list[str] | None,
        typer.Option(
            "--methods",
            help=f"ROLE=M1,M2: the judge methods of a role ({_methods_help()}), e.g. --methods jury=likelihood.",
        ),
    ] = None,
    limit: LimitOpt = None,
    repeats: RepeatsOpt = 2,
    calls: CallsOpt = "replay_fallthrough",
    output: ScorecardOutputOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """The model scorecard: every available model and judge method through each mechanism's shipped
    benchmark (hand raise, skip judge, jury, director rubric, confidence), every run stored; each row marked
    against its role's target by its interval."""

    # CLI start-up: loaded when the command runs
    from engine.experiments.execution import HubModels
    from engine.experiments.scorecard import run_scorecard

    if executor not in ("local", "ray"):
        raise fail(f"unknown executor {executor!r}: local or ray")
    if calls not in ("replay_fallthrough", "replay", "live"):
        raise fail(f"unknown --calls {calls!r}: replay_fallthrough, replay or live")
    plan = _scorecard_plan(models, roles, methods, repeats, limit)
    check_output(output)
    store = _store()
    save_rows = _row_saver(output, _previous_scorecard(output), store)
    result = asyncio.run(run_scorecard(store, plan, HubModels(calls), executor=executor, on_row=save_rows))  # type: ignore[arg-type]
    save_rows(result)
    if as_json:
        _print(result)
        return
    _say_scorecard(result)


def _scorecard_plan(
    models: list[str] | None, roles: list[str] | None, methods: list[str] | None, repeats: int, limit: int | None
) -> ScorecardPlan:
    """The scorecard's plan: the models (checked against the catalog), roles and judge methods asked for."""
    # CLI start-up: loaded when the command runs
    from engine.experiments.scorecard import ScorecardPlan
    from models.catalog import CatalogError, load_catalog
    from models.registry import scoring_support

    try:
        catalog = load_catalog()
    except CatalogError as exc:
        raise fail(str(exc)) from None
    chosen = _scored_models(catalog, models)
    return ScorecardPlan(
        models=chosen,
        roles=_scorecard_roles(roles),
        repeats=repeats,
        limit=limit,
        can_score=lambda m: scoring_support(catalog.get(m)) != "none",
        methods=_scorecard_methods(methods),
    )


def _previous_scorecard(output: Path | None) -> dict[str, Any] | None:
    """The scorecard --output already holds (its other rows are kept), or None; a file this command did not write
    is an error before anything runs."""
    if output is None or not output.is_file():
        return None
    from engine.experiments.scorecard import shipped_scorecard  # CLI start-up

    previous = shipped_scorecard(output)
    if previous is None:
        raise fail(f"--output {output}: not a scorecard this command wrote (rows missing); nothing run")
    return previous


def _row_saver(output: Path | None, previous: dict[str, Any] | None, store: Store) -> Callable[[dict[str, Any]], None]:
    """What saves the scorecard's rows into --output as they come (nothing without --output)."""
    from engine.experiments.scorecard import merge_scorecards, save_scorecard  # CLI start-up
    from models.files import OutputError  # CLI start-up

    command = " ".join(["judgelab", *(shlex.quote(a) for a in sys.argv[1:])])

    def save_rows(result: dict[str, Any]) -> None:
        """The rows so far merged into --output: after each row, so a sitting cut short keeps what it measured."""
        if output is None:
            return
        try:
            save_scorecard(merge_scorecards(previous, result, store), output, command)
        except OutputError as exc:
            raise fail(f"--output {exc}") from None
        except OSError as exc:
            raise fail(f"--output {output}: cannot write ({exc.strerror or exc})") from None

    return save_rows


def _scored_models(catalog: Any, models: list[str] | None) -> list[str]:
    """The models named (checked against the catalog), else every available one but the built-in mock (a dry-run
    backend: named, it is scored too)."""
    from dashboard.commands import require_models  # CLI start-up
    from models.registry import check_availability  # CLI start-up

    if models:
        chosen = list(dict.fromkeys(m for given in models for m in given.split(",") if m.strip()))
        require_models(catalog, chosen)
        return chosen
    chosen = [
        m
        for m in catalog.ids
        if catalog.get(m).backend != "mock" and asyncio.run(check_availability(catalog.get(m))).available
    ]
    if not chosen:
        raise fail("no model is available (see `judgelab models list`)", code=2)
    return chosen


def _say_scorecard(result: dict[str, Any]) -> None:
    """The scorecard's rows, each with its target, its diagnoses and how it compares with its role's best."""
    from engine.comparison import stored_text  # CLI start-up

    say(f"scorecard run {result['run_id']} ({len(result['rows'])} rows)")
    for row in result["rows"]:
        metrics = " ".join(
            f"{k}={v}" for k, v in row["metrics"].items() if not k.endswith("_ci") and not isinstance(v, dict)
        )
        spent = f"calls={row.get('calls')} tokens={row.get('tokens')} latency_s={row.get('latency_s')}"
        state = f"error: {row['error']}" if row["error"] else f"{metrics} {spent}"
        say(f"  {row['role']:<10} {row['model'] or '-':<14} {row['method']:<10} {state}")
        target = row.get("target") or {}
        if target and not row["error"]:
            say(f"  {'':<10} {target['label']}: {target.get('text') or target['target']}")
        for key, mark in (("signal", "no_signal"), ("scale", "flat_scale")):
            diagnosis = row["metrics"].get(key)
            if isinstance(diagnosis, dict) and diagnosis.get("mark") == mark:
                say(f"  {'':<10} {diagnosis['label']}: {diagnosis['text']}")
        versus = row.get("versus_best") or {}
        if isinstance(versus.get("difference"), int | float):
            best = f"{versus['best_model']} · {versus['best_method']}"
            say(f"  {'':<10} vs the role's best ({best}): {stored_text(versus)}")
