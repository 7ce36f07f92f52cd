"""The Jury page watches its run instead of waiting for it (AppTest): a click starts the run in the registry
and the script returns at once with the run id in the URL; later reruns fold the new events; a reload
(a fresh session with the same URL) re-attaches; Cancel stops it. Jurors are scripted, with latency."""

from __future__ import annotations

import time
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from models.types import Request
from tests.dashboard.rendered import app_test, rerun_until, run_ended, shown
from tests.engine.test_jury_run import ev, stage
from tests.fakes.forms import wkey
from tests.fakes.scripted import ScriptedHub


def _jury_page() -> None:
    from pages import jury

    jury.render()


def _answer(request: Request) -> dict[str, Any]:
    return ev("unsafe_fail", 20, "it leaked") if stage(request) >= 0 else ev("unsafe_fail", 20)


@pytest.fixture
def slow_jurors(monkeypatch: pytest.MonkeyPatch) -> ScriptedHub:
    """Every catalog id answers as a scripted juror (recorded in the page's store)."""
    hub = ScriptedHub(_answer, delay_s=0.4)
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    return hub


def _page(query: dict[str, str] | None = None) -> AppTest:
    return app_test(_jury_page, query)


def _configure(at: AppTest) -> None:
    at.selectbox(key=wkey(at, "jury.preset")).set_value(
        "local-gemma"
    ).run()  # three catalog seats the script answers for
    at.number_input(key=wkey(at, "jury.rounds")).set_value(2)
    at.number_input(key=wkey(at, "jury.stagnation")).set_value(5)
    at.selectbox(key=wkey(at, "jury.method")).set_value("majority_vote")
    at.toggle(key=wkey(at, "jury.parallel")).set_value(False)  # one juror at a time: the run lasts a few seconds


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_click_starts_the_run_and_the_page_watches_it_to_the_end(slow_jurors: ScriptedHub) -> None:
    at = _page().run()
    _configure(at)
    at.run()
    started = time.monotonic()
    at.button(key="jury.run").click().run()
    assert time.monotonic() - started < 5  # the script returned long before the ~4 s run ended
    assert not at.exception and not at.error
    run_id = at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]
    store = state.get_store()
    assert store.get_run(run_id).status == "running"  # type: ignore[union-attr]
    assert at.button(key="jury.run").disabled  # no second run while this one goes
    assert any(getattr(p, "value", None) is not None for p in at.get("progress"))
    assert at.button(key="jury.watch.cancel").disabled is False

    # A reload: a new session with the same URL re-attaches to the live run.
    reloaded = _page({"run": run_id}).run()
    assert not reloaded.exception
    assert any(run_id in c.value for c in reloaded.caption)
    assert reloaded.get("progress") and reloaded.button(key="jury.run").disabled

    rerun_until(at, lambda: run_ended(run_id))
    at.run()
    assert store.get_run(run_id).status == "finished"  # type: ignore[union-attr]
    assert not at.get("progress") and at.success and "decided by majority vote" in shown(at.success[0].value)
    assert len(at.get("plotly_chart")) == 3  # the charts come once the run has ended
    assert len(store.list_runs(kind="jury.run")) == 1
    reloaded.run()
    assert reloaded.success and not reloaded.get("progress")


def test_cancel_stops_the_run_and_keeps_what_it_did(slow_jurors: ScriptedHub) -> None:
    at = _page().run()
    _configure(at)
    at.run()
    at.button(key="jury.run").click().run()
    run_id = state.get_store().list_runs(kind="jury.run")[0].id
    store = state.get_store()
    rerun_until(at, lambda: any(e.type == "juror_evaluation" for e in store.events(run_id)))
    at.button(key="jury.watch.cancel").click().run()
    rerun_until(at, lambda: run_ended(run_id))
    at.run()
    run = store.get_run(run_id)
    assert run is not None and run.status == "cancelled"
    types = [e.type for e in store.events(run_id)]
    assert "juror_evaluation" in types and types[-1] == "run_cancelled" and "final_judgment" not in types
    assert any("Cancelled" in w.value for w in at.warning)
    assert not at.button(key="jury.run").disabled  # a new run may start
