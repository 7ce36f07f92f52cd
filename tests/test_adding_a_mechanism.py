"""docs/adding-a-mechanism.md is the test (#40): its code blocks, each naming its file on its first line, are written
into a scratch folder whose `engine`, `dashboard` and `pages` extend the project's packages; the mechanism they make
is registered as the page says (its `SPEC` and its `UI`) and goes green on the registry's checks: every loader loads,
every surface lists it last, its sub-app answers, its run exports the tables it declares."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import dashboard
import dashboard.mechanisms
import engine
import pages
from dashboard.ui_registry import register_ui, uis, unregister_ui
from engine.exports import load_run, tables
from engine.registry import mechanism_names, register_mechanism, unregister_mechanism
from engine.store import Store
from tests.test_mechanism_registry import check_mechanism

DOC = Path(__file__).resolve().parents[1] / "docs" / "adding-a-mechanism.md"
BLOCK = re.compile(r"```python\n# (\S+\.py)\n(.*?)```", re.DOTALL)
PACKAGES = {"engine": engine, "dashboard/mechanisms": dashboard.mechanisms, "pages": pages}


def doc_files() -> dict[str, str]:
    """The page's files: path → text (each block's first line names its file)."""
    return {path: f"# {path}\n{text}" for path, text in BLOCK.findall(DOC.read_text(encoding="utf-8"))}


@pytest.fixture
def tally(tmp_path: Path) -> Iterator[Path]:
    files = doc_files()
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    extended = [(package, str(tmp_path / folder)) for folder, package in PACKAGES.items()]
    for package, folder in extended:
        package.__path__.append(folder)
    try:
        from dashboard.mechanisms.tally.cli import UI  # type: ignore[import-not-found]
        from engine.tally.spec import SPEC  # type: ignore[import-not-found]

        register_mechanism(SPEC)
        register_ui(UI)
        yield tmp_path
    finally:
        unregister_mechanism("tally")
        unregister_ui("tally")
        for package, folder in extended:
            package.__path__.remove(folder)
        for module in [
            m for m in sys.modules if m.startswith(("engine.tally", "dashboard.mechanisms.tally", "pages.tally"))
        ]:
            del sys.modules[module]


def test_the_page_names_every_required_file() -> None:
    files = doc_files()
    assert {
        "engine/tally/__init__.py",
        "engine/tally/spec.py",
        "dashboard/mechanisms/tally/__init__.py",
        "dashboard/mechanisms/tally/cli.py",
        "dashboard/mechanisms/tally/page.py",
        "pages/tally.py",
    } <= set(files)


def test_a_mechanism_made_from_the_page_alone_goes_green(tally: Path, store: Store) -> None:
    assert mechanism_names()[-1] == "tally" and uis()[-1].name == "tally"
    check_mechanism("tally", root=tally)
    from engine.tally.run import tally as count  # type: ignore[import-not-found]

    run_id = count(store, "one two three")
    found = tables(load_run(store, run_id))
    assert found["tally_counts"].rows == [{"words": 3}]
    assert [r["word"] for r in found["tally_words"].rows] == ["one", "two", "three"]
    cli = typer.Typer()  # as `judgelab` adds each mechanism's sub-app (dashboard/cli.py)
    cli.add_typer(uis()[-1].cli, name="tally")  # type: ignore[arg-type]
    cli.command("version")(lambda: None)
    answered = CliRunner().invoke(cli, ["tally", "count", "a b c d"])
    assert answered.exit_code == 0 and answered.output.strip() == "4"
