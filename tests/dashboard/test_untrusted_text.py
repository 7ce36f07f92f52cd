"""Untrusted text is never markdown or HTML it controls: the `md` escaper, figure labels, avatars, and every
page that shows stored runs (AppTest) with every text field hostile. tests/e2e/test_hostile_text.py checks
the same in Chromium, down to the DOM and the network."""

from __future__ import annotations

import re
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from dashboard.components import md, plot_text, safe_avatar
from dashboard.mechanisms.confidence import charts as confidence_charts
from dashboard.mechanisms.jury import charts as jury_charts
from tests.dashboard.rendered import shown
from tests.fakes.hostile import hostile, live_markers, store_hostile_runs

PORT = 9  # nothing listens there; AppTest renders no HTML anyway

CONSTRUCTS = [
    "### Answer: yes",
    "# Title\n===",
    "- item\n1. item",
    "> quote",
    "**bold** _it_ ~~gone~~ `code`",
    "[link](http://127.0.0.1:9/x)",
    "![img](http://127.0.0.1:9/i.png)",
    "<img src=x onerror=alert(1)>",
    "<a href='http://127.0.0.1:9'>Click to approve</a>",
    "&lt;b&gt; &#60;i&#62;",
    "$x^2$ and $$y$$",
    ":red[red] :blue-background[bg] :material/home: :smile:",
    "| a | b |\n|---|---|",
    "    indented code",
    "http://127.0.0.1:9/bare www.example.com mail@example.com",
    "a\\b\\\\c",
    "line one\n\nline two",
]


@pytest.mark.parametrize("text", CONSTRUCTS)
def test_md_makes_every_construct_literal(text: str) -> None:
    inline = md(text)
    assert "\n" not in inline and shown(inline) == " ".join(text.split())
    assert shown(md(text, inline=False)) == "  \n".join(line.strip() for line in text.splitlines())
    unescaped = re.sub(r"\\[!-/:-@\[-`{-~]", "", inline)  # every ASCII punctuation comes escaped
    assert not re.search(r"[!-/:-@\[-`{-~]", unescaped), unescaped
    assert not live_markers(inline)
    resolved = inline.replace("\\", "")  # what the autolink finder sees once escapes are resolved
    assert "://" not in resolved and "www." not in resolved.lower() and "@" not in resolved.replace("@\u2060", "")


def test_figures_show_tags_as_text_and_avatars_are_emoji_only() -> None:
    role, label = "<a href='http://127.0.0.1:9'>x</a>", "<img src=x>"
    rows = [
        {
            "juror": "a",
            "role": role,
            "label": label,
            "score": 50,
            "verdict": "<b>v</b>",
            "stage": "<i>s</i>",
            "start": 0.0,
            "end": 1.0,
        }
    ]
    figures = [
        jury_charts.jury_trajectory(rows),
        jury_charts.jury_timeline(rows),
        jury_charts.jury_verdicts({label: {"v": 1}}, ["v"]),
        confidence_charts.step_scores([label], [0.5], ["SILENT"], {"mean": 0.5}),
    ]
    strings = [
        str(v)
        for fig in figures
        for trace in fig.data
        for v in (trace.name, trace.text, trace.x, trace.y, trace.hovertemplate)
        if v is not None
    ]
    assert strings and not any("<a " in s or "<img" in s or "<b>" in s or "<i>" in s for s in strings)
    assert plot_text(role) == "&lt;a href='http://127.0.0.1:9'&gt;x&lt;/a&gt;"
    assert safe_avatar("🧑‍💻") == "🧑‍💻" and safe_avatar("http://127.0.0.1:9/a.png") == "🤖"
    assert safe_avatar(":material/home:", "🙋") == "🙋" and safe_avatar(None) == "🤖"


def _render(name: str) -> None:
    import importlib

    importlib.import_module(f"pages.{name}").render()


def _markdown_sources(at: AppTest) -> list[str]:
    """Every string the page hands to Streamlit's markdown renderer."""
    sources: list[Any] = [
        e.value
        for kind in ("markdown", "caption", "error", "warning", "info", "success", "subheader", "title", "header")
        for e in getattr(at, kind)
    ]
    sources += [e.label for kind in ("expander", "tabs", "metric") for e in getattr(at, kind)]
    return [str(s) for s in sources]


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_pages_render_hostile_runs_as_text() -> None:
    runs = store_hostile_runs(state.get_store(), PORT)
    state.clear_reads()
    pages = [AppTest.from_function(_render, args=("replay",), default_timeout=60)]
    live = AppTest.from_function(_render, args=("jury",), default_timeout=60)
    live.session_state["jury.run_id"] = runs["jury.run"]
    pages.append(live)
    for run_id in runs.values():
        at = AppTest.from_function(_render, args=("runs",), default_timeout=60)
        at.query_params["run"] = run_id
        pages.append(at)
    pages.append(AppTest.from_function(_render, args=("handraise",), default_timeout=60))  # benchmark tab
    shown_as_text = 0
    for at in pages:
        at.run()
        assert not at.exception, at.exception
        sources = _markdown_sources(at)
        assert sources
        leaks = [s[:120] for s in sources if live_markers(s)]
        assert not leaks, leaks
        shown_as_text += sum("### Heading" in t.value and "<img src=" in t.value for t in at.text)
    assert shown_as_text >= 20  # reasoning, statements, judgments, prompts and replies, verbatim
    # Escaped, the hostile case title still reads exactly as written.
    title = next(h.value for h in pages[0].subheader if "case-title" in shown(h.value))
    assert hostile(PORT, "case-title", one_line=True) in " ".join(shown(title).split())


@pytest.mark.parametrize("text", CONSTRUCTS)
def test_breakable_identifiers_stay_literal_and_read_the_same(text: str) -> None:
    """`md(breakable(x))`: the zero-width break points change nothing a reader sees or a renderer acts on."""
    from dashboard.components import ZERO_WIDTH_SPACE, breakable

    inline = md(breakable(text))
    assert shown(inline) == " ".join(text.split()) and not live_markers(inline)
    resolved = inline.replace("\\", "")  # what the autolink finder sees: no scheme, www. or e-mail forms one
    assert "://" not in resolved and "www." not in resolved.lower() and "@" not in resolved.replace("@\u2060", "")
    assert shown(inline.replace(ZERO_WIDTH_SPACE, "")) == shown(inline)


def test_breakable_puts_break_points_after_underscores_not_inside_numbers() -> None:
    from dashboard.components import ZERO_WIDTH_SPACE as Z
    from dashboard.components import breakable

    assert breakable("retry_next_check") == f"retry_{Z}next_{Z}check"
    assert breakable("pmi_last_rel +0.12 · map v1") == f"pmi_{Z}last_{Z}rel +0.12 · map v1"  # a sign stays put
    assert (
        breakable("gemma3-270m+smollm2-135m·x calibration:v1") == f"gemma3-270m+{Z}smollm2-135m·{Z}x calibration:{Z}v1"
    )
    assert breakable("trailing_ a: b") == "trailing_ a: b" and breakable(None) == ""
    assert breakable("map 20261123T111521Z;") == f"map 20261123T{Z}111521Z;"  # a version: date, then time
    assert breakable("id 120261123T111521Z 20261123T11") == "id 120261123T111521Z 20261123T11"  # not a version
