"""tools/code_size.py (run by `make lint`): it names each function over 80 lines and each module over 720 lines in
engine/, models/, dashboard/ and pages/ (#40: the pages and the CLI are held to the engine's rules), and passes a tree
without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tree(base: Path, files: dict[str, str]) -> Path:
    for name in ("engine", "models", "dashboard", "pages", "tests"):
        (base / name).mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (base / name).write_text(text, encoding="utf-8")
    return base


def _run(base: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "code_size.py"), str(base)], capture_output=True, text=True, timeout=60
    )


def test_long_functions_and_modules_are_named(tmp_path: Path) -> None:
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))  # 81 lines with the def
    files = {
        "engine/a.py": "def short():\n    return 1\n\n\nasync def too_long():\n" + long_body,
        "models/b.py": "def fine():\n" + "".join(f"    y{i} = {i}\n" for i in range(79)),  # exactly 80
        "dashboard/c.py": "".join(f"z{i} = {i}\n" for i in range(721)),
        "dashboard/d.py": "def long_in_dashboard():\n" + long_body,
        "pages/e.py": "def long_in_a_page():\n" + long_body + "".join(f"p{i} = {i}\n" for i in range(640)),
        "tests/f.py": "def long_in_a_test():\n" + long_body,  # tests are not held to it
    }
    done = _run(_tree(tmp_path, files))
    assert done.returncode == 1
    assert "function of 81 lines" in done.stdout and "engine/a.py:5 too_long" in done.stdout
    assert "module of 721 lines" in done.stdout and "dashboard/c.py" in done.stdout
    assert "dashboard/d.py:1 long_in_dashboard" in done.stdout and "pages/e.py:1 long_in_a_page" in done.stdout
    assert "module of 721 lines (at most 720): pages/e.py" in done.stdout
    assert "fine" not in done.stdout and "long_in_a_test" not in done.stdout


def test_a_tree_within_the_limits_passes(tmp_path: Path) -> None:
    done = _run(_tree(tmp_path, {"engine/a.py": "def f():\n    return 1\n"}))
    assert done.returncode == 0 and "code size:" in done.stdout
