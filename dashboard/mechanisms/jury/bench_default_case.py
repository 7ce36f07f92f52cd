"""`judgelab bench --only jury.default_case`: the Jury page's default case to its verdict, live on the bundled model.

The page's defaults (`dashboard.mechanisms.jury.demo.page_jury`: the catalog's first panel — Gemma 3 270M and
SmolLM2-135M by likelihood and the multilingual embedder's neighbours seat — the stack, up to 3 rounds) judge the
first case of the page's first case file (pw-leak). Every seat's model is loaded and warmed by one call first, so
the figure is the jury's own time, as a user who has run anything on the page sees it. Measured twice on the same
machine, one after the other:

- **default**: rounds that cannot move anyone are not run (`skip_idle_rounds`, the default);
- **rounds run**: the same jury with `skip_idle_rounds=False`.

The verdicts must be the same (a round that cannot move anyone changes nothing).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from dashboard.bench.harness import BenchResult, Progress, benchmark, temp_store
from dashboard.mechanisms.jury.demo import jury_cases, page_jury
from engine.embeddings import get_embedder
from engine.jury.runner import Jury
from models.catalog import load_catalog
from models.registry import ModelHub

TARGET_S = 25.0


@benchmark("jury.default_case")
def bench_jury_default_case(repeat: int, progress: Progress) -> BenchResult:
    """The default jury case to its verdict, rounds that cannot move anyone skipped, against the rounds run."""

    seats, config = page_jury()
    _path, case = jury_cases()[0]
    with temp_store() as store:
        hub = ModelHub(load_catalog(), call_log=store)
        for seat in seats:
            if progress:
                progress(f"  loading {seat.model_id} (not timed)")
            if seat.judge == "neighbours":
                get_embedder(seat.model_id).embed(["warm up"])
            else:
                asyncio.run(hub.get(seat.model_id).score_options("Warm-up:", [" a", " b"]))

        def timed(skip: bool) -> tuple[float, Any]:
            jury = Jury(seats, hub.get, config.model_copy(update={"skip_idle_rounds": skip}))
            t0 = time.perf_counter()
            result = asyncio.run(jury.run(case))
            return time.perf_counter() - t0, result

        samples: list[float] = []
        result: Any = None
        for i in range(max(1, repeat)):
            if progress:
                progress(f"  {case.id}, default settings ({i + 1}/{max(1, repeat)})")
            wall, result = timed(True)
            samples.append(wall)
        if progress:
            progress(f"  {case.id}, the same jury with its rounds run")
        rounds_wall, with_rounds = timed(False)
        default = statistics.median(samples)
        same = result.final_verdict == with_rounds.final_verdict
        return BenchResult.from_samples(
            "jury.default_case",
            f"the Jury page's default case ({case.id}, {len(seats)} seats, {result.phase3_judgment.method}) to its "
            "verdict, live, warm models; rounds that cannot move anyone not run",
            samples,
            target=f"≤ {TARGET_S:.0f} s to the verdict, the same verdict as with the rounds run",
            met=default <= TARGET_S and same,
            metrics={
                "case": case.id,
                "verdict": result.final_verdict,
                "gold": case.gold,
                "termination": result.termination_reason,
                "rounds": result.total_rounds,
                "rounds_run_s": round(rounds_wall, 2),
                "rounds_run_rounds": with_rounds.total_rounds,
                "rounds_run_termination": with_rounds.termination_reason,
                "rounds_run_verdict": with_rounds.final_verdict,
                "saved_s": round(rounds_wall - default, 2),
                "identical_seats": result.identical_seats,
            },
        )
