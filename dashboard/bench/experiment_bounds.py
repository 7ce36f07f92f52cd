"""`judgelab bench --only experiment.cancel --only experiment.refuse_huge`: experiments are bounded and always
cancellable (issue 26).

- `experiment.cancel`: a 100 000-cell decision experiment started in the run registry on the dashboard's
  background loop (what the Experiments page does), a rules-only director Check started from "another page"
  while it decides (what the Director page does), then Cancel: how long until the Check has started and
  until the experiment has ended `cancelled`.
- `experiment.refuse_huge`: a 10^9-cell grid refused at validation: the time and the memory it costs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path

from dashboard.background import BackgroundLoop
from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from dashboard.live_runs import RunRegistry
from engine.director.review import CheckConfig, review_line
from engine.experiments import DefinitionError, parse_definition, run_experiment
from engine.store import CANCELLED

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "data" / "scripts" / "beach.jsonl"


def decision_experiment_yaml(cases: Path = SCRIPT, cells: int = 100_000) -> str:
    """A director cut-off sweep of `cells` cells (100 × 100 × cells / 10 000): decision parameters only, so
    one recording of the script's rule facts and then nothing but decisions and stored cells."""
    topics = max(1, cells // 10_000)
    return (
        "name: bounds bench\n"
        "mechanism: director\n"
        f"cases: {cases}\n"
        "base: {format_retry_lines: 1000, scatter_retry_sentences: 1000, scatter_retry_topics: 1000}\n"
        "space:\n"
        "  format_warn_lines: {from: 1, to: 100, step: 1, integer: true}\n"
        "  scatter_warn_sentences: {from: 1, to: 100, step: 1, integer: true}\n"
        f"  scatter_warn_topics: {{from: 1, to: {topics}, step: 1, integer: true}}\n"
    )


def huge_grid_yaml(cases: Path = SCRIPT) -> str:
    """10^9 cells: three ranges of 1000 values (each under the per-range limit; only their product is not)."""
    return (
        "name: huge\n"
        "mechanism: director\n"
        f"cases: {cases}\n"
        "base: {format_retry_lines: 100000, scatter_retry_sentences: 100000, scatter_retry_topics: 100000}\n"
        "space:\n"
        "  format_warn_lines: {from: 1, to: 1000, step: 1}\n"
        "  scatter_warn_sentences: {from: 1, to: 1000, step: 1}\n"
        "  scatter_warn_topics: {from: 1, to: 1000, step: 1}\n"
    )


@benchmark("experiment.cancel")
def bench_experiment_cancel(repeat: int, progress: Progress) -> BenchResult:
    """Cancel of a 100 000-cell decision experiment in the registry, and a director Check started meanwhile."""

    with temp_store() as store:
        loop = BackgroundLoop()
        registry = RunRegistry(loop, store, reap_every_s=None, hard_cancel_after_s=0)
        try:
            definition = parse_definition(decision_experiment_yaml(), "<bench>")
            cancel_s: list[float] = []
            check_start_s: list[float] = []
            check_done_s: list[float] = []
            statuses: list[str] = []
            cells_at_cancel: list[int] = []
            for i in range(max(1, min(repeat, 3))):
                if progress:
                    progress(f"  run {i + 1}: 100 000-cell director sweep in the registry")
                run_id = registry.start(
                    "experiment",
                    {"definition": definition.model_dump(mode="json", by_alias=True), "n": i},
                    lambda: run_experiment(definition, store, source="<bench>"),
                )
                live = registry.get(run_id)
                assert live is not None
                deadline = time.monotonic() + 60
                while live.control.progress.done < 200 and time.monotonic() < deadline and not live.done:
                    time.sleep(0.02)  # deciding and storing cells
                config = CheckConfig(character="yana", text=f"えー、ほんと？ {i}")
                started = time.perf_counter()
                check_id = registry.start(
                    "director.check", config.model_dump(mode="json"), partial(review_line, config, None, store)
                )
                check_start_s.append(time.perf_counter() - started)
                registry.wait(check_id, timeout=30)
                check_done_s.append(time.perf_counter() - started)
                cells_at_cancel.append(live.control.progress.done)
                started = time.perf_counter()
                registry.cancel(run_id)
                try:
                    registry.wait(run_id, timeout=60)
                except asyncio.CancelledError:
                    pass
                cancel_s.append(time.perf_counter() - started)
                stored = store.get_run(run_id)
                statuses.append(stored.status if stored else "missing")
            result = BenchResult.from_samples(
                "experiment.cancel",
                "Cancel of a 100 000-cell decision experiment in the run registry, while a rules-only director "
                "Check starts on the same loop",
                cancel_s,
                target="cancel ≤ 2 s, the Check started ≤ 1 s, status cancelled",
                metrics={
                    "cells": definition.cell_count(),
                    "cells_stored_at_cancel": cells_at_cancel,
                    "check_started_s": [round(s, 3) for s in check_start_s],
                    "check_done_s": [round(s, 3) for s in check_done_s],
                    "statuses": statuses,
                },
            )
            result.met = max(cancel_s) <= 2.0 and max(check_start_s) <= 1.0 and all(s == CANCELLED for s in statuses)
            return result
        finally:
            registry.close()
            loop.stop()


@benchmark("experiment.refuse_huge")
def bench_experiment_refuse_huge(repeat: int, progress: Progress) -> BenchResult:
    """A 10^9-cell grid refused at validation: time and memory (in this process), and `experiment run` on it."""

    text = huge_grid_yaml()
    samples: list[float] = []
    peaks: list[float] = []
    message = ""
    for _ in range(max(3, repeat)):
        tracemalloc.start()
        started = time.perf_counter()
        try:
            parse_definition(text, "huge.yaml")
        except DefinitionError as exc:
            message = exc.problems[0]
        samples.append(time.perf_counter() - started)
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    folder = Path(tempfile.mkdtemp(prefix="judgelab-bench-"))
    try:
        path = folder / "huge.yaml"
        path.write_text(text, encoding="utf-8")
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "dashboard.cli", "experiment", "run", str(path)],
            cwd=ROOT,
            env={**_env(), "JUDGELAB_DATABASE_URL": f"sqlite:///{folder / 'b.db'}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        cli_s = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = BenchResult.from_samples(
        "experiment.refuse_huge",
        "a 10^9-cell grid refused at validation (parse_definition)",
        samples,
        target="≤ 1 s and ≤ 100 MB extra memory",
        metrics={
            "peak_mb": round(max(peaks), 2),
            "message": message,
            "cli_exit": done.returncode,
            "cli_wall_s_with_python_start": round(cli_s, 2),
        },
    )
    result.met = max(samples) <= 1.0 and max(peaks) <= 100 and bool(message) and done.returncode == 1
    return result


def _env() -> dict[str, str]:

    return {**os.environ, "PYTHONPATH": str(ROOT)}
