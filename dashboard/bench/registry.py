"""`judgelab bench --only 'registry.*'`: what knowing the mechanisms costs a process that only lists them.

- `registry.listing`: `mechanism_names()` in a fresh interpreter (the CLI's `--help`, the navigation and every test
  collection start there): the time from the import to the names, and what it loaded — the registry and each
  mechanism's spec module, nothing else of the engine and no SQLAlchemy (issue #40: it imported 84 of the engine's
  modules and SQLAlchemy, 1.5 s). Target ≤ 0.2 s, none of a mechanism's code loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dashboard.bench.harness import BenchResult, Progress, benchmark

ROOT = Path(__file__).resolve().parents[2]
# Run in a fresh interpreter: the time and the modules are those of a process that has loaded nothing yet.
LISTING = (
    "import sys, time, json; t = time.perf_counter(); from engine.registry import mechanism_names; "
    "names = mechanism_names(); s = time.perf_counter() - t; "
    "print(json.dumps({'s': s, 'names': names, 'engine': sorted(m for m in sys.modules if m.startswith('engine')), "
    "'sqlalchemy': 'sqlalchemy' in sys.modules}))"
)


def _listing() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", LISTING], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"listing the mechanisms failed: {done.stderr.strip()[-500:]}")
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


@benchmark("registry.listing")
def bench_listing(repeat: int, progress: Progress) -> BenchResult:
    runs = []
    for i in range(repeat):
        if progress:
            progress(f"  run {i + 1}: a fresh interpreter lists the mechanisms")
        runs.append(_listing())
    last = runs[-1]
    names = [str(n) for n in last["names"]]  # type: ignore[attr-defined]
    expected = {"engine", "engine.mechanism", "engine.registry"} | {f"engine.{n}" for n in names}
    expected |= {f"engine.{n}.spec" for n in names}
    loaded = [str(m) for m in last["engine"]]  # type: ignore[attr-defined]
    extra = sorted(set(loaded) - expected)
    samples = [float(r["s"]) for r in runs]  # type: ignore[arg-type]
    result = BenchResult.from_samples(
        "registry.listing",
        "mechanism_names() in a fresh interpreter: import to names",
        samples,
        metrics={
            "mechanisms": len(names),
            "engine_modules_loaded": len(loaded),
            "beyond_registry_and_specs": extra,
            "sqlalchemy_loaded": bool(last["sqlalchemy"]),
        },
        target="≤ 0.2 s, no mechanism code or SQLAlchemy loaded",
    )
    result.met = result.median is not None and result.median <= 0.2 and not extra and not last["sqlalchemy"]
    return result
