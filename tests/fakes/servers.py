"""Loopback servers that speak the documented request/response shapes of Ollama, OpenAI, Anthropic
and Gemini, with scripted failures (429 + Retry-After, 5xx, stalls, malformed bodies).

Each binds 127.0.0.1 on a free port, records every request, and shuts itself down after
`lifetime_s` even if a test forgets to stop it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON; str/bytes → sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: list[Any] | None = None  # SSE events (dicts) or NDJSON lines (dicts)
    stream_format: str = "sse"  # "sse" | "ndjson"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """A scripted HTTP server. Queue replies with `script(...)`; otherwise `default(path, body)` answers."""

    def __init__(self, lifetime_s: float = 300.0) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.local = threading.local()
        self._lock = threading.Lock()
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server_self._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server_self.seen.append(Seen(self.command, self.path, headers, body))
                    reply = server_self.replies.popleft() if server_self.replies else None
                server_self.local.headers = headers  # what `default` may read of this request
                if reply is None:
                    reply = server_self.default(self.command, self.path, body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    server_self._send(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = _handle  # noqa: N815
            do_POST = _handle  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # `stop` waits for the serving loop to see the shutdown: it looks every 50 ms (the default, 0.5 s, made
        # every test that stops a server wait a quarter of a second on average).
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def start(self) -> FakeServer:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def default(self, method: str, path: str, body: Any) -> Reply:
        return Reply(404, {"error": f"no route {method} {path}"})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.stream is not None:
            handler.send_response(reply.status)
            content_type = "text/event-stream" if reply.stream_format == "sse" else "application/x-ndjson"
            handler.send_header("content-type", content_type)
            handler.send_header("connection", "close")
            for k, v in reply.headers.items():
                handler.send_header(k, v)
            handler.end_headers()
            for item in reply.stream:
                if reply.stream_format == "sse":
                    data = item if isinstance(item, str) else json.dumps(item)
                    handler.wfile.write(f"data: {data}\n\n".encode())
                else:
                    handler.wfile.write((json.dumps(item) + "\n").encode())
                handler.wfile.flush()
            handler.close_connection = True
            return
        if isinstance(reply.body, dict | list):
            payload = json.dumps(reply.body).encode()
            content_type = "application/json"
        elif isinstance(reply.body, bytes):
            payload, content_type = reply.body, "application/json"
        else:
            payload, content_type = str(reply.body or "").encode(), "application/json"
        handler.send_response(reply.status)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(payload)))
        for k, v in reply.headers.items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(payload)


# -- OpenAI ---------------------------------------------------------------------------------------
def openai_ok(content: str, prompt_tokens: int = 12, completion_tokens: int = 7, model: str = "gpt-4o") -> Reply:
    return Reply(
        body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def openai_error(
    status: int, message: str, type_: str = "server_error", headers: dict[str, str] | None = None
) -> Reply:
    return Reply(status, {"error": {"message": message, "type": type_, "param": None, "code": None}}, headers or {})


def openai_stream(pieces: list[str], prompt_tokens: int = 12, completion_tokens: int = 5) -> Reply:
    events: list[Any] = []
    for i, piece in enumerate(pieces):
        events.append(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": piece} | ({"role": "assistant"} if i == 0 else {}),
                        "finish_reason": None,
                    }
                ],
            }
        )
    events.append(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    events.append(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4o",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )
    events.append("[DONE]")
    return Reply(stream=events)


# -- Anthropic ------------------------------------------------------------------------------------
def anthropic_tool(input_obj: dict[str, Any], input_tokens: int = 20, output_tokens: int = 9) -> Reply:
    return Reply(
        body={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "tool_use", "id": "toolu_test", "name": "submit_answer", "input": input_obj}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def anthropic_text(text: str, input_tokens: int = 20, output_tokens: int = 9, stop_reason: str = "end_turn") -> Reply:
    return Reply(
        body={
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def anthropic_error(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": type_, "message": message}}, headers or {})


# -- Gemini ---------------------------------------------------------------------------------------
def gemini_ok(text: str, prompt_tokens: int = 15, candidate_tokens: int = 8, finish: str = "STOP") -> Reply:
    return Reply(
        body={
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish, "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": candidate_tokens,
                "totalTokenCount": prompt_tokens + candidate_tokens,
            },
            "modelVersion": "gemini-2.5-flash",
        }
    )


_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def gemini_error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    error = {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}
    return Reply(status, {"error": error}, headers or {})


# -- Ollama ---------------------------------------------------------------------------------------
class OllamaServer(FakeServer):
    """Answers /api/tags with the pulled models; /api/chat from the script."""

    def __init__(self, models: list[str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.models = models if models is not None else ["llama3.2:3b"]

    def default(self, method: str, path: str, body: Any) -> Reply:
        if path == "/api/tags":
            return Reply(body={"models": [{"name": m, "model": m, "size": 1} for m in self.models]})
        if path == "/api/chat" and isinstance(body, dict):
            if body.get("model") not in self.models:
                return Reply(404, {"error": f"model '{body.get('model')}' not found"})
        return super().default(method, path, body)


def ollama_ok(content: str, prompt_eval_count: int = 11, eval_count: int = 6, model: str = "llama3.2:3b") -> Reply:
    return Reply(
        body={
            "model": model,
            "created_at": "2026-11-22T00:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "prompt_eval_count": prompt_eval_count,
            "eval_count": eval_count,
        }
    )


def ollama_stream(pieces: list[str], prompt_eval_count: int = 11, eval_count: int = 4) -> Reply:
    lines: list[Any] = [
        {
            "model": "llama3.2:3b",
            "created_at": "2026-11-22T00:00:00Z",
            "message": {"role": "assistant", "content": p},
            "done": False,
        }
        for p in pieces
    ]
    lines.append(
        {
            "model": "llama3.2:3b",
            "created_at": "2026-11-22T00:00:00Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": prompt_eval_count,
            "eval_count": eval_count,
        }
    )
    return Reply(stream=lines, stream_format="ndjson")


def ollama_error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


GEMINI_PATH = re.compile(r"^/v1beta/models/(?P<model>[^:]+):generateContent")


# -- an OpenAI-compatible server that answers anything, from the request's own schema -------------------
def fill_schema(
    schema: dict[str, Any], text: Callable[[str], str], root: dict[str, Any] | None = None, path: str = ""
) -> Any:
    """A value valid for a JSON schema (the subset pydantic writes): every string is `text(path)`, numbers
    sit mid-range, enums take their first value."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return fill_schema(root.get("$defs", {}).get(name, {}), text, root, path)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combiner in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(combiner, []) if o.get("type") != "null"]
        if options:
            return fill_schema(options[0], text, root, path)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        return {k: fill_schema(v, text, root, f"{path}.{k}") for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [
            fill_schema(schema.get("items", {}), text, root, f"{path}[]")
            for _ in range(max(1, schema.get("minItems", 1)))
        ]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 100))
        middle = (low + high) / 2
        return int(middle) if kind == "integer" else middle
    if kind == "boolean":
        return True
    value = text(path)
    return value[: schema["maxLength"]] if "maxLength" in schema else value


class SchemaServer(FakeServer):
    """OpenAI-compatible (`/v1/chat/completions`, `/v1/models`): a structured request gets JSON valid for its
    own schema with every string from `text(path, body, headers)`; free text gets `text("", body, headers)`,
    streamed in small pieces when asked. `error(body, headers)` may return a Reply to send instead."""

    def __init__(
        self,
        text: Callable[[str, dict[str, Any], dict[str, str]], str],
        error: Callable[[dict[str, Any], dict[str, str]], Reply | None] | None = None,
        piece_size: int = 5,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.text = text
        self.error = error
        self.piece_size = piece_size

    def default(self, method: str, path: str, body: Any) -> Reply:
        headers = getattr(self.local, "headers", {})
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return Reply(body={"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "test"}]})
        if not (method == "POST" and path.endswith("/chat/completions") and isinstance(body, dict)):
            return super().default(method, path, body)
        failure = self.error(body, headers) if self.error else None
        if failure is not None:
            return failure
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        if schema:
            content = json.dumps(fill_schema(schema, lambda p: self.text(p, body, headers)), ensure_ascii=False)
        else:
            content = self.text("", body, headers)
        if body.get("stream"):
            size = self.piece_size
            return openai_stream([content[i : i + size] for i in range(0, len(content), size)] or [""])
        return openai_ok(content)
