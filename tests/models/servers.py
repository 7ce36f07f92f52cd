"""A real `llama_cpp.server` on 127.0.0.1 serving one GGUF file, for the OpenAI-compatible path's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from dashboard.net import free_port, stop_process
from models.catalog import ModelSpec, Profile


@contextmanager
def serve_llama(model_path: str, alias: str, log_dir: Path, chat_format: str = "alpaca") -> Iterator[str]:
    """The server's `/v1` URL once it answers; stopped afterwards. Its log goes to a file (a pipe would fill
    with llama.cpp's load log and block the server) and is shown if it exits early."""
    port = free_port()
    log_path = log_dir / "server.log"
    threads = os.environ.get("JUDGELAB_THREADS") or str(os.cpu_count() or 2)
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                model_path,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--n_threads",
                threads,  # a worker's share (tests/conftest.py)
                "--n_threads_batch",
                threads,  # prompts (and echoed scoring) too: the server's default is every core
                "--model_alias",
                alias,
                "--chat_format",
                chat_format,
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            text=True,
        )
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            else:
                pytest.fail("llama_cpp.server did not start within 120 s")
            yield url
        finally:
            stop_process(proc, timeout=20)


def server_spec(url: str, alias: str = "gemma3-270m") -> ModelSpec:
    """The catalog entry a user would write for that server (OpenAI backend, no key)."""
    return ModelSpec(
        id="local-openai-server",
        backend="openai",
        model=alias,
        base_url=url,
        needs_key=False,
        timeout_s=300,  # a real server on two cores shared with the suite: each scoring call is many requests
        max_retries=1,
        options={"structured": "json_object_schema"},
        profile=Profile(name="llama.cpp server"),
    )
