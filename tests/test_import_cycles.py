"""tools/import_cycles.py (run by `make lint`): an import cycle is found even where one half sits inside a function,
and an import inside a function needs a reason. Run on small trees written here, and on the project itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "import_cycles.py"


def _tree(base: Path, files: dict[str, str]) -> Path:
    for root in ("engine", "models", "dashboard", "pages"):
        (base / root).mkdir(parents=True, exist_ok=True)
        (base / root / "__init__.py").write_text("")
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)
    return base


def _check(base: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(base)], capture_output=True, text=True, timeout=60)


def test_a_cycle_closed_inside_a_function_is_found(tmp_path: Path) -> None:
    base = _tree(
        tmp_path,
        {
            "engine/config.py": "from engine.inputs import read\n",
            "engine/inputs.py": "def read():\n    from engine import config  # heavy: not really\n    return config\n",
        },
    )
    done = _check(base)
    assert done.returncode == 1, done.stdout
    assert "1. 2 modules: engine.config, engine.inputs" in done.stdout
    assert "engine.inputs:2 -> engine.config (in a function)" in done.stdout
    assert "engine.config:1 -> engine.inputs (module level)" in done.stdout


def test_a_package_init_and_relative_imports_count(tmp_path: Path) -> None:
    base = _tree(
        tmp_path,
        {
            "engine/jury/__init__.py": "from .runner import run\n",
            "engine/jury/runner.py": "def run():\n    pass\n",
            "engine/jury/config.py": "X = 1\n",
            # importing engine.jury.config runs engine/jury/__init__ first: a cycle through the package
            "engine/likelihood.py": "from engine.jury.config import X\n",
            "engine/jury/prompts.py": "from ..likelihood import X\n",
        },
    )
    (base / "engine/jury/runner.py").write_text("from engine.jury.prompts import X\n\ndef run():\n    pass\n")
    done = _check(base)
    assert done.returncode == 1
    assert "engine.jury, engine.jury.prompts, engine.jury.runner, engine.likelihood" in done.stdout
    assert "engine.likelihood:1 -> engine.jury (module level)" in done.stdout


def test_an_import_inside_a_function_needs_a_reason(tmp_path: Path) -> None:
    base = _tree(
        tmp_path,
        {
            "engine/stats.py": (
                "def test():\n"
                "    from scipy.stats import binomtest  # heavy: scipy\n"
                "    # CLI start-up: loaded when the command runs\n"
                "    import json\n"
                "    import math\n"
                "    return binomtest, json, math\n"
            ),
            "engine/quiet.py": "def f():\n    import json\n\n    return json\n",
            "engine/typed.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import json\n",
        },
    )
    done = _check(base)
    assert done.returncode == 1
    assert "without a reason (heavy, optional or CLI start-up): 1" in done.stdout
    assert "engine/quiet.py:2: import json" in done.stdout
    assert "import cycles: none" in done.stdout


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_the_project_has_no_cycle_and_every_deferred_import_says_why() -> None:
    done = _check(ROOT)
    assert done.returncode == 0, done.stdout
    assert "import cycles: none in engine, models, dashboard, pages" in done.stdout
