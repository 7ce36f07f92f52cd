"""`judgelab calibrate-judge`: every mechanism's judge map refitted on its calibration split by the real
models, each a recorded run, written where asked and read back by the judges; clear errors."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.judgemaps import CALIBRATION_DIR, load_calibration

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def _shipped() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(CALIBRATION_DIR.glob("*.json"))}


MAPS = {  # what a quick refit of each mechanism fits: (map, model)
    "handraise": {
        ("handraise.embedding", "minilm"),
        ("handraise.embedding", "use-m3"),
        ("handraise.likelihood", "gemma3-270m+smollm2-135m"),
    },
    "skip": {("skip.likelihood", "gemma3-270m")},
    "jury": {
        ("jury.likelihood", "gemma3-270m"),
        ("jury.role.safety-officer", "gemma3-270m"),
        ("jury.role.security-auditor", "gemma3-270m"),
        ("jury.role.user-advocate", "gemma3-270m"),
        ("jury.panel", "gemma3-270m"),
    },
    "director": set(),  # its five lines are read and recorded, too few to fit its criterion maps on
    "confidence": {("confidence.likelihood", "gemma3-270m")},
}


def test_every_mechanism_with_a_calibration_job_is_refitted_here() -> None:
    from dashboard.ui_registry import uis

    assert list(MAPS) == [u.name for u in uis() if u.calibration_job is not None]


# One mechanism a test (the five took 100 s in one test, the longest of the suite: split, they spread over the
# workers); every one on the bundled Gemma, SmolLM2 and the embedders, on the first items of its split.
@pytest.mark.model
@pytest.mark.parametrize("mechanism", list(MAPS))
def test_a_quick_refit_of_every_map_is_recorded_and_readable(tmp_path: Path, mechanism: str) -> None:
    from engine.store import Store

    before = _shipped()
    out_dir = tmp_path / "maps"
    code, out = invoke("calibrate-judge", "--only", mechanism, "--limit", "5", "--output-dir", str(out_dir), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert [r["mechanism"] for r in report["results"]] == [mechanism]
    maps = {(m["name"], m["model_id"]): m for r in report["results"] for m in r["maps"]}
    assert set(maps) == MAPS[mechanism]
    for (name, model_id), m in maps.items():
        assert Path(m["file"]).parent == out_dir
        fitted = load_calibration(name, model_id, out_dir)  # what a judge reads
        assert fitted is not None and fitted.version == m["version"] and fitted.n_items > 0
    if mechanism == "handraise":
        assert "cv_f1" in maps[("handraise.likelihood", "gemma3-270m+smollm2-135m")]["metrics"]
    if mechanism == "jury":
        assert "loo_case_accuracy" in maps[("jury.likelihood", "gemma3-270m")]["metrics"]
    assert _shipped() == before  # the shipped maps are untouched
    store = Store(os.environ["JUDGELAB_DATABASE_URL"])
    try:
        for result in report["results"]:
            run = store.get_run(result["run_id"])
            assert run is not None and run.kind == "calibration" and run.status == "finished"
            assert store.calls(run_id=result["run_id"])  # every scoring call recorded
    finally:
        store.dispose()


def test_errors_are_clear_and_nothing_shipped_is_overwritten(tmp_path: Path) -> None:
    before = _shipped()
    code, out = invoke("calibrate-judge", "--only", "handraise,vibes")
    assert code == 2 and "vibes" in out and "choose from handraise, skip, jury, director, confidence" in out
    code, out = invoke("calibrate-judge", "--limit", "5")
    assert code == 2 and "--output-dir" in out
    broken = tmp_path / "splits"
    broken.mkdir()
    (broken / "skip-calib.jsonl").write_text('{"messages": [], "should_respond": true}\nnot json\n', encoding="utf-8")
    code, out = invoke("calibrate-judge", "--only", "skip", "--data-dir", str(broken), "--output-dir", str(tmp_path))
    assert code == 1 and "skip-calib.jsonl" in out and ":2" in out
    code, out = invoke("calibrate-judge", "--only", "confidence", "--data-dir", str(tmp_path / "nowhere"))
    assert code == 1 and "confidence-calib.jsonl" in out
    # Every split is read before any map is written: a bad jury split stops the refit before the hand raise's.
    (broken / "handraise-calib.jsonl").write_bytes((CALIBRATION_DIR / "handraise-calib.jsonl").read_bytes())
    (broken / "jury-calib.jsonl").write_text("not a case\n", encoding="utf-8")
    args = ("--only", "handraise,jury", "--data-dir", str(broken), "--output-dir", str(tmp_path / "out"))
    code, out = invoke("calibrate-judge", *args)
    assert code == 1 and "jury-calib.jsonl" in out and "refitting" not in out
    assert not (tmp_path / "out").exists()
    assert _shipped() == before


def _job(store, split: Path, fit_error: BaseException | None = None, rows_error: BaseException | None = None):  # noqa: ANN202
    from engine.judgemaps import fit_single_map
    from engine.refit import RefitJob as CalibrationJob

    async def rows() -> list[dict[str, float]]:
        if rows_error is not None:
            raise rows_error
        return [{"x": float(i)} for i in range(6)]

    def fit(features: list[dict[str, float]]) -> list:
        if fit_error is not None:
            raise fit_error
        return [fit_single_map("t.map", "m", "c", "x", features, [i % 2 == 0 for i in range(6)], split)]

    split.write_text("{}\n", encoding="utf-8")
    return CalibrationJob(store, "skip", "m", split, rows, fit)


@pytest.mark.parametrize(
    ("fit_error", "rows_error", "says"),
    [
        (ValueError("This solver needs samples of at least 2 classes"), None, "at least 2 classes"),
        (None, __import__("models.errors").errors.ModelUnavailable("model file gone"), "model file gone"),
    ],
)
def test_a_refit_that_fails_says_why_and_marks_its_run_failed(
    store, tmp_path: Path, fit_error, rows_error, says
) -> None:
    import typer

    from dashboard.commands import run_calibration

    with pytest.raises(typer.Exit) as exit_info:
        run_calibration(_job(store, tmp_path / "split.jsonl", fit_error, rows_error), tmp_path / "maps")
    assert exit_info.value.exit_code == 1
    (run,) = store.list_runs(kind="calibration")
    assert run.status == "failed" and says in (run.error or "")
    assert not (tmp_path / "maps").exists()  # nothing written


def test_a_limited_refit_says_so_in_its_provenance(store, tmp_path: Path) -> None:
    from dashboard.commands import run_calibration

    job = _job(store, tmp_path / "split.jsonl")
    job.limit = 6
    payload = run_calibration(job, tmp_path)
    (fitted,) = payload["calibrations"]
    assert fitted["fitted_on"].endswith("(first 6 items)") and fitted["n_items"] == 6
    assert store.get_run(payload["run_id"]).status == "finished"
