"""The Skip cache page's demo: a small generated workload judged live by the bundled model's likelihood judge."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.demo import MODEL, PageDemo, recording_hub
from engine.skip.config import FailurePolicy, JudgmentSkipConfig, JudgmentSkipThreshold, ResponseConfig
from engine.skip.run import SimulationConfig, run_simulation
from engine.skip.workload import WorkloadSpec, workload_words
from engine.store import Store

SKIP_WORKLOAD = {"channels": 12, "hours": 4.0, "bursts_per_hour": 1.0, "mean_burst_messages": 3.0, "seed": 7}


def page_response_config() -> Any:
    """The Skip cache page's default thresholds and checker."""

    defaults = ResponseConfig()
    return ResponseConfig(
        check_interval_seconds=defaults.check_interval_seconds,
        min_wait_seconds=defaults.min_wait_seconds,
        failure_policy=FailurePolicy(list(FailurePolicy)[0].value),
        judgment_skip=JudgmentSkipConfig(
            thresholds=[
                JudgmentSkipThreshold(min_confidence=0.9, skip_seconds=43200),
                JudgmentSkipThreshold(min_confidence=0.7, skip_seconds=3600),
            ],
            default_skip_seconds=600,
        ),
    )


async def record_skip(store: Store) -> tuple[str, dict[str, Any]]:
    """A small generated workload judged live by the bundled model's likelihood judge."""

    config = SimulationConfig(
        workload=WorkloadSpec(**SKIP_WORKLOAD), response=page_response_config(), model_id=MODEL, method="likelihood"
    )
    report = await run_simulation(config, recording_hub(store), store)
    return report.run_id, {"saved_pct": report.comparison["calls_saved_pct"]}


def record_page(store: Store) -> PageDemo:
    """The default workload, once."""

    run_id, facts = asyncio.run(record_skip(store))
    return PageDemo(
        title="Skip cache",
        inputs=[f"workload {workload_words(SKIP_WORKLOAD)}, judged by {MODEL}"],
        run_ids=[run_id],
        prefill={
            "skip.channels": SKIP_WORKLOAD["channels"],
            "skip.hours": SKIP_WORKLOAD["hours"],
            "skip.rate": SKIP_WORKLOAD["bursts_per_hour"],
            "skip.burst": SKIP_WORKLOAD["mean_burst_messages"],
            "skip.seed": SKIP_WORKLOAD["seed"],
            "skip.judge": MODEL,
            "skip.method": "likelihood",
        },
        note=f"{facts['saved_pct']}% of the judge calls saved when recorded; the recorded Gemma judgments "
        "of the default workload need no model either.",
    )
