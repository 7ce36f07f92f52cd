"""`judgelab bench --only director.rules`: the director's hard rules on one core, over the shipped beach script."""

from __future__ import annotations

import time

from dashboard.bench.harness import BenchResult, Progress, benchmark, one_core
from engine.config import DATA_DIR
from engine.director.config import DirectorConfig, load_character
from engine.director.rules import evaluate_rules
from engine.director.scripts import load_script


@benchmark("director.rules")
def bench_director(repeat: int, progress: Progress) -> BenchResult:
    """Hard rules (normalisation, every rule, tone) on one core, over the shipped beach script."""

    lines = load_script(DATA_DIR / "scripts" / "beach.jsonl")
    profiles = {c: load_character(c) for c in {line.character or "yana" for line in lines}}
    corpus = [(line.text, profiles[line.character or "yana"]) for line in lines] * (20_000 // len(lines) + 1)
    cfg = DirectorConfig()
    undo = one_core()
    try:
        rates = []
        for _ in range(repeat):
            started = time.perf_counter()
            for text, profile in corpus:
                evaluate_rules(text, profile, cfg)
            rates.append(len(corpus) / (time.perf_counter() - started))
    finally:
        undo()
    result = BenchResult.from_samples(
        "director.rules",
        "hard-rule verdicts per second on one core (data/scripts/beach.jsonl, repeated)",
        rates,
        unit="utterances/s",
        target="≥ 20 000 utterances/s on one core",
        metrics={"utterances_per_run": len(corpus), "distinct_lines": len(lines)},
    )
    result.met = (result.median or 0) >= 20_000
    return result
