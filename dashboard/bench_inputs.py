"""Benchmarks of issue 26 for hostile and large inputs: a YAML bomb or deep nesting refused in ≤ 1 s with
≤ 100 MB extra memory, and the peak memory of a director script per MB of input (target: a 10 MB script
≤ 1 GB). Each measurement runs in a fresh subprocess (peak RSS from `resource.getrusage`)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from dashboard.bench import BenchResult, Progress, benchmark

ROOT = Path(__file__).resolve().parent.parent
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)
HEAD = "name: x\nmechanism: handraise\ncases: data/benchmarks/handraise.jsonl\n"
HOSTILE = {
    "alias bomb": HEAD + ALIAS_BOMB,
    "deep nesting": HEAD + "base: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "deep mapping": HEAD + "base:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 500)),
    "huge range": HEAD + "space:\n  threshold: {from: 0, to: 1e300, step: 1e-300}\n",
}


def _measure(code: str, timeout: float = 600) -> dict[str, float]:
    script = (
        textwrap.dedent(
            """
        import json, resource, sys, time
        import engine.experiments, engine.director, engine.store  # imports out of the figure
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        """
        )
        + textwrap.dedent(code)
        + textwrap.dedent(
            """
        print(json.dumps({"seconds": time.perf_counter() - t0,
                          "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                          "extra_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
        """
        )
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1000:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@benchmark("inputs.refusals")
def bench_refusals(repeat: int, progress: Progress) -> BenchResult:
    """Hostile experiment files (alias bomb, deep nesting, an overflowing range) refused: time and extra memory."""
    say = progress or (lambda _: None)
    metrics: dict[str, object] = {}
    worst_s = worst_mb = 0.0
    for name, text in HOSTILE.items():
        say(f"refusing: {name}")
        m = _measure(
            f"""
            from engine.experiments import DefinitionError, parse_definition
            try:
                parse_definition({text!r}, "hostile.yaml")
                sys.exit("accepted")
            except DefinitionError:
                pass
            """
        )
        metrics[name] = {"seconds": round(m["seconds"], 4), "extra_mb": round(m["extra_mb"], 1)}
        worst_s, worst_mb = max(worst_s, m["seconds"]), max(worst_mb, m["extra_mb"])
    result = BenchResult.from_samples(
        "inputs.refusals", "hostile experiment files refused (slowest of them)", [worst_s], metrics=metrics
    )
    result.target = "each refused in ≤ 1 s with ≤ 100 MB extra memory"
    result.met = worst_s <= 1 and worst_mb <= 100
    return result


def _script(path: Path, mb: float) -> int:
    line = '{"text": "hey"}\n'  # the short lines that cost the most per byte
    n = int(mb * 1024 * 1024 // len(line))
    path.write_text(line * n, encoding="utf-8")
    return n


@benchmark("inputs.director_script")
def bench_director_script(repeat: int, progress: Progress) -> BenchResult:
    """Peak memory of a 10 MB director script of short lines (the shortest lines cost the most per byte):
    parsing it, and a whole batch run (the rules, an event a line, the summary) — measured, not estimated."""
    say = progress or (lambda _: None)
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "script.jsonl"
        n = _script(script, 10.0)
        say(f"parsing a 10 MB script ({n:,} lines)")
        parse = _measure(
            f"from engine.director import load_script\nfrom pathlib import Path\nload_script(Path({str(script)!r}))"
        )
        say(f"a batch run of the same script ({n:,} lines: minutes)")
        run = _measure(
            f"""
            import asyncio
            from pathlib import Path
            from engine.director import ScriptConfig, load_script, run_script
            from engine.store import Store
            lines = load_script(Path({str(script)!r}))
            store = Store("sqlite:///{folder}/bench.db")
            asyncio.run(run_script(ScriptConfig(lines=lines, character="yana", source="s"), None, store))
            """,
            timeout=1800,
        )
    result = BenchResult.from_samples(
        "inputs.director_script",
        "a 10 MB director script of short lines: parse and whole batch run, peak memory",
        [run["seconds"]],
        metrics={
            "lines": n,
            "parse_peak_mb": round(parse["peak_mb"], 1),
            "parse_extra_mb_per_mb": round(parse["extra_mb"] / 10, 1),
            "parse_seconds": round(parse["seconds"], 1),
            "batch_peak_mb": round(run["peak_mb"], 1),
            "batch_extra_mb_per_mb": round(run["extra_mb"] / 10, 1),
            "batch_seconds": round(run["seconds"], 1),
        },
    )
    result.target = "a 10 MB director script ≤ 1 GB peak (parse and whole batch run)"
    result.met = parse["peak_mb"] <= 1024 and run["peak_mb"] <= 1024
    return result
