"""Fixtures of the dashboard tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def _component_manifests_scanned_once() -> Iterator[None]:
    """Every new AppTest scans all installed distributions for Streamlit component manifests (~0.13 s of CPU
    reading ~140 packages' metadata, for every page a test opens). The installed packages do not change during
    the session: the first scan's real result serves the later AppTests."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    found: dict[int | None, list[Any]] = {}

    def scan_once(max_workers: int | None = None) -> list[Any]:
        if max_workers not in found:
            found[max_workers] = scan(max_workers)
        return list(found[max_workers])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests", scan_once)
        yield
