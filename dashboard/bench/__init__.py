"""`judgelab bench`: the project's benchmarks. Each reports median / min / max over repeated runs and the figures it
exists to show; speed targets are checked here, never by timed assertions in tests.

`harness` holds the `@benchmark(name)` decorator, `BenchResult`, the registry and the runner; each other module of
this package holds the benchmarks of one mechanism or area and registers them on import. Importing this package
imports them all, in the order `judgelab bench` runs and lists them.
"""

from __future__ import annotations

# isort: off
# The order of these imports is the order of `judgelab bench` (and of `--only`'s list of known names).
from dashboard.bench import handraise_answers  # noqa: F401  # handraise.answers, handraise.conversation_turn
from dashboard.bench import experiment_bounds  # noqa: F401  # experiment.cancel, experiment.refuse_huge
from dashboard.bench import inputs  # noqa: F401  # inputs.refusals, .director_script, .parse_per_kind, .pages
from dashboard.bench import jury_default_case  # noqa: F401  # jury.default_case
from dashboard.bench import labels  # noqa: F401  # labels.refit, labels.agreement, labels.learning, labels.import
from dashboard.bench import stats  # noqa: F401  # stats.bootstrap_f1, .paired, .bootstrap_auc, .experiment_ties
from dashboard.bench import llm  # noqa: F401  # llm.judgment, llm.replay
from dashboard.bench import pages  # noqa: F401  # dashboard.memory, dashboard.page_script, dashboard.page_load
from dashboard.bench import confidence  # noqa: F401  # confidence.score
from dashboard.bench import director  # noqa: F401  # director.rules
from dashboard.bench import skip  # noqa: F401  # skip.simulate
from dashboard.bench import jury  # noqa: F401  # jury.parallel
from dashboard.bench import handraise  # noqa: F401  # handraise.judge, handraise.likelihood, handraise.whatif
from dashboard.bench import experiments  # noqa: F401  # experiment.*_decisions, experiment.executors

# isort: on
# The runner, for `judgelab bench`; the registry and the decorator are `dashboard.bench.harness`'s.
from dashboard.bench.harness import UnknownBenchmark, run_benchmarks, select_benchmarks

__all__ = ["UnknownBenchmark", "run_benchmarks", "select_benchmarks"]
