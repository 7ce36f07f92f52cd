"""The project's own files agree with each other: what pyproject.toml says of the test runs is what the Makefile
runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _recipe(makefile: str, target: str) -> str:
    match = re.search(rf"^{re.escape(target)}:.*\n\t(.+)$", makefile, re.MULTILINE)
    assert match, f"no `{target}` target in the Makefile"
    return match.group(1)


def test_the_worker_counts_in_pyproject_are_the_makefiles() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    said = next(line for line in pyproject.splitlines() if line.strip().startswith('"pytest-xdist'))
    for target in ("test", "test-fast"):
        workers = re.search(r"-n (\d+) --dist (\w+)", _recipe(makefile, target))
        assert workers, f"make {target} names no worker count"
        assert f"make {target}: " in said
        stated = re.search(rf"make {re.escape(target)}: (\d+) workers \(-n (\d+) --dist (\w+)\)", said)
        assert stated and stated.groups() == (workers.group(1), workers.group(1), workers.group(2)), said
