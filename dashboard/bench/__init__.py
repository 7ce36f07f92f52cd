"""`judgelab bench`: the project's benchmarks. Each reports median / min / max over repeated runs and the figures it
exists to show; speed targets are checked here, never by timed assertions in tests.

`harness` holds the `@benchmark(name)` decorator, `BenchResult`, the registry and the runner; each other module of
this package holds the benchmarks of one area and registers them on import; a mechanism's live in its dashboard half
(`dashboard/mechanisms/<name>/bench*.py`), loaded by its `MechanismUI.bench`. Importing this package imports them
all, in the order `judgelab bench` runs and lists them.
"""

from __future__ import annotations

# The runner, for `judgelab bench`; the registry and the decorator are `dashboard.bench.harness`'s.
from dashboard.bench.harness import UnknownBenchmark, run_benchmarks, select_benchmarks

# isort: off
# The order of these imports is the order of `judgelab bench` (and of `--only`'s list of known names): the shared
# benchmarks, then each registered mechanism's (its `MechanismUI.bench`, in registration order), then the
# experiments'.
from dashboard.bench import experiment_bounds  # noqa: F401  # experiment.cancel, experiment.refuse_huge
from dashboard.bench import inputs  # noqa: F401  # inputs.refusals, .director_script, .parse_per_kind, .pages
from dashboard.bench import labels  # noqa: F401  # labels.refit, labels.agreement, labels.learning, labels.import
from dashboard.bench import stats  # noqa: F401  # stats.bootstrap_f1, .paired, .bootstrap_auc, .experiment_ties
from dashboard.bench import llm  # noqa: F401  # llm.judgment, llm.replay
from dashboard.bench import pages  # noqa: F401  # dashboard.memory, dashboard.page_script, dashboard.page_load
from dashboard.bench import registry  # noqa: F401  # registry.listing
from dashboard.ui_registry import uis

for _ui in uis():
    if _ui.bench is not None:
        _ui.bench()

from dashboard.bench import experiments  # noqa: E402, F401  # experiment.*_decisions, experiment.executors

# isort: on

__all__ = ["UnknownBenchmark", "run_benchmarks", "select_benchmarks"]
