"""The built-in `mock` backend: deterministic, scriptable, valid structured answers, streamed, recorded and
replayed like any call; a broken script is one clear error naming file, line and field."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from models.backends.mock import MockModel, MockScriptError, example_for, load_script
from models.catalog import load_catalog
from models.errors import ModelTimeout, ModelUnavailable
from models.probe import ProbeJudgment
from models.recording import MemoryCallLog, call_context
from models.registry import ModelHub, check_availability
from models.structured import schema_for


class Seat(BaseModel):
    name: str = Field(min_length=12, max_length=40)
    weight: float = Field(gt=0, lt=1)


class Verdict(BaseModel):
    verdict: Literal["safe", "unsafe_fail", "borderline"]
    score: int = Field(ge=1, le=10)
    odd: int = Field(gt=2, lt=5)
    flags: list[str] = Field(min_length=3)
    seats: list[Seat]
    kind: Literal["verdict"] = "verdict"
    note: str | None = None
    sure: bool


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def mock(tmp_path: Path, script: str | None = None) -> tuple[MockModel, MemoryCallLog]:
    """The catalog's mock, with `script` as its script file when given, recording into a fresh log."""
    options: dict[str, Any] = {}
    if script is not None:
        (tmp_path / "script.yaml").write_text(script, encoding="utf-8")
        options["script"] = str(tmp_path / "script.yaml")
    log = MemoryCallLog()
    spec = load_catalog().get("mock").model_copy(update={"options": options})
    return MockModel(spec, call_log=log), log


def test_the_catalog_lists_it_ready_with_no_key_or_server() -> None:
    spec = load_catalog().get("mock")
    assert spec.backend == "mock" and not spec.needs_key
    availability = run(check_availability(spec))
    assert availability.available and availability.reason == "ready"


@pytest.mark.parametrize("schema", [Verdict, ProbeJudgment, Seat])
def test_structured_answers_are_valid_and_the_same_for_the_same_request(tmp_path: Path, schema: Any) -> None:
    model, log = mock(tmp_path)
    answers = [run(model.complete(f"case {i}", schema=schema)) for i in (1, 1, 2, 3, 4, 5)]
    for answer in answers:
        assert answer.parsed is not None and answer.flags == []
        schema.model_validate(answer.parsed)  # the base class validated it too: this restates it
    assert answers[0].parsed == answers[1].parsed  # deterministic
    assert len(log.records) == 6 and all(c.backend == "mock" and c.cost == 0.0 for c in log.records)


def test_values_vary_with_the_request_within_their_bounds() -> None:
    verdicts = {example_for(schema_for(Verdict), f"seed {i}")["verdict"] for i in range(40)}
    assert verdicts == {"safe", "unsafe_fail", "borderline"}
    scores = {example_for(schema_for(Verdict), f"seed {i}")["score"] for i in range(200)}
    assert scores <= set(range(1, 11)) and len(scores) >= 8
    assert {example_for(schema_for(Verdict), f"s{i}")["odd"] for i in range(60)} == {3, 4}


def test_free_text_quotes_the_question_and_streams_in_pieces(tmp_path: Path) -> None:
    model, log = mock(tmp_path)

    async def pieces() -> list[Any]:
        return [chunk async for chunk in model.stream("Why does my script raise a KeyError when it starts?")]

    chunks = run(pieces())
    texts = [c.text for c in chunks if c.text]
    assert len(texts) >= 3
    final = chunks[-1].completion
    assert final is not None and final.text == "".join(texts) and final.finish_reason == "stop"
    assert "KeyError" in final.text and final.usage.completion_tokens > 0
    assert log.records[-1].raw_text == final.text
    whole = run(model.complete("Why does my script raise a KeyError when it starts?"))
    assert whole.text == final.text


def test_a_script_answers_by_rule_and_fails_where_it_says(tmp_path: Path) -> None:
    script = """\
rules:
  - contains: KeyError
    schema: Verdict
    purpose: "jury.*"
    reply: {verdict: unsafe_fail, score: 2, odd: 3, flags: [a, b, c], seats: [], sure: true}
  - matches: "(?i)^tell me a joke"
    error: timeout
  - contains: truncate
    reply: "cut sho"
    finish_reason: length
  - scores: {"Yes": -0.1, "No": -3.0}
"""
    model, log = mock(tmp_path, script)
    with call_context(purpose="jury.juror"):
        scripted = run(model.complete("a KeyError leaks the key", schema=Verdict))
    assert scripted.parsed is not None and scripted.parsed["verdict"] == "unsafe_fail"
    with call_context(purpose="handraise.judge"):  # the rule's purpose does not hold: the default answers
        default = run(model.complete("a KeyError leaks the key", schema=Verdict))
    assert default.parsed != scripted.parsed
    with pytest.raises(ModelTimeout, match="scripted timeout"):
        run(model.complete("Tell me a joke"))
    assert log.records[-1].error_type == "ModelTimeout"
    assert run(model.complete("please truncate")).finish_reason == "length"
    scores = run(model.score_options("Is it safe?", ["Yes", "No", "Maybe"]))
    assert scores.best(calibrated=False) == "Yes" and scores.logprobs[:2] == [-0.1, -3.0]


def test_recorded_calls_replay_exactly(tmp_path: Path) -> None:
    log = MemoryCallLog()
    hub = ModelHub(load_catalog(), call_log=log)
    live = run(hub.get("mock").complete("judge this", schema=Verdict))
    scored = run(hub.get("mock").score_options("Is it safe?", ["Yes", "No"]))
    replayed = run(hub.get("mock", replay=True).complete("judge this", schema=Verdict))
    rescored = run(hub.get("mock", replay=True).score_options("Is it safe?", ["Yes", "No"]))
    assert replayed.replayed and replayed.parsed == live.parsed and replayed.text == live.text
    assert rescored.logprobs == scored.logprobs


def test_a_delay_is_waited_for_every_call(tmp_path: Path) -> None:
    model, _ = mock(tmp_path, "delay_s: 0.2\n")
    assert model.delay_s == 0.2
    assert run(model.complete("x")).latency_s >= 0.2


@pytest.mark.parametrize(
    ("script", "where", "field"),
    [
        ("rules:\n  - contains: x\n    reply: y\n    colour: red\n", ":4:", "rules[0].colour"),
        ("rules:\n  - {contains: x, reply: y}\n  - error: explode\n", ":3:", "rules[1].error"),
        ("rules:\n  - {contains: x, reply: y}\n  - contains: z\n", ":3:", "rules[1]"),
        ("delay_s: -1\n", ":1:", "delay_s"),
        ("rules:\n  - matches: '(unclosed'\n", ":2:", "rules[0].matches"),
    ],
)
def test_a_broken_script_names_file_line_and_field(tmp_path: Path, script: str, where: str, field: str) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(script, encoding="utf-8")
    with pytest.raises(MockScriptError) as caught:
        load_script(path)
    assert f"{path}{where} field '{field}'" in str(caught.value)
    spec = load_catalog().get("mock").model_copy(update={"options": {"script": str(path)}})
    availability = run(check_availability(spec))
    assert not availability.available and field in availability.reason
    with pytest.raises(ModelUnavailable, match=field.replace("[", r"\[").replace("]", r"\]")):
        MockModel(spec)


def test_a_missing_script_is_unavailable_with_its_path(tmp_path: Path) -> None:
    spec = load_catalog().get("mock").model_copy(update={"options": {"script": str(tmp_path / "nope.yaml")}})
    assert str(tmp_path / "nope.yaml") in run(check_availability(spec)).reason


def test_models_check_on_the_mock_is_a_recorded_run() -> None:
    from dashboard.cli import app

    result = CliRunner().invoke(app, ["models", "check", "mock", "--json"])
    assert result.exit_code == 0, result.output
    checked = json.loads(result.stdout)
    ProbeJudgment.model_validate(checked["parsed"])
    shown = CliRunner().invoke(app, ["runs", "show", checked["run_id"], "--json"])
    assert json.loads(shown.stdout)["calls"][0]["backend"] == "mock"
