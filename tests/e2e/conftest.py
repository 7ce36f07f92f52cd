"""The browser tests' shared fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_browser import module_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module that asks for it (`module_browser`: only modules whose tests share a server)."""
    with module_browser() as chromium:
        yield chromium
