"""The benchmark harness: `BenchResult` (median / min / max over repeated runs, the figures, the target), the
`@benchmark(name)` decorator that registers a benchmark in `BENCHMARKS`, the runner (`select_benchmarks`,
`run_benchmarks`), and what several benchmarks share: a throw-away store, timed samples, one pinned core and the
long run history the page benchmarks read. A module of benchmarks imports this; `dashboard.bench` imports every
such module (`judgelab bench`)."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from engine.demo import load_demo
from engine.store import Store

Progress = Callable[[str], None] | None
ROOT = Path(__file__).resolve().parents[2]


class BenchResult(BaseModel):
    name: str
    description: str
    unit: str = "s"
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    min: float | None = None
    max: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    target: str | None = None
    met: bool | None = None
    skipped: str | None = None

    @classmethod
    def from_samples(cls, name: str, description: str, samples: list[float], **kw: Any) -> BenchResult:
        return cls(
            name=name,
            description=description,
            samples=[round(s, 6) for s in samples],
            median=round(statistics.median(samples), 6),
            min=round(min(samples), 6),
            max=round(max(samples), 6),
            **kw,
        )

    def describe(self) -> str:
        lines = [f"## {self.name} — {self.description}"]
        if self.skipped:
            lines.append(f"   skipped: {self.skipped}")
            return "\n".join(lines)
        if self.median is not None:
            lines.append(
                f"   median {self.median:.4g} {self.unit} · min {self.min:.4g} · max {self.max:.4g} "
                f"(n={len(self.samples)})"
            )
        for key, value in self.metrics.items():
            shown = f"{value:.4g}" if isinstance(value, float) else value
            lines.append(f"   {key}: {shown}")
        if self.target:
            verdict = {True: "MET", False: "NOT MET", None: "n/a"}[self.met]
            lines.append(f"   target: {self.target} → {verdict}")
        return "\n".join(lines)


BenchFn = Callable[[int, Progress], BenchResult]
BENCHMARKS: dict[str, BenchFn] = {}


def benchmark(name: str) -> Callable[[BenchFn], BenchFn]:
    def register(fn: BenchFn) -> BenchFn:
        BENCHMARKS[name] = fn
        return fn

    return register


class UnknownBenchmark(ValueError):
    """A --only pattern that names no benchmark."""


def select_benchmarks(patterns: list[str] | None) -> list[str]:
    """The benchmarks `--only` names, in registration order: each pattern an exact name or a glob
    (fnmatch: `experiment.*`); none means every benchmark. A pattern that matches nothing is an error."""
    if not patterns:
        return list(BENCHMARKS)
    unmatched = [p for p in patterns if not fnmatch.filter(BENCHMARKS, p)]
    if unmatched:
        raise UnknownBenchmark(f"unknown benchmark {', '.join(unmatched)} — known: {', '.join(BENCHMARKS)}")
    return [name for name in BENCHMARKS if any(fnmatch.fnmatchcase(name, p) for p in patterns)]


def run_benchmarks(names: list[str], *, repeat: int = 5, progress: Progress = None) -> list[BenchResult]:
    results = []
    for name in names:
        if progress:
            progress(f"… {name}")
        try:
            results.append(BENCHMARKS[name](repeat, progress))
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            results.append(BenchResult(name=name, description="failed", skipped=f"{type(exc).__name__}: {exc}"))
    return results


# -- what several benchmarks share ------------------------------------------------------------------------------
@contextmanager
def temp_store() -> Iterator[Store]:
    """A SQLite store in a new temporary folder, disposed of and deleted afterwards."""
    folder = tempfile.mkdtemp(prefix="judgelab-bench-")
    store = Store(f"sqlite:///{folder}/bench.db")
    try:
        yield store
    finally:
        store.dispose()
        shutil.rmtree(folder, ignore_errors=True)


def timed_samples(repeat: int, fn: Callable[[], object]) -> list[float]:
    """Seconds of `repeat` calls of `fn`, after one untimed call (imports and first allocations are not the
    figure)."""
    fn()
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def measure_in_subprocess(
    code: str, timeout: float = 600, preload: str = "engine.experiments, engine.director, engine.store"
) -> dict[str, float]:
    """Run `code` in a fresh Python process (the modules of `preload` imported first, out of the figure): its
    seconds, its peak RSS (MB) and the peak above what the imports took, with the figures of every JSON object
    line `code` prints itself."""
    script = (
        textwrap.dedent(
            f"""
        import json, resource, sys, time
        import {preload}  # imports out of the figure
        def _hwm():  # peak RSS in KiB (ru_maxrss would keep the forking parent's peak across exec)
            return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
        before = _hwm()
        t0 = time.perf_counter()
        """
        )
        + textwrap.dedent(code)
        + textwrap.dedent(
            """
        print(json.dumps({"seconds": time.perf_counter() - t0,
                          "peak_mb": _hwm() / 1024,
                          "extra_mb": (_hwm() - before) / 1024}))
        """
        )
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1000:])
    figures: dict[str, float] = {}
    for line in done.stdout.strip().splitlines():  # the code's own JSON lines, then the measure's
        if line.startswith("{"):
            figures |= json.loads(line)
    return figures


def one_core() -> Callable[[], None]:
    """Pin this process to one core for a measurement; returns the undo."""
    if not hasattr(os, "sched_getaffinity"):
        return lambda: None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    return lambda: os.sched_setaffinity(0, before)


HISTORY_RUNS = 10_000


def history_store(folder: Path, n_runs: int = HISTORY_RUNS) -> tuple[str, dict[str, int]]:
    """A SQLite store in `folder` with `n_runs` stored runs and all their events and calls: the five shipped demo
    runs (one of each mechanism, real events and calls) copied with new ids, one minute apart, newest first,
    by direct inserts. Returns its URL and the row counts."""

    url = f"sqlite:///{folder}/history.db"
    store = Store(url)
    load_demo(store)
    store.dispose()
    conn = sqlite3.connect(folder / "history.db")
    try:

        def rows(table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
            cursor = conn.execute(f"SELECT * FROM {table}")  # noqa: S608 — our own table names
            return [d[0] for d in cursor.description], cursor.fetchall()

        run_cols, runs = rows("runs")
        ev_cols, events = rows("events")
        call_cols, calls = rows("llm_calls")
        by_run: dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {r[0]: ([], []) for r in runs}
        for e in events:
            by_run[e[ev_cols.index("run_id")]][0].append(e)
        for c in calls:
            if c[call_cols.index("run_id")] in by_run:
                by_run[c[call_cols.index("run_id")]][1].append(c)
        now = datetime.now().replace(microsecond=0)
        new_runs, new_events, new_calls = [], [], []
        for i in range(n_runs - len(runs)):
            template = runs[i % len(runs)]
            started = now - timedelta(minutes=i + 1)
            run_id = f"{template[0].split('-')[0]}-{started:%Y%m%d-%H%M%S}-b{i:05x}"
            run = dict(zip(run_cols, template, strict=True))
            span = timedelta(seconds=30)
            run |= {"id": run_id, "started_at": str(started), "finished_at": str(started + span), "name": ""}
            run |= {"heartbeat_at": str(started + span)}
            new_runs.append(tuple(run[c] for c in run_cols))
            template_events, template_calls = by_run[template[0]]
            for e in template_events:
                row = dict(zip(ev_cols, e, strict=True)) | {"id": None, "run_id": run_id}
                new_events.append(tuple(row[c] for c in ev_cols))
            for c in template_calls:
                row = dict(zip(call_cols, c, strict=True)) | {"id": None, "run_id": run_id}
                new_calls.append(tuple(row[c] for c in call_cols))

        def insert(table: str, cols: list[str], values: list[tuple[Any, ...]]) -> None:
            marks = ",".join("?" * len(cols))
            conn.executemany(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({marks})", values)  # noqa: S608

        insert("runs", run_cols, new_runs)
        insert("events", ev_cols, new_events)
        insert("llm_calls", call_cols, new_calls)
        conn.commit()
        conn.execute("ANALYZE")
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "events", "llm_calls")}  # noqa: S608
    finally:
        conn.close()
    return url, counts
