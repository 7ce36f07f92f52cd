"""The page benchmarks' long history (`dashboard.bench.harness.history_store`): as many runs as asked, each a copy of a
shipped demo run with its events and calls, readable by the store and the Runs page's queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.bench.harness import history_store
from engine.store import RunFilter, Store
from tests.engine.test_demo import DEMO_RUNS


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_history_store_copies_the_demo_runs_with_their_events(tmp_path: Path) -> None:
    url, counts = history_store(tmp_path, n_runs=23)
    store = Store(url)
    try:
        assert counts["runs"] == 23 == store.count_runs()
        newest = store.search_runs(RunFilter(), limit=10)
        assert len({r.id for r in newest}) == 10 and all(r.status == "finished" for r in newest)
        for run in newest[:5]:
            assert store.events(run.id)[0].type == "run_started"
        assert sum(len(store.events(r.id)) for r in store.search_runs(RunFilter(), limit=100)) == counts["events"]
        assert store.count_runs(RunFilter(kinds=("jury.run",))) >= 23 // DEMO_RUNS  # the demo's runs in turn
    finally:
        store.dispose()
