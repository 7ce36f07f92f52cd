"""Typed errors of the model layer.

Every error names the model and backend and says what to do next. Only real faults raise; the
engine turns them into documented fallbacks (a neutral juror, a flagged self-evaluation, ...).
"""

from __future__ import annotations

from typing import Any

from models.secrets import redact


class ModelError(Exception):
    """Base class: a call to a model did not give a usable answer."""

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        model_id: str = "",
        backend: str = "",
        raw_text: str | None = None,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        self.message = message  # redacted by the property below: providers echo keys in some errors
        self.model_id = model_id
        self.backend = backend
        self.raw_text = raw_text  # redacted by the property below: replies can echo a key
        self.retry_after = retry_after
        self.status = status
        self.attempts = 1
        super().__init__(self.__str__())

    @property
    def message(self) -> str:
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        self._message = redact(value)

    @property
    def raw_text(self) -> str | None:
        return self._raw_text

    @raw_text.setter
    def raw_text(self, value: str | None) -> None:
        self._raw_text = redact(value) if value else value

    def __str__(self) -> str:
        where = f"[{self.model_id} via {self.backend}] " if self.model_id or self.backend else ""
        return f"{where}{self.message}"

    @property
    def kind(self) -> str:
        return type(self).__name__


class ModelUnavailable(ModelError):
    """The model cannot be used at all: missing key, server down, file missing, SDK missing."""


class ModelTimeout(ModelError):
    """The backend did not answer within the configured timeout."""

    retryable = True


class RateLimited(ModelError):
    """HTTP 429 (or the provider's equivalent); `retry_after` is honoured when given."""

    retryable = True


class ServerError(ModelError):
    """HTTP 5xx or a dropped connection mid-call."""

    retryable = True


class BadRequest(ModelError):
    """The provider refused the request (4xx other than 429): retrying will not help."""


class SafetyBlocked(ModelError):
    """The provider's safety filter blocked the answer."""


class MalformedResponse(ModelError):
    """The provider's response body was not of its documented shape."""

    retryable = True


class StructuredOutputError(ModelError):
    """The text could not be turned into the requested schema; `raw_text` carries what came back and
    `flags` the failed fields (`invalid:<path>`) or `truncated` (cut off at max_tokens)."""

    def __init__(self, message: str, *, flags: list[str] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.flags = list(flags or [])


class CannotScore(ModelError):
    """The backend offers no log-probabilities for these options (Anthropic; a chat API whose top
    log-probabilities do not reach the options), so a likelihood judge cannot use it."""


class ReplayMiss(Exception):
    """Replay found no recorded call for a request.

    Deliberately not a ModelError: mechanisms turn model errors into documented fallbacks (a neutral
    juror, a flagged factor), and a replay that fell back silently would report figures no model gave
    (`jury eval --replay` on an empty store: accuracy 0.0, every juror a fallback, exit 0). A miss stops
    the run instead, unless the caller asked replay to fall through to live calls."""

    kind = "ReplayMiss"
    raw_text: str | None = None
    attempts = 1

    def __init__(self, message: str, *, model_id: str = "", purpose: str = "", request_hash: str = "") -> None:
        self.message = redact(message)
        self.model_id = model_id
        self.backend = "replay"
        self.purpose = purpose
        self.request_hash = request_hash
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f" for {self.purpose}" if self.purpose and self.purpose != "adhoc" else ""
        return f"[{self.model_id} via replay] replay miss{where}: {self.message}"
