"""Benchmarks of issue 26 for hostile and large inputs: a YAML bomb or deep nesting refused in ≤ 1 s with
≤ 100 MB extra memory, and the peak memory of a director script per MB of input (target: a 10 MB script
≤ 1 GB). Each measurement runs in a fresh subprocess (peak RSS from `resource.getrusage`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark
from dashboard.bench.harness import measure_in_subprocess as _measure

ROOT = Path(__file__).resolve().parents[2]
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
            "from engine.director.scripts import load_script\nfrom pathlib import Path\n"
            f"load_script(Path({str(script)!r}))"
        )
        say(f"a batch run of the same script ({n:,} lines: minutes)")
        run = _measure(
            f"""
            import asyncio
            from pathlib import Path
            from engine.director.batch import ScriptConfig, run_script
            from engine.director.scripts import load_script
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


# Each line-based kind a user gives the project, as 10 MB of its shortest valid lines: (the line with {i} for
# a unique number, the code that reads and parses the file as the CLI does — `path` is the file).
KINDS: dict[str, tuple[str, str]] = {
    "director script": (
        '{{"id": "l{i}", "text": "hey"}}',
        "from engine.director.scripts import load_script\nload_script(path)",
    ),
    "skip workload": (
        '{{"t": 1, "id": "m{i}", "channel": "c"}}',
        "from engine.skip.workload import load_workload, WorkloadError\ntry:\n    load_workload(path)\n"
        "except WorkloadError:\n    pass  # refused past the message cap",
    ),
    "jury cases": ('{{"id": "c{i}", "content": "hi"}}', "from engine.jury.config import load_cases\nload_cases(path)"),
    "hand-raise benchmark": (
        '{{"id": "h{i}", "context": [{{"speaker": "user", "text": "hi"}}]}}',
        "from engine.handraise.benchmark import parse_benchmark\nfrom engine.inputs import read_text\n"
        "parse_benchmark(read_text(path), str(path))",
    ),
    "confidence labels": (
        '{{"factors": {{"source_count": 1}}, "correct": true}}',
        "from engine.confidence.calibration import parse_labels\nfrom engine.inputs import read_text\n"
        "parse_labels(read_text(path), str(path))",
    ),
    "demo recording": (
        '{{"run": {{"id": "r{i}", "kind": "k", "status": "finished", "started_at": "2026-01-01T00:00:00Z"}}, '
        '"events": [], "calls": []}}',
        "from engine.demo import parse_runs\nparse_runs(path)",
    ),
    "experiment YAML": (
        "  - {i}",
        "from engine.experiments import DefinitionError\nfrom engine.experiments.loading import load_definition\n"
        "try:\n    load_definition(path)\nexcept DefinitionError:\n    pass  # refused past the node limit",
    ),
}


@benchmark("inputs.parse_per_kind")
def bench_parse_per_kind(repeat: int, progress: Progress) -> BenchResult:
    """Every line-based kind of input at 10 MB of its shortest valid lines (the costliest per byte), read and
    parsed as the CLI does, each in a fresh process: peak memory and seconds. Kinds with a cap (a workload's
    messages, a YAML document's values) are refused at the cap; the figure is what that costs."""
    say = progress or (lambda _: None)
    metrics: dict[str, Any] = {}
    walls: list[float] = []
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for kind, (line, code) in KINDS.items():
            path = Path(folder) / ("input.yaml" if kind.endswith("YAML") else "input.jsonl")
            head = (
                "name: big\nmechanism: handraise\ncases: x.jsonl\nspace:\n  x:\n" if kind == "experiment YAML" else ""
            )
            with path.open("w", encoding="utf-8") as out:
                out.write(head)
                size, i = len(head), 0
                while size < 10 * 1024 * 1024 - 200:
                    text = line.format(i=i) + "\n"
                    out.write(text)
                    size, i = size + len(text.encode()), i + 1
            say(f"{kind}: {i:,} lines")
            got = _measure(f"from pathlib import Path\npath = Path({str(path)!r})\n{code}")
            walls.append(got["seconds"])
            worst = max(worst, got["peak_mb"])
            metrics[kind] = (
                f"peak {got['peak_mb']:.0f} MB ({got['extra_mb'] / 10:.1f} MB per MB), {got['seconds']:.1f} s"
            )
    result = BenchResult.from_samples(
        "inputs.parse_per_kind",
        "10 MB of each line-based input kind, read and parsed (samples: seconds per kind)",
        walls,
        metrics=metrics,
        target="every kind ≤ 1 GB peak at 10 MB",
    )
    result.met = worst <= 1024
    return result


# Pages that read a user's file, each with 10 MB of that file as its default input under JUDGELAB_DATA_DIR
# (Streamlit's AppTest has no upload; an upload goes through the same reader and parser): (file under the data
# folder, its shortest line, the page).
PAGE_INPUTS: dict[str, tuple[str, str, str]] = {
    "Director lab batch": ("scripts/beach.jsonl", '{{"text": "hey"}}', "director"),
    "Confidence lab calibration": (
        "benchmarks/confidence.jsonl",
        '{{"factors": {{"source_count": 1}}, "correct": true}}',
        "confidence",
    ),
    "Jury case file": ("benchmarks/jury.jsonl", '{{"id": "c{i}", "content": "hi"}}', "jury"),
}


@benchmark("inputs.pages")
def bench_input_pages(repeat: int, progress: Progress) -> BenchResult:
    """The pages that read a user's file, each run once (AppTest, a fresh process) with 10 MB of its shortest
    valid lines as its default input: peak memory and seconds of the first script run."""
    say = progress or (lambda _: None)
    metrics: dict[str, Any] = {}
    walls: list[float] = []
    worst = 0.0
    for label, (name, line, page) in PAGE_INPUTS.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.parent.mkdir(parents=True)
            with path.open("w", encoding="utf-8") as out:
                size, i = 0, 0
                while size < 10 * 1024 * 1024 - 200:
                    text = line.format(i=i) + "\n"
                    out.write(text)
                    size, i = size + len(text.encode()), i + 1
            say(f"{label}: {i:,} lines")
            got = _measure(
                f"""
                import os
                os.environ["JUDGELAB_DATA_DIR"] = {folder!r}
                os.environ["JUDGELAB_DATABASE_URL"] = "sqlite:///{folder}/page.db"
                from streamlit.testing.v1 import AppTest
                script = "import importlib\\nimportlib.import_module('pages.{page}').render()"
                at = AppTest.from_string(script, default_timeout=900).run()
                assert not at.exception, [e.value for e in at.exception]
                """,
                timeout=1200,
            )
        walls.append(got["seconds"])
        worst = max(worst, got["peak_mb"])
        metrics[label] = f"peak {got['peak_mb']:.0f} MB, {got['seconds']:.1f} s ({i:,} lines)"
    result = BenchResult.from_samples(
        "inputs.pages",
        "pages reading 10 MB of a user's file (samples: seconds of the first script run)",
        walls,
        metrics=metrics,
        target="every page ≤ 1 GB peak with a 10 MB input",
    )
    result.met = worst <= 1024
    return result
