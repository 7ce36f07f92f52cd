"""Keep modules and functions small enough to read (issues #27, #40): no function over MAX_FUNCTION lines and no module
over MAX_MODULE lines in engine/, models/, dashboard/ and pages/. Lines are counted as written,
docstrings and comments included. Exit 1 listing each one over, longest first."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION = 80
MAX_MODULE = 720  # "about 700"
FUNCTION_ROOTS = ("engine", "models", "dashboard", "pages")
MODULE_ROOTS = FUNCTION_ROOTS


def long_functions(root: Path, limit: int = MAX_FUNCTION) -> list[tuple[int, str]]:
    found = []
    for folder in FUNCTION_ROOTS:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append((lines, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def long_modules(root: Path, limit: int = MAX_MODULE) -> list[tuple[int, str]]:
    found = []
    for folder in MODULE_ROOTS:
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append((lines, str(path.relative_to(root))))
    return sorted(found, reverse=True)


def main(root: Path = ROOT) -> int:
    functions, modules = long_functions(root), long_modules(root)
    for lines, where in functions:
        print(f"function of {lines} lines (at most {MAX_FUNCTION} in {', '.join(FUNCTION_ROOTS)}): {where}")
    for lines, where in modules:
        print(f"module of {lines} lines (at most {MAX_MODULE}): {where}")
    if functions or modules:
        return 1
    print(
        f"code size: every function in {', '.join(FUNCTION_ROOTS)} ≤ {MAX_FUNCTION} lines, every module ≤ {MAX_MODULE}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
