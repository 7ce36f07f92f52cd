"""What a mechanism is to the dashboard: its `MechanismUI` (its page, CLI sub-app, report figures, calibration job,
demo flow and the words of its labels), beside the engine's `MechanismSpec` of the same name (`engine.mechanism`);
the registry of them is `dashboard.ui_registry`. The app's navigation, the `judgelab` command, the run report,
`calibrate-judge`, `demo record`, the label buttons, the Labels page and the page benchmark loop over it.

A mechanism's CLI module, `dashboard/commands/<name>.py`, declares its entry. Code the CLI must not load at start-up
(the report's figures, the demo flow) is named by a loader, a function that imports it when called; the page is
named by its file, which Streamlit runs (`st.Page`), so the CLI starts without Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import plotly.graph_objects as go
    import typer

    from engine.demo import PageDemo
    from engine.exports.record import RunRecord
    from engine.refit import RefitJob
    from engine.store import Store

MODELS_PAGE = "models"  # the demo's one page that is no mechanism's: its flow is built in (`dashboard.demo_record`)


class FigureBuilder(Protocol):
    """The run report's charts of one run: (title, figure) pairs, none when the run holds nothing to draw."""

    def __call__(self, record: RunRecord, /) -> list[tuple[str, go.Figure]]: ...


class CalibrationJob(Protocol):
    """A mechanism's judge-map refit for `calibrate-judge` (`limit`: the split's first N items only)."""

    def __call__(self, data: Path, model_id: str = ..., limit: int | None = ..., /) -> RefitJob: ...


class DemoFlow(Protocol):
    """Records the mechanism's page for the demo (`judgelab demo record`)."""

    def __call__(self, store: Store, /) -> PageDemo: ...


@dataclass(frozen=True)
class LabelWords:
    """The words of a mechanism's labels on the pages (`dashboard.labelling`, the Labels page); the values are the
    engine's (`LabelSpec.values`).

    - `title`: the mechanism on the Labels page, "Jury (the right verdict)" (a table shows the part before " (");
    - `buttons`: value → the words on its button ("Should speak"); `answers`: value → a short answer for tables
      and "the judge said …" ("speak"); a value without words is shown with its underscores as spaces;
    - `words` (value → words): an open vocabulary's values in words (the jury's verdicts),
      and `choices` its default buttons where an item names none;
    - `question`: asked over a queue item whose context names a participant (``{participant}``, markdown); the
      item is then shown by its context's text;
    - `usable`: its labels a refit can learn from, counted beside the refit button ("usable hand labels"), and
      `usable_why` why some are not ("only hands judged by the likelihood judge …"; "": nothing said)."""

    title: str
    buttons: Mapping[str, str] = field(default_factory=dict)
    answers: Mapping[str, str] = field(default_factory=dict)
    words: Callable[[str], str] | None = None
    choices: tuple[str, ...] = ()
    question: str = ""
    usable: str = "usable labels"
    usable_why: str = ""


@dataclass(frozen=True)
class MechanismUI:
    """What the dashboard needs to know about one mechanism.

    - `page`: the file of its page (run by Streamlit), shown in the navigation as `title` with `icon` at
      `url_path`;
    - `cli`: its Typer sub-app, `judgelab <name> …`;
    - `figures`: loads the run report's chart builders;
    - `calibration_split` (a file under data/calibration/) and `calibration_job`: its judge maps' refit in
      `judgelab calibrate-judge`;
    - `labels`: the words of its labels (None: shown as the values are written);
    - `demo`: loads the flow that records its page's demo run (`judgelab demo record`), kept under its
      `MechanismSpec.demo_page`; None, the demo has no run of its page;
    - `reopens`: the run kinds its page draws back from `?run=<id>` (the Runs page links them), each with what
      the page shows of it ("its chat, charts and What-if");
    - `bench`: loads its benchmarks (`judgelab bench`): imports the modules whose `@benchmark` functions register
      them, in the order they run; None, it has none."""

    name: str
    page: str
    title: str
    icon: str
    url_path: str
    cli: typer.Typer | None = None
    figures: Callable[[], Sequence[FigureBuilder]] = tuple
    calibration_split: str = ""
    calibration_job: CalibrationJob | None = None
    labels: LabelWords | None = None
    demo: Callable[[], DemoFlow] | None = None
    reopens: Mapping[str, str] = field(default_factory=dict)
    bench: Callable[[], object] | None = None
