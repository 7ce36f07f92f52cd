"""Shared fixtures. Every test gets its own SQLite file and no API keys from the environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in [v for v in os.environ if v.startswith("JURY_")]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JUDGELAB_SECRETS", str(tmp_path / "no-secrets.toml"))
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'test.db'}")
    yield


@pytest.fixture
def store(tmp_path: Path):
    from engine.store import Store

    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@pytest.fixture(scope="session")
def bundled_path() -> str:
    from models.backends.llamacpp import bundled_model_path

    return bundled_model_path()
