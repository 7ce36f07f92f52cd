"""The HTML report of a run: self-contained (no element loads anything, plotly.js inlined once, a policy that
forbids every request), the page's charts for each kind, and every hostile text escaped — the document's
elements are only the report's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import plotly
import pytest

from dashboard.report import figures_for, plotly_js, report_of, run_report
from engine.events import run_context
from engine.exports import load_run
from engine.store import Store
from tests.fakes.hostile import store_hostile_runs
from tests.fakes.runs import stored_calibration, stored_conversation, stored_director_batch, stored_jury, stored_skip

PORT = 9  # the hostile texts point at 127.0.0.1:9 (discard): nothing may ever ask for it
REPORT_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "script",
    "body",
    "h1",
    "h2",
    "h3",
    "p",
    "b",
    "code",
    "span",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "pre",
    "div",
}


class Elements(HTMLParser):
    """Every start tag of a document with its attributes; scripts' text kept apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def parse(document: str) -> Elements:
    parser = Elements()
    parser.feed(document)
    return parser


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'report.db'}")
    yield s
    s.dispose()


@pytest.mark.slow  # one of the longest tests on the CPU alone (make test-fast leaves it to make test)
def test_hostile_runs_make_self_contained_escaped_reports(store: Store) -> None:
    runs = store_hostile_runs(store, PORT)
    js = plotly_js()
    assert len(js) > 1_000_000 and plotly.__version__
    for kind, run_id in runs.items():
        document = run_report(store, run_id)
        found = parse(document)
        tags = {t for t, _ in found.tags}
        assert tags <= REPORT_TAGS, (kind, tags - REPORT_TAGS)  # no img, a, iframe, svg, link, object …
        for tag, attrs in found.tags:
            assert "src" not in attrs and "href" not in attrs, (kind, tag, attrs)
            assert not any(name.startswith("on") for name in attrs), (kind, tag, attrs)
        csp = next(
            a["content"] for t, a in found.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
        )
        assert csp is not None and "default-src 'none'" in csp and "connect-src 'none'" in csp
        # Scripts: the inlined plotly.js once (when there is a chart), the figure specs as inert JSON, the
        # few lines that draw them — and nothing from the run.
        code = [text for attrs, text in found.scripts if attrs.get("type") != "application/json"]
        specs = [text for attrs, text in found.scripts if attrs.get("type") == "application/json"]
        assert len(specs) == len(figures_for(load_run(store, run_id)))
        if specs:
            assert sum(js in text for text in code) == 1 and len(code) == 2
            for spec in specs:
                assert "<" not in spec  # it cannot end its element
                json.loads(spec)
        else:
            assert js not in document and len(document) < 200_000
        assert f"127.0.0.1:{PORT}" not in "".join(code).replace(js, "")
        # Every hostile text is there, escaped: readable, never markup.
        markup = re.sub(r"<script[^>]*>.*?</script>", "", document, flags=re.S)
        assert not re.search(r"<(img|a|iframe|svg|link|object|embed)\b", markup), kind
        if kind != "skip.simulate":
            assert "&lt;img src=http://127.0.0.1:9/" in markup, kind
    jury = re.sub(r"<script[^>]*>.*?</script>", "", run_report(store, runs["jury.run"]), flags=re.S)
    assert "&lt;img src=http://127.0.0.1:9/img/case-title&gt;" in jury
    assert "&lt;script&gt;fetch(&#x27;http://127.0.0.1:9/script/case-title&#x27;)&lt;/script&gt;" in jury


def test_each_kind_gets_its_page_charts(store: Store) -> None:
    def titles(run_id: str) -> list[str]:
        return [f.title for f in figures_for(load_run(store, run_id))]

    assert titles(stored_jury(store)[0]) == [
        "Score trajectory per juror",
        "Round timeline",
        "Verdict distribution",
        "LLM calls: tokens and latency",
    ]
    assert titles(stored_conversation(store)[0]) == [
        "Will per participant per turn",
        "Approval flow",
        "LLM calls: tokens and latency",
    ]
    assert titles(stored_director_batch(store)) == ["Rubric average per line", "LLM calls: tokens and latency"]
    assert titles(stored_calibration(store)) == ["Reliability diagram", "Risk–coverage"]
    assert titles(stored_skip(store)) == ["Judge calls with and without the cache"]
    skip = figures_for(load_run(store, stored_skip(store)))[0]
    bars = json.loads(skip.spec)["data"][0]
    assert bars["x"] == ["without cache", "with cache"] and bars["y"][1] < bars["y"][0]


def test_a_run_with_nothing_to_chart_still_reports(store: Store) -> None:
    with run_context(store, "demo.bare", {"threshold": 0.6}, name="bare") as run:
        run.emit("step", n=1)
    document = report_of(load_run(store, run.run_id))
    assert "No chart for this kind of run." in document and "Plotly" not in document
    assert "Event timeline (3 events)" in document and "&quot;threshold&quot;: 0.6" in document


NARROW = 900  # the narrowest window the pages are checked at


def _fixed_widths(document: str) -> list[int]:
    """Every width in px a report's CSS or inline style fixes (min-width included)."""
    markup = re.sub(r"<script[^>]*>.*?</script>", "", document, flags=re.S)
    return [int(px) for px in re.findall(r"(?<![-\w])(?:min-)?width\s*:\s*(\d+)px", markup)]


def test_exports_fit_a_900_px_window(store: Store) -> None:
    """E1: a run report or an experiment export is as wide as the window: no fixed width wider than 900 px, no
    figure with a fixed width, and a wide table scrolls inside the page (not the page sideways). The e2e test
    measures it in Chromium (tests/e2e/test_report_offline.py)."""
    from dashboard.report import experiment_report
    from tests.dashboard.test_export_colors import shown_experiment

    documents = {
        "jury": run_report(store, stored_jury(store)[0]),
        "conversation": run_report(store, stored_conversation(store)[0]),
        "experiment": experiment_report(shown_experiment()),
    }
    for name, document in documents.items():
        assert all(px <= NARROW for px in _fixed_widths(document)), (name, _fixed_widths(document))
        specs = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', document, re.S)
        assert specs and not [s for s in specs if json.loads(s)["layout"].get("width")], name
        style = "".join(re.findall(r"<style>(.*?)</style>", document, re.S))
        rules = re.findall(r"(?:^|[}\s])table\{([^}]*)\}", style)
        assert any("display:block" in r and "overflow-x:auto" in r for r in rules), (name, rules)


def test_the_calls_latency_axis_never_goes_below_zero(store: Store) -> None:
    """E2: tokens and seconds start at 0: both axes of the calls chart are pinned there."""
    (calls,) = [f for f in figures_for(load_run(store, stored_jury(store)[0])) if f.title.startswith("LLM calls")]
    layout = json.loads(calls.spec)["layout"]
    assert layout["yaxis"]["rangemode"] == "tozero" and layout["yaxis2"]["rangemode"] == "tozero"


def test_the_reports_headline_rates_carry_their_intervals(store: Store) -> None:
    """A benchmark run's rates in its HTML report: each bar with its stored 95 % interval as an error bar and in
    its label, as the page shows it; a rate stored without one is drawn without (never made up)."""
    with run_context(store, "handraise.eval", {}, name="bench") as run:
        run.summary = {"accuracy": 0.5, "accuracy_ci": [0.27, 0.73], "f1": 0.6}
    (figure,) = [f for f in figures_for(load_run(store, run.run_id)) if f.title == "Judge benchmark"]
    bars = json.loads(figure.spec)["data"][0]
    assert bars["x"] == ["accuracy", "f1"] and bars["text"] == ["0.50 (0.27–0.73)", "0.60"]
    assert bars["error_y"]["array"] == pytest.approx([0.23, 0.0])
    assert bars["error_y"]["arrayminus"] == pytest.approx([0.23, 0.0])
