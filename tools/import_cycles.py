"""Import cycles between the project's modules, counting the imports inside functions; and every import inside a
function says why it is there.

Python only notices a cycle when both halves run at import time; one half deferred into a function hides it, and the
module graph stays tangled (issue 27). This script parses every module of ``engine``, ``models``, ``dashboard`` and
``pages`` with ``ast`` and builds the graph from *every* import statement, module level or not:

- ``from a.b import c`` is an edge to ``a.b.c`` where that is a module, and to ``a.b`` otherwise (and for names that
  are not modules);
- relative imports are resolved against the importing module's package;
- importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first, so those are edges too, except the importer's
  own packages (always initialised before it runs);
- imports under ``if TYPE_CHECKING:`` never run and are left out;
- a registry's loader (an import inside a function under a ``# loaded when used`` comment: a mechanism's spec or
  dashboard entry naming its code, `engine.mechanism`) is left out too: it runs when its part is used, after every
  module has loaded, by design — the registry is what every mechanism reaches and what reaches every mechanism, so
  counting its loaders would make one cycle of them all (the ``"module:attr"`` strings they replaced hid the same
  edges from this check).

It prints each strongly connected component (a set of modules that reach each other) with the imports that close
it. An import is deferred into a function only for an optional or heavy third-party package or for the command
line's start-up time, and says which in a comment on its line or on a comment line just above its group of imports
(naming "heavy", "optional" or "CLI start-up"); ruff's PLC0415 allows them only in the files pyproject.toml lists,
and this script checks each one carries its reason. It exits 1 on a cycle or an import without a reason.
``make lint`` runs it.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOTS = ("engine", "models", "dashboard", "pages")
REASON = re.compile(r"CLI start-up|heavy|optional|loaded when used", re.IGNORECASE)
LOADER = re.compile(r"loaded when used", re.IGNORECASE)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    deferred: bool  # inside a function


def module_files(base: Path) -> dict[str, Path]:
    """Every module under the roots, by dotted name (a package by its own name, for its ``__init__``)."""
    found: dict[str, Path] = {}
    for root in ROOTS:
        for path in sorted((base / root).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement that can run, with whether it sits inside a function."""

    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, in_function
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk(ast.Module(body=[other], type_ignores=[]), in_function)
            else:
                nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from walk(child, nested)

    yield from walk(tree, False)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def edges_of(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    tree = ast.parse(text, filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    own = set(_ancestors(name))
    edges: list[Edge] = []

    def add(target: str, node: ast.stmt, deferred: bool, *, explicit: bool) -> None:
        for parent in _ancestors(target):
            if parent in modules and parent not in own and parent != name:
                edges.append(Edge(name, parent, node.lineno, deferred))
        if target in modules and target != name and (explicit or target not in own):
            edges.append(Edge(name, target, node.lineno, deferred))

    for node, deferred in _imports(tree):
        if deferred and node.lineno > 1 and LOADER.search(lines[node.lineno - 2]):
            continue  # a registry's loader (see the module's docstring)
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, deferred, explicit=True)
            continue
        if node.level:
            base = package.split(".")
            if node.level > 1:
                base = base[: -(node.level - 1)]
            stem = ".".join([*base, node.module] if node.module else base)
        else:
            stem = node.module or ""
        if stem.split(".")[0] not in ROOTS:
            continue
        names_a_module = [f"{stem}.{alias.name}" in modules for alias in node.names]
        for alias, is_module in zip(node.names, names_a_module, strict=True):
            if is_module:
                add(f"{stem}.{alias.name}", node, deferred, explicit=True)
        if not all(names_a_module):
            add(stem, node, deferred, explicit=True)
        elif stem in modules and stem not in own:
            add(stem, node, deferred, explicit=False)
    return edges


def strongly_connected(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of two or more modules (or one that imports itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def find_cycles(base: Path) -> tuple[list[list[str]], list[Edge]]:
    modules = module_files(base)
    edges = [edge for name, path in modules.items() for edge in edges_of(name, path, modules)]
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    return strongly_connected(sorted(modules), graph), edges


def _comment(line: str) -> str:
    return line.split("#", 1)[1] if "#" in line else ""


def unexplained(base: Path) -> list[str]:
    """Imports inside functions with no reason: none on their lines, none on the comment line above their group
    (the imports written one after another, with no blank line between)."""
    found = []
    for path in module_files(base).values():
        lines = path.read_text(encoding="utf-8").split("\n")
        statements = list(_imports(ast.parse("\n".join(lines), filename=str(path))))
        ending_at = {node.end_lineno: node for node, _ in statements}
        for node, deferred in statements:
            if not deferred or any(REASON.search(_comment(line)) for line in lines[node.lineno - 1 : node.end_lineno]):
                continue
            first = node
            while first.lineno - 1 in ending_at:  # the import just above, in the same group
                first = ending_at[first.lineno - 1]
            above = lines[first.lineno - 2].strip() if first.lineno > 1 else ""
            if not (above.startswith("#") and REASON.search(above)):
                found.append(f"{path.relative_to(base)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def main(argv: list[str]) -> int:
    base = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    components, edges = find_cycles(base)
    missing = unexplained(base)
    if missing:
        print(f"imports inside functions without a reason (heavy, optional or CLI start-up): {len(missing)}")
        print("\n".join(f"   {line}" for line in missing))
    else:
        print("imports inside functions: each says why (heavy, optional or CLI start-up)")
    if not components:
        print(f"import cycles: none in {', '.join(ROOTS)} (imports inside functions counted)")
        return 1 if missing else 0
    print(f"import cycles: {len(components)} (imports inside functions counted)")
    for number, component in enumerate(components, 1):
        members = set(component)
        print(f"\n{number}. {len(component)} modules: {', '.join(component)}")
        for edge in sorted({e for e in edges if e.source in members and e.target in members}, key=str):
            where = "in a function" if edge.deferred else "module level"
            print(f"   {edge.source}:{edge.line} -> {edge.target} ({where})")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
