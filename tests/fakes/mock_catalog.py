"""The shipped catalog with every model served by the built-in `mock` backend: for the tests (CLI processes, pages)
where the model is not the point. Ids, panels, profiles and tuning stay as shipped, so a command that names
`gemma3-270m` or the `local` panel runs unchanged, deterministically and without loading a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from models.catalog import DEFAULT_CATALOG, load_catalog
from models.registry import ModelHub


def mock_catalog(folder: Path, *, delay_s: float = 0.0, script: Path | None = None) -> Path:
    """Write the mocked catalog into `folder` and return its path (for JUDGELAB_CATALOG)."""
    data: dict[str, Any] = yaml.safe_load(DEFAULT_CATALOG.read_text(encoding="utf-8"))
    for spec in data["models"]:
        options: dict[str, Any] = {"delay_s": delay_s}
        if script is not None:
            options["script"] = str(script)
        spec.update(backend="mock", model="mock", needs_key=False, max_retries=0, options=options)
        for key in ("base_url", "api_key_env"):
            spec.pop(key, None)
    path = folder / "mock-catalog.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def mock_hub(monkeypatch: pytest.MonkeyPatch, folder: Path, *, delay_s: float = 0.0) -> ModelHub:
    """The pages' model hub (`state.get_hub`) over the mocked catalog, recording into the page's store."""
    from dashboard import state

    hub = ModelHub(load_catalog(mock_catalog(folder, delay_s=delay_s)), call_log=state.get_store())
    monkeypatch.setattr(state, "get_hub", lambda: hub)
    return hub
