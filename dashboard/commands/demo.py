"""`judgelab demo load|record`: the recorded demo runs in `data/demo/` (see docs/demo.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dashboard.commands import fail, say
from dashboard.ui_registry import demo_pages

app = typer.Typer(help="Demo mode: load the recorded runs, or record them again.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
Folder = Annotated[Path | None, typer.Option("--folder", help="Demo folder (default: data/demo).")]
PAGES = demo_pages()  # the Models page, then each registered mechanism's page with a demo flow


@app.command("load")
def load_cmd(folder: Folder = None, as_json: JsonFlag = False) -> None:
    """Import the demo runs (config, events and LLM calls) into the configured store; runs already there are
    left alone, so loading twice adds nothing."""
    # CLI start-up: loaded when the command runs
    from engine.demo import DemoError, load_demo
    from engine.store import Store, StoreError

    try:
        store = Store()
        report = load_demo(store, folder)
    except (DemoError, StoreError) as exc:
        raise fail(str(exc)) from None
    result = {
        "loaded": report.loaded,
        "already_present": report.present,
        "events": report.events,
        "calls": report.calls,
        "database": store.display_url,
    }
    if as_json:
        say(json.dumps(result, ensure_ascii=False, indent=1))
    else:
        say(
            f"loaded {len(report.loaded)} demo run(s) ({report.events} events, {report.calls} LLM calls) into "
            f"{store.display_url}; {len(report.present)} already there"
        )


@app.command("record")
def record_cmd(
    folder: Folder = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help=f"Record only these pages: {', '.join(PAGES)}.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record the demo runs again with the bundled model (minutes), through the entry points the pages call and
    with the pages' default settings, and write data/demo/runs.jsonl and manifest.json."""
    # CLI start-up: loaded when the command runs
    from dashboard.commands import require_models
    from dashboard.demo_record import record
    from engine.demo import MODEL, demo_dir
    from models.catalog import load_catalog
    from models.files import shown_path

    pages = demo_pages()  # as registered now (a mechanism registered after this module was imported too)
    unknown = set(only or []) - set(pages)
    if unknown:
        raise fail(f"unknown page(s) {', '.join(sorted(unknown))} — choose from {', '.join(pages)}")
    require_models(load_catalog(), [MODEL])
    target = folder or demo_dir()
    manifest = record(target, set(only) if only else None)
    if as_json:
        say(manifest.model_dump_json(indent=1))
    else:
        for page, demo in manifest.pages.items():
            say(f"{page}: {', '.join(demo.run_ids)} — {demo.note}")
        say(f"written to {shown_path(target)}")
