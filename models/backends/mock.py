"""The built-in `mock` backend: a deterministic, scriptable stand-in for a model, for dry runs of experiments,
pages and the CLI without a model, a key or a server (and for the tests where the model is not the point).

It answers with no model at all, yet through the same path as every backend: the request hash, structured-output
validation, cost (always $0), streaming and recording of every call, so a dry run's calls replay like live ones.

What it answers, first match wins:
1. a Python `responder(request)` (the API's hook: `MockModel(spec, responder=fn)`), unless it returns None;
2. the first rule of its script file (the catalog's `options: {script: path}`) whose conditions all hold;
3. by default: for a structured request, an object valid against the requested JSON schema, its values chosen
   from the request's hash (so the same request gets the same object, and different requests differ); for free
   text, a short reply that quotes the request; for option scoring, log-probabilities from the hash.

A script is YAML (see docs/models.md, "The mock backend"):

    rules:
      - contains: KeyError          # a substring of the request's text (all messages, or the scoring prompt)
        matches: "(?i)traceback"    # a regular expression searched in the same text
        schema: JurorEvaluation     # the structured output asked for (its class name)
        purpose: "jury.*"           # the call's purpose (a glob)
        reply: {juror_id: j1, verdict: unsafe_fail, score: 20}   # a mapping is sent as JSON
      - contains: "tell me a joke"
        error: timeout              # a scripted failure: timeout, rate_limited, server, unavailable, bad_request
      - scores: {"Yes": -0.2, "No": -1.9}   # a scoring request's option log-probabilities (others: by hash)
    delay_s: 0.05                   # latency of every call (the catalog option `delay_s` overrides it)

A rule answers only the kind of request it has an answer for: `reply` a generation, `scores` a scoring request
(`error` both).

Replies stream in pieces of a few words (`supports_streaming`), like a served model.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from models import files, safe_yaml
from models.base import ChatModel, Requires
from models.catalog import ModelSpec
from models.errors import BadRequest, ModelError, ModelTimeout, ModelUnavailable, RateLimited, ServerError
from models.fieldlines import compose, validation_problems
from models.recording import CallLog, current_context
from models.types import RawResult, Request, ScoreResult

Reply = str | dict[str, Any] | RawResult | Exception | None
Responder = Callable[[Request], Reply]

_ERRORS: dict[str, type[ModelError]] = {
    "timeout": ModelTimeout,
    "rate_limited": RateLimited,
    "server": ServerError,
    "unavailable": ModelUnavailable,
    "bad_request": BadRequest,
}
_WORDS_PER_PIECE = 3


class MockScriptError(ValueError):
    """A mock script file is unusable; the message names the file, the line and the field."""


class MockRule(BaseModel):
    """One rule of a script: its conditions (all must hold; none: it always holds) and what it answers."""

    model_config = ConfigDict(extra="forbid")

    contains: str | None = None
    matches: str | None = None
    schema_name: str | None = Field(default=None, alias="schema")
    purpose: str | None = None
    reply: str | dict[str, Any] | None = None
    scores: dict[str, float] | None = None
    error: Literal["timeout", "rate_limited", "server", "unavailable", "bad_request"] | None = None
    finish_reason: str = "stop"

    @field_validator("matches")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _answers(self) -> MockRule:
        if self.reply is None and self.scores is None and self.error is None:
            raise ValueError("a rule needs what it answers: reply, scores or error")
        return self

    def holds(self, request: Request, purpose: str) -> bool:
        text = request_text(request)
        return (
            (self.contains is None or self.contains in text)
            and (self.matches is None or re.search(self.matches, text) is not None)
            and (self.schema_name is None or self.schema_name == request.schema_name)
            and (self.purpose is None or fnmatch.fnmatchcase(purpose, self.purpose))
        )


class MockScript(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[MockRule] = Field(default_factory=list)
    delay_s: float = Field(default=0.0, ge=0, le=600)

    def rule_for(self, request: Request) -> MockRule | None:
        """The first rule that holds and answers this kind of request (`scores` a scoring one, `reply` the others;
        `error` both)."""
        purpose = current_context().purpose
        scoring = request.options is not None
        return next(
            (
                rule
                for rule in self.rules
                if (rule.error is not None or (rule.scores if scoring else rule.reply) is not None)
                and rule.holds(request, purpose)
            ),
            None,
        )


def load_script(path: str | Path) -> MockScript:
    """A script file, validated; errors name the file, the line and the field."""
    path = Path(path)
    try:
        text = files.read_text(path)
        data = safe_yaml.load(text)
    except files.InputError as exc:
        raise MockScriptError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise MockScriptError(f"{path}: not valid YAML: {exc}") from None
    try:
        return MockScript.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise MockScriptError("\n".join(validation_problems(str(path), exc, compose(text)))) from None


def request_text(request: Request) -> str:
    """What the rules match against: every message's text, or a scoring request's raw prompt."""
    return request.prompt if request.prompt is not None else "\n".join(m.content for m in request.messages)


def prompt_tokens(request: Request) -> int:
    """A rough count (4 characters a token), enough for the pages' token and throughput figures."""
    if request.prompt is not None:
        return len(request.prompt) // 4
    return sum(len(m.content) for m in request.messages) // 4


def _unit(seed: str, path: str) -> float:
    """A number in [0, 1) fixed by the request's hash and the place in the answer."""
    digest = hashlib.sha256(f"{seed}|{path}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def example_for(schema: dict[str, Any], seed: str) -> Any:
    """A value valid against a JSON schema (the subset pydantic writes: objects, arrays, enums, consts, numbers
    with bounds, strings with lengths, unions and $refs), chosen by `seed`."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def value(node: dict[str, Any], path: str) -> Any:
        if "$ref" in node:
            return value(defs[node["$ref"].rsplit("/", 1)[-1]], path)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            options = node["enum"]
            return options[int(_unit(seed, path) * len(options))]
        for key in ("anyOf", "oneOf"):
            if key in node:
                branches = [b for b in node[key] if b.get("type") != "null"] or node[key]
                return value(branches[0], path)
        if "allOf" in node:
            return value(node["allOf"][0], path)
        kind = node.get("type", "object" if "properties" in node else "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            props: dict[str, Any] = node.get("properties", {})
            return {name: value(sub, f"{path}.{name}") for name, sub in props.items()}
        if kind == "array":
            count = max(int(node.get("minItems", 1)), min(int(node.get("maxItems", 2)), 2))
            return [value(node.get("items", {}), f"{path}[{i}]") for i in range(count)]
        if kind in ("number", "integer"):
            return _number(node, kind, _unit(seed, path))
        if kind == "boolean":
            return _unit(seed, path) < 0.5
        if kind == "null":
            return None
        text = f"mock {path.rsplit('.', 1)[-1] or 'text'}"
        low, high = int(node.get("minLength", 0)), int(node.get("maxLength", 10_000))
        return (text + "." * max(0, low - len(text)))[:high]

    return value(schema, "")


def _number(node: dict[str, Any], kind: str, unit: float) -> float | int:
    low = float(node.get("minimum", node.get("exclusiveMinimum", 0.0)))
    high = float(node.get("maximum", node.get("exclusiveMaximum", max(low, 0.0) + 1.0)))
    if kind == "integer":
        lo, hi = int(-(-low // 1)), int(high // 1)  # ceil and floor
        lo += "exclusiveMinimum" in node and lo == low
        hi -= "exclusiveMaximum" in node and hi == high
        return lo + int(unit * (hi - lo + 1)) if hi >= lo else lo
    return round(low + (high - low) * (0.05 + 0.9 * unit), 4)  # strictly inside: exclusive bounds hold too


class MockModel(ChatModel):
    """Answers deterministically from a responder, a script or the request itself; no model, no cost."""

    backend = "mock"
    requires = Requires()  # nothing: it is part of judgelab
    supports_streaming = True
    can_score = True

    def __init__(
        self,
        spec: ModelSpec,
        *,
        call_log: CallLog | None = None,
        responder: Responder | None = None,
        delay_s: float | None = None,
    ) -> None:
        super().__init__(spec, call_log=call_log)
        self.responder = responder
        script_path = spec.options.get("script")
        try:
            self.script = load_script(script_path) if script_path else MockScript()
        except MockScriptError as exc:
            raise self._error(ModelUnavailable, str(exc)) from None
        option_delay = spec.options.get("delay_s")
        self.delay_s = float(delay_s if delay_s is not None else option_delay or self.script.delay_s)

    @classmethod
    async def unavailable_reason(cls, spec: ModelSpec) -> str | None:
        """Always ready, unless its script file is missing or broken (the message names file, line and field)."""
        script_path = spec.options.get("script")
        if script_path:
            try:
                load_script(script_path)
            except MockScriptError as exc:
                return str(exc)
        return None

    def _answer(self, request: Request) -> RawResult:
        """The reply to a generation request: the responder's, a rule's, or the default."""
        reply = self.responder(request) if self.responder is not None else None
        rule = self.script.rule_for(request) if reply is None else None
        if rule is not None and rule.error is not None:
            reply = self._error(_ERRORS[rule.error], f"scripted {rule.error} (mock script rule)")
        elif rule is not None and rule.reply is not None:
            reply = rule.reply
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, RawResult):
            return reply
        if reply is None:
            seed = request.request_hash()
            reply = example_for(request.json_schema, seed) if request.json_schema else self._default_text(request)
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        return RawResult(
            text=text,
            prompt_tokens=prompt_tokens(request),
            completion_tokens=len(text) // 4,
            finish_reason=rule.finish_reason if rule is not None else "stop",
        )

    def _default_text(self, request: Request) -> str:
        asked = next((m.content for m in reversed(request.messages) if m.role == "user"), request_text(request))
        asked = " ".join(asked.split())
        quoted = asked if len(asked) <= 80 else asked[:77] + "..."
        return f"(mock reply from {self.model_id}) You asked: {quoted}"

    async def _generate(self, request: Request, schema: type[BaseModel] | None) -> RawResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._answer(request)

    async def _generate_stream(
        self, request: Request, schema: type[BaseModel] | None
    ) -> AsyncIterator[str | RawResult]:
        raw = await self._generate(request, schema)
        words = re.findall(r"\S+\s*|\s+", raw.text)
        for start in range(0, len(words), _WORDS_PER_PIECE):
            yield "".join(words[start : start + _WORDS_PER_PIECE])
            await asyncio.sleep(0)  # a piece at a time, as a served model sends them
        yield raw.model_copy(update={"text": ""})  # usage and finish reason

    async def _score(self, request: Request) -> ScoreResult:
        """Option log-probabilities: a rule's `scores` where it names the option, otherwise from the hash."""
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        rule = self.script.rule_for(request)
        if rule is not None and rule.error is not None:
            raise self._error(_ERRORS[rule.error], f"scripted {rule.error} (mock script rule)")
        scripted = rule.scores if rule is not None and rule.scores else {}
        seed = request.request_hash()
        options = request.options or []
        return ScoreResult(
            logprobs=[scripted.get(o, -0.5 - 4.0 * _unit(seed, o)) for o in options],
            token_counts=[max(1, len(o) // 4) for o in options],
            prompt_tokens=prompt_tokens(request),
        )
