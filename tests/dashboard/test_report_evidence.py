"""#38 (4): exports carry the evidence the page shows — the skip simulation's saving with its interval in the
headline (HTML and CSV), its trade-off and timeline charts, a latency axis that reads at any scale."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dashboard.report import figures_for, run_report
from engine.exports import csv_text, load_run, tables
from engine.skip.config import ResponseConfig
from engine.skip.run import SimulationConfig, run_simulation
from engine.skip.workload import WorkloadSpec
from engine.store import Store


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_skip_simulations_export_holds_its_interval_and_every_chart_of_its_page(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'skip.db'}")
    try:
        config = SimulationConfig(
            workload=WorkloadSpec(),
            response=ResponseConfig(),
            recording="data/recordings/skipcache-default.jsonl",
        )
        report = asyncio.run(run_simulation(config, None, store))
        record = load_run(store, report.run_id)
        table = tables(record)["headline"]
        low, high = report.comparison["calls_saved_pct_ci"]
        # the saving's interval beside it (it was only in the raw event JSON)
        assert table.rows[0]["calls_saved_pct_ci"] == f"{low:.4g}–{high:.4g}"
        assert "calls_saved_pct_ci" in csv_text(table)
        titles = [f.title for f in figures_for(record)]
        assert "Calls saved vs. delay (trade-off sweep)" in titles
        assert any(t.startswith("Per-conversation timeline (channel ") for t in titles), titles
        html = run_report(store, report.run_id)
        assert "Per-conversation timeline" in html and "calls_saved_pct_ci" in html
    finally:
        store.dispose()


def test_the_latency_axis_reads_at_any_scale() -> None:
    """Millisecond latencies read "0.002, 0.004", not "0.01, 0.01, 0, 0"."""
    from dashboard.report import _calls

    class Call:
        def __init__(self, i: int) -> None:
            self.id, self.model_id, self.purpose, self.error = i, "m", "p", None
            self.prompt_tokens, self.completion_tokens, self.latency_s = 10, 2, 0.002 * i

    class Record:
        calls = [Call(i) for i in range(1, 5)]

    ((_, fig),) = _calls(Record())  # type: ignore[arg-type]
    assert json.loads(fig.to_json())["layout"]["yaxis2"]["tickformat"] == ".3~g"
