"""`judgelab calibrate-judge`: refit every likelihood (and embedding) judge map in one go."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import fail, run_calibration, say
from dashboard.ui_registry import ui, uis

if TYPE_CHECKING:
    from engine.refit import RefitJob

# In the order they run; each refits from its own calibration split under data/calibration/.
SPLITS = {u.name: u.calibration_split for u in uis() if u.calibration_job}
MECHANISMS = tuple(SPLITS)


def _job(mechanism: str, data: Path, model_id: str, limit: int | None) -> RefitJob:
    job = ui(mechanism).calibration_job
    if job is None:
        raise ValueError(f"{mechanism} has no calibration job")
    return job(data, model_id, limit)


def _summary(payload: dict[str, Any]) -> dict[str, Any]:
    """A refit as the summary shows it: which files, fitted when, with their held-out figures."""
    return {
        "mechanism": payload["mechanism"],
        "run_id": payload["run_id"],
        "rows": payload["rows"],
        "maps": [
            {
                "file": path,
                "name": cal["name"],
                "model_id": cal["model_id"],
                "version": cal["version"],
                "metrics": cal.get("metrics") or {},
            }
            for path, cal in zip(payload["files"], payload["calibrations"], strict=True)
        ],
    }


HELD_OUT = ("cv_f1", "cv_top1", "cv_auc", "loo_case_accuracy", "loo_case_accuracy_after_round", "others_weight")


def calibrate_judge_cmd(
    only: Annotated[
        str, typer.Option("--only", help=f"Comma-separated mechanisms (default: all of {', '.join(MECHANISMS)}).")
    ] = ",".join(MECHANISMS),
    model_id: Annotated[
        str,
        typer.Option("--model", help="The judge model (the hand raise adds its default likelihood partners)."),
    ] = "gemma3-270m",
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Where the calibration splits are (default: data/calibration/, beside the maps); never a benchmark.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=2, help="Only each split's first N items: a quick check (needs --output-dir)."),
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where the fitted maps go (default: data/calibration/).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    labels: Annotated[
        bool,
        typer.Option(
            "--labels",
            help="Fit a candidate hand-raise map on your labels (no model call), cross-validated beside the map in "
            "use, saved as a new version (`judgelab labels maps`); used only with --adopt.",
        ),
    ] = False,
    with_split: Annotated[
        bool, typer.Option("--with-split", help="--labels: fit on your labels plus the shipped split (model calls).")
    ] = False,
    adopt: Annotated[bool, typer.Option("--adopt", help="--labels: use the candidate map from now on.")] = False,
) -> None:
    """Refit the judge maps of every mechanism — hand raise (likelihood, embedding and the gate), skip judge, jury,
    confidence self-evaluation (the signals and the likelihood map), director rubric signals — each on its
    calibration split, each a run of kind `calibration` with every
    call recorded, and print the files written with their held-out figures. Run it after changing the
    model or llama.cpp: the maps read the model's raw log-probabilities, and a new kernel shifts them."""
    if labels:
        from dashboard.commands.labels import labels_refit  # CLI start-up

        return labels_refit(only if only != ",".join(MECHANISMS) else "handraise", with_split, adopt, as_json)
    if with_split or adopt:
        raise fail("--with-split and --adopt go with --labels", code=2)
    from engine.judgemaps import CALIBRATION_DIR, is_name, shown  # CLI start-up

    if not is_name(model_id):  # it names the map files: refused before any model is loaded
        raise fail(f"--model: {shown(model_id)} cannot name a map (letters, digits and . _ : + -, no '..')", code=2)
    chosen = [m.strip() for m in only.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MECHANISMS]
    if unknown or not chosen:
        raise fail(f"--only: {', '.join(unknown) or 'nothing'} — choose from {', '.join(MECHANISMS)}", code=2)
    if limit is not None and output_dir is None:
        raise fail("--limit fits maps on part of a split: give --output-dir, so the shipped maps stay", code=2)
    folder = data_dir or CALIBRATION_DIR
    # Every split is read and every model checked before the first map is written: a bad jury split does
    # not surface after the hand-raise maps have been replaced.
    jobs = [(m, _job(m, folder / SPLITS[m], model_id, limit)) for m in dict.fromkeys(chosen)]
    done: list[dict[str, Any]] = []
    for mechanism, job in jobs:
        say(f"{mechanism}: refitting on {job.data} …", err=True)
        try:
            payload = run_calibration(job, output_dir)
        except typer.Exit:
            written = [m["file"] for r in done for m in r["maps"]]
            if written:
                say(f"written before {mechanism} failed: {', '.join(written)}", err=True)
            raise
        done.append(_summary(payload))
        say(f"{mechanism}: {len(payload['files'])} map(s) written (run {payload['run_id']})", err=True)
    if as_json:
        say(json.dumps({"model": model_id, "limit": limit, "results": done}, ensure_ascii=False))
        return
    for result in done:
        for m in result["maps"]:
            figures = ", ".join(f"{k} {m['metrics'][k]}" for k in HELD_OUT if m["metrics"].get(k) is not None)
            say(f"{result['mechanism']:<11} {m['file']}  {m['version']}  {figures or '(no held-out figure)'}")
