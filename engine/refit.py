"""A judge map's refit as a stored run: the judge's raw features on its calibration split (every call recorded,
a run of kind `calibration`), the fitted maps, each stored with its diagnosis, written as versioned JSON.

What `judgelab calibrate-judge` and every mechanism's `calibrate` command run (the engine entry point of the
`calibration` run kind); each mechanism builds its own job (its features and its fit)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import os
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from engine.diagnostics import calibration_diagnosis
from engine.judgemaps import CALIBRATION_DIR, Calibration, MapError, save_calibrations
from engine.store import Store, StoreError
from models.errors import ModelError
from models.recording import call_context


class RefitError(RuntimeError):
    """A refit that could not be made: a model that cannot score, a split that cannot be fitted. Its run is
    stored as failed; the message names the mechanism, the split and the run."""


@dataclasses.dataclass
class RefitJob:
    """One judge map's refit: the mechanism's raw features on its calibration split (`rows`, every call
    recorded), then the fitted maps (`fit`)."""

    store: Store
    mechanism: str
    model_id: str
    data: Path
    rows: Callable[[], Coroutine[Any, Any, list[dict[str, float]]]]
    fit: Callable[[list[dict[str, float]]], list[Calibration]]
    limit: int | None = None  # fitted on the split's first N items only (said in each map's `fitted_on`)


def check_writable(directory: Path | None = None) -> None:
    """MapError unless maps can be written into `directory` (data/calibration/): before a refit's model pass.
    A folder not made yet is not made here: its nearest existing parent must be a folder it can be made in."""
    folder = directory or CALIBRATION_DIR
    try:
        if os.path.lexists(folder) and not folder.exists():
            raise NotADirectoryError(errno.ENOENT, "a link to nothing")
        if not folder.exists():
            parent = next(p for p in folder.parents if p.exists())
            if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
                raise NotADirectoryError(errno.ENOTDIR, f"{parent.name or parent} is not a folder it can write in")
            return
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise MapError(f"{folder.name}/: maps cannot be written there ({exc.strerror or exc})") from None


def refit(job: RefitJob, output_dir: Path | None) -> dict[str, Any]:
    """Compute the judge's raw features on the calibration split as a run of kind `calibration`, fit the maps,
    store each with its diagnosis (measurable signal or not, read wherever the judge is offered), write them to
    data/calibration/ (or `output_dir`); returns what was written. Raises RefitError for a model that cannot
    score or a split that cannot be fitted."""
    try:
        check_writable(output_dir)  # before the model pass, which takes minutes
    except ValueError as exc:
        raise RefitError(f"{job.mechanism} refit: {exc}") from None
    run_id = job.store.create_run(
        "calibration", {"mechanism": job.mechanism, "model": job.model_id, "data": str(job.data)}
    ).id
    try:
        with call_context(run_id=run_id, purpose=f"calibration.{job.mechanism}"):
            features = asyncio.run(job.rows())
        calibrations = job.fit(features)
        if job.limit is not None:
            calibrations = [
                c.model_copy(update={"fitted_on": f"{c.fitted_on} (first {job.limit} items)"}) for c in calibrations
            ]
        calibrations = [
            c.model_copy(update={"metrics": {**c.metrics, "diagnosis": calibration_diagnosis(c).to_dict()}})
            for c in calibrations
        ]
        paths = [str(p) for p in save_calibrations(calibrations, output_dir)]
    except BaseException as exc:
        with contextlib.suppress(StoreError):  # the refit's own error is the one to report
            job.store.finish_run(run_id, status="failed", error=f"{type(exc).__name__}: {exc}")
        if isinstance(exc, ModelError | ValueError):
            raise RefitError(f"{job.mechanism} refit on {job.data} failed (run {run_id}): {exc}") from exc
        raise
    job.store.finish_run(run_id, summary={"files": paths, "rows": len(features)})
    return {
        "mechanism": job.mechanism,
        "run_id": run_id,
        "rows": len(features),
        "files": paths,
        "calibrations": [c.model_dump() for c in calibrations],
    }
