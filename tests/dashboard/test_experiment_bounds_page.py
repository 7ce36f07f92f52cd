"""The Experiments page against a hostile grid (issue 26): a 10^9-cell space typed in the form is refused at
validation in bounded time and memory, naming the cap and the count; nothing can be launched."""

from __future__ import annotations

import resource
import time

from tests.dashboard.rendered import app_test
from tests.fakes.forms import wkey


def _experiments_page() -> None:
    from pages import experiments

    experiments.render()


def test_a_billion_cell_space_is_refused_on_the_page_naming_the_cap() -> None:
    at = app_test(_experiments_page).run()
    at.radio(key=wkey(at, "experiments.source")).set_value("Form").run()
    at.selectbox(key=wkey(at, "experiments.f.mechanism")).set_value("director").run()
    at.text_area(key=wkey(at, "experiments.f.base.director")).input(
        "{format_retry_lines: 100000, scatter_retry_sentences: 100000, scatter_retry_topics: 100000}"
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    at.text_area(key=wkey(at, "experiments.f.space.director")).input(
        "format_warn_lines: {from: 1, to: 1000, step: 1}\n"
        "scatter_warn_sentences: {from: 1, to: 1000, step: 1}\n"
        "scatter_warn_topics: {from: 1, to: 1000, step: 1}\n"
    ).run()
    took = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not at.exception
    assert at.button(key="experiments.launch").disabled
    problems = next(c.value for c in at.code if "<form>:" in c.value)
    assert (
        "space: 1000000000 cells" in problems and "more than the cap of 100000 cells (JUDGELAB_MAX_CELLS)" in problems
    )
    assert not any("Valid:" in s.value for s in at.success)
    assert took < 10 and grown_mb < 200, (took, grown_mb)
