"""`judgelab labels list | export | import | agreement`: the researcher's own labels (engine/labels), and the
refit of the hand-raise map from them (`judgelab calibrate-judge --labels`, `labels_refit`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import fail, say, write_output
from engine.registry import mechanisms

if TYPE_CHECKING:
    # CLI start-up
    from engine.store import Store

app = typer.Typer(help="Your labels: list, export, import, and the judges' agreement with them.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
# The mechanisms that take labels (their `LabelSpec`), in the labels' order.
LABELLED = [spec.name for spec in mechanisms() if spec.labels is not None]
Mechanism = Annotated[str | None, typer.Option("--mechanism", "-m", help=" | ".join(LABELLED) + ".")]
DEFAULT_MAP = "gemma3-270m+smollm2-135m"  # the hand raise's default: Gemma with its SmolLM2 partner
MapId = Annotated[str, typer.Option("--map", help="The map id (the judge model, or its ensemble's id).")]
User = Annotated[str | None, typer.Option("--user", help="Only this user's labels (default: everyone's).")]


def _store() -> Store:
    # CLI start-up
    from engine.store import Store, StoreError

    try:
        return Store()
    except StoreError as exc:
        raise fail(str(exc)) from None


def _mechanism(value: str | None, *, required: bool = False) -> str | None:
    # CLI start-up
    from engine.labels import label_mechanisms

    if value is None:
        if required:
            raise fail(f"--mechanism: give one of {', '.join(label_mechanisms())}", code=2)
        return None
    if value not in label_mechanisms():
        raise fail(f"--mechanism: {value!r} is not one of {', '.join(label_mechanisms())}", code=2)
    return value


def _emit(value: object) -> None:
    say(json.dumps(value, ensure_ascii=False, indent=2, default=str))


@app.command("list")
def list_cmd(
    mechanism: Mechanism = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Only the labels of this run.")] = None,
    user: User = None,
    all_versions: Annotated[
        bool, typer.Option("--all", help="Every label given, not only the newest of each item and user.")
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="The last N labels only.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """The labels, oldest first (the newest of each item and user, unless --all)."""
    # CLI start-up
    from engine.labels import list_labels

    labels = list_labels(
        _store(), mechanism=_mechanism(mechanism), run_id=run_id, user=user, latest=not all_versions, limit=limit
    )
    if as_json:
        _emit([{"id": lab.id} | lab.to_json() for lab in labels])
        return
    if not labels:
        say("no labels yet")
        return
    for lab in labels:
        note = f"  — {lab.note}" if lab.note else ""
        say(
            f"{lab.id:>5}  {lab.created_at:%Y-%m-%d %H:%M}  {lab.mechanism:<10} {lab.label:<8} {lab.item_key}"
            f"  run={lab.run_id or '-'}  by {lab.user} ({lab.source}){note}"
        )


@app.command("export")
def export_cmd(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write this file (default, or -: stdout).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl | csv.")] = "jsonl",
    mechanism: Mechanism = None,
    user: User = None,
) -> None:
    """Every label (the newest of each item and user is not enough to restore history: all are exported). The
    file, or stdout when piped or redirected, holds exactly the bytes `labels import` reads back."""
    # CLI start-up
    from engine.labels import export_labels, list_labels
    from models.files import shown_path

    if fmt not in ("jsonl", "csv"):
        raise fail(f"--format: {fmt!r} is not one of jsonl, csv", code=2)
    labels = list_labels(_store(), mechanism=_mechanism(mechanism), user=user, latest=False)
    if write_output(output, export_labels(labels, fmt)):  # type: ignore[arg-type]
        say(f"{len(labels)} label(s) written to {shown_path(str(output))}", err=True)


@app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(help="A JSONL or CSV labels file (as `labels export` writes).")],
    fmt: Annotated[str | None, typer.Option("--format", help="jsonl | csv (default: the file's suffix).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Import labels: every row is checked first, then all are written in one go — or none, with the bad lines.
    A label already stored is not stored again: "N imported, M already present"."""
    # CLI start-up
    from engine.inputs import InputError, read_text
    from engine.labels import LabelError, LabelImportError, run_import
    from engine.labels.io import format_of
    from engine.store import StoreError

    try:
        chosen = format_of(path, fmt)
        text = read_text(path)
    except InputError as exc:
        raise fail(str(exc)) from None
    except LabelError as exc:
        raise fail(str(exc), code=2) from None
    try:
        report = asyncio.run(run_import(_store(), text, chosen, str(path)))
    except LabelImportError as exc:
        raise fail(str(exc)) from None
    except StoreError as exc:
        raise fail(f"{exc}; nothing was imported") from None
    if as_json:
        _emit(report.to_json())
        return
    say(f"{report.words()} ({report.lines} label row(s) in {path}; run {report.run_id})")


@app.command("agreement")
def agreement_cmd(
    mechanism: Mechanism = None,
    user: User = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge/map.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """The judges' agreement with the labels: confusion matrix, accuracy (Wilson interval), κ (bootstrap
    interval) with the base rates, the most confidently wrong items, agreement over time."""
    # CLI start-up
    from engine import stats
    from engine.labels import agreement, label_mechanisms

    store = _store()
    chosen = [_mechanism(mechanism)] if mechanism else list(label_mechanisms())
    results = [a for m in chosen if m for a in agreement(store, mechanism=m, user=user, judge=judge)]
    if as_json:
        _emit([a.to_json() for a in results])
        return
    if not results:
        say("no labels with a judge's prediction yet")
        return
    for a in results:
        say(f"{a.mechanism} · {a.judge}: n={a.n}")
        say(f"  accuracy {stats.fmt(a.accuracy, a.accuracy_ci)}   κ {stats.fmt(a.kappa, a.kappa_ci)}")
        say("  base rates (yours / judge): " + ", ".join(f"{k} {h:.2f}/{j:.2f}" for k, (h, j) in a.base_rates.items()))
        width = max(len(v) for v in a.labels)
        say("  " + " " * width + "  predicted: " + "  ".join(f"{v:>{width}}" for v in a.labels))
        for t in a.labels:
            say(f"  {t:>{width}}  " + " " * 11 + "  ".join(f"{a.confusion[t][p]:>{width}}" for p in a.labels))
        for w in a.confidently_wrong[:5]:
            p = "" if w["probability"] is None else f" p={w['probability']:.2f}"
            say(f"  wrong: {w['key']} (run {w['run_id'] or '-'}): yours {w['label']}, judge {w['predicted']}{p}")


@app.command("corrected")
def corrected_cmd(
    run_id: Annotated[str, typer.Argument(help="A stored run whose items you labelled.")],
    user: User = None,
    as_json: JsonFlag = False,
) -> None:
    """A judge's rate over a run corrected by your labels on some of its items (PPI++): the judge's rate, your
    labels' rate, and the corrected estimate with a 95 % interval that carries both uncertainties, plus the label
    budget that would halve it (docs/evidence.md)."""
    # CLI start-up
    from engine.labels.corrected import corrected_rates, rate_line

    store = _store()
    run = store.get_run(run_id)
    if run is None:
        raise fail(f"no run {run_id} — `judgelab runs list` shows the recorded ones")
    rates = corrected_rates(store, run, user=user)
    if as_json:
        _emit({"run_id": run.id, "kind": run.kind, "rates": [r.to_dict() for r in rates]})
        return
    if not rates:
        say(f"no label on {run.id}'s items yet (a {run.kind} run): label some on the Labels page, then ask again")
        return
    for rate in rates:
        say(rate_line(rate))


def labels_refit(only: str, with_split: bool, adopt: bool, as_json: bool, user: str | None = None) -> None:
    """`judgelab calibrate-judge --labels`: a candidate hand-raise map fitted on your labels, cross-validated on
    them beside the map in use, saved as a new version; adopted only with --adopt."""
    # CLI start-up
    from engine import stats
    from engine.labels import LabelError, adopt_map, refit_from_labels, save_candidate
    from engine.store import StoreError

    chosen = [m.strip() for m in only.split(",") if m.strip()]
    if chosen != ["handraise"]:
        raise fail(
            "--labels refits the hand-raise map: use --only handraise (the other judges record no features)", code=2
        )
    store = _store()
    models: Any = None
    if with_split:
        # CLI start-up
        from models.registry import ModelHub

        models = ModelHub(call_log=store).get
    try:
        refit = refit_from_labels(store, user=user, with_split=with_split, models=models)
        path = save_candidate(refit)
        if adopt:
            adopt_map(store, "handraise", refit.model_id, refit.candidate.version)
    except (LabelError, ValueError, StoreError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        _emit(refit.to_json() | {"file": str(path), "adopted": adopt})
        return
    c = refit.comparison
    say(f"handraise map {refit.model_id}: candidate {refit.candidate.version} — {refit.provenance}")
    say(f"  held-out labels ({refit.folds}-fold CV by message), n={refit.n_labels}:")
    in_use = refit.current.version if refit.current else "none"
    say(f"    map in use ({in_use}): {stats.fmt(refit.current_score, refit.current_score_ci)}")
    say(f"    candidate: {stats.fmt(refit.candidate_score, refit.candidate_score_ci)}")
    diff = "—" if c.difference is None else f"{c.difference:+.2f}"
    p_value = "—" if c.p_value is None else f"{c.p_value:.4f}"
    say(f"    difference {diff} ({c.test} p={p_value}, discordant {c.discordant})")
    say(
        f"  saved: {path}"
        + ("  (in use now)" if adopt else f"  — use it: judgelab labels adopt {refit.candidate.version}")
    )


@app.command("maps")
def maps_cmd(
    model_id: Annotated[
        str, typer.Option("--map", help="The map id (judge model, or its ensemble id).")
    ] = "gemma3-270m+smollm2-135m",
    as_json: JsonFlag = False,
) -> None:
    """The hand-raise map's versions: the shipped one and every refit from labels; which is in use."""
    # CLI start-up
    from engine.labels import LabelError, map_versions

    try:
        versions = map_versions("handraise", _map_id(model_id))
    except LabelError as exc:
        raise fail(str(exc)) from None
    if as_json:
        _emit([v.to_json() for v in versions])
        return
    for v in versions:
        what = f"DAMAGED: {v.damaged}" if v.damaged else v.provenance
        say(f"{'*' if v.in_use else ' '} {v.version:<18} {v.created:<18} {what}")
        if v.fallback:
            say(f"  in use because the adopted map cannot be: {v.fallback}")


def _map_id(value: str) -> str:
    """`--map` as a map id (a closed name, never a path), else a one-line usage error."""
    # CLI start-up
    from engine.judgemaps import is_name, shown

    if not is_name(value):
        raise fail(f"--map: {shown(value)} is not a map id", code=2)
    return value


@app.command("adopt")
def adopt_cmd(
    version: Annotated[str, typer.Argument(help="A version from `labels maps`, or `shipped`.")],
    model_id: Annotated[
        str, typer.Option("--map", help="The map id (judge model, or its ensemble id).")
    ] = "gemma3-270m+smollm2-135m",
) -> None:
    """Use this version of the hand-raise map from now on (`shipped` restores the shipped map)."""
    # CLI start-up
    from engine.labels import LabelError, adopt_map

    try:
        adopt_map(None, "handraise", _map_id(model_id), version)
    except LabelError as exc:
        raise fail(str(exc)) from None
    say(f"handraise map {model_id}: {version} in use")
