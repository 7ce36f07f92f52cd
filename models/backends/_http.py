"""HTTP status → typed error, and Retry-After parsing, shared by the HTTP backends."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from models.errors import (
    BadRequest,
    MalformedResponse,
    ModelError,
    ModelUnavailable,
    RateLimited,
    ServerError,
)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def error_for_status(
    status: int,
    message: str,
    headers: Mapping[str, str] | None,
    *,
    model_id: str,
    backend: str,
    key_hint: str = "",
) -> ModelError:
    kw: dict[str, Any] = {"model_id": model_id, "backend": backend, "status": status}
    if status == 429:
        return RateLimited(f"rate limited (HTTP 429): {message}", retry_after=retry_after_seconds(headers), **kw)
    if status in (401, 403):
        hint = f" — check {key_hint}" if key_hint else ""
        return ModelUnavailable(f"not authorised (HTTP {status}): {message}{hint}", **kw)
    if status == 404:
        return ModelUnavailable(f"not found (HTTP 404): {message} — check the model name and base URL", **kw)
    if status >= 500:
        return ServerError(f"server error (HTTP {status}): {message}", retry_after=retry_after_seconds(headers), **kw)
    if status >= 400:
        return BadRequest(f"request refused (HTTP {status}): {message}", **kw)
    return MalformedResponse(f"unexpected HTTP {status}: {message}", **kw)


def short(text: object, limit: int = 300) -> str:
    s = str(text)
    return s if len(s) <= limit else s[:limit] + "…"
