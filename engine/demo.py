"""Demo recordings: runs of every mechanism, recorded once with the bundled model, shipped in `data/demo/`.

`runs.jsonl` holds one run a line in the JSON export format (`engine.exports.run_document`: the run, its
config, every event and every LLM call with its request hash); `manifest.json` says, per page, which inputs
were recorded, so demo mode can offer them and name them when a presenter types something else. Loading is
idempotent: a run whose id is already stored is left as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from engine.config import get_settings
from engine.exports import load_run, run_document
from engine.inputs import InputError, MissingFile, iter_lines, read_text
from engine.store import EventRow, LlmCall, Run, Store, StoreError, _dumps
from models.recording import CallRecord

DEMO_TAG = "demo"
RUNS_FILE = "runs.jsonl"
MANIFEST_FILE = "manifest.json"
# Which page a call's purpose (its run kind, or a mechanism's own purpose) belongs to.
PURPOSE_PAGES = {
    "handraise": "conversation",
    "jury": "jury",
    "director": "director",
    "confidence": "confidence",
    "skip": "skip-cache",
    "models": "models",
}


class DemoError(ValueError):
    """The demo files are missing or broken; the message says which and how to refresh them."""


class PageDemo(BaseModel):
    """What was recorded for one page: the inputs to use, and the widget values that reproduce the run."""

    title: str
    inputs: list[str]
    run_ids: list[str] = Field(default_factory=list)
    prefill: dict[str, Any] = Field(default_factory=dict)
    note: str = ""


class DemoManifest(BaseModel):
    model_id: str
    recorded_at: str
    pages: dict[str, PageDemo]


def demo_dir() -> Path:
    return get_settings().data_dir / "demo"


def load_manifest(folder: Path | None = None) -> DemoManifest:
    path = (folder or demo_dir()) / MANIFEST_FILE
    try:
        return DemoManifest.model_validate_json(read_text(path))
    except MissingFile:
        raise DemoError(f"no demo recording at {path} — run `judgelab demo record`") from None
    except ValueError as exc:
        raise DemoError(f"the demo manifest {path} is broken ({exc}) — run `judgelab demo record`") from None


def miss_message(purpose: str, manifest: DemoManifest | None) -> str:
    """What a presenter reads when an input was not recorded: the recorded inputs of that page."""
    page = PURPOSE_PAGES.get(purpose.split(".")[0].split(":")[0])
    if manifest is None:
        return "not in the demo recording (and the demo manifest is missing) — run `judgelab demo record`"
    pages = [manifest.pages[page]] if page in manifest.pages else list(manifest.pages.values())
    tried = "; ".join(f"{p.title}: " + " | ".join(repr(i) for i in p.inputs) for p in pages)
    return f"not in the demo recording: try one of {tried} (demo mode answers only recorded requests)"


def export_runs(store: Store, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The runs as portable documents (config, events and calls, keys redacted)."""
    return [run_document(load_run(store, run_id)) for run_id in run_ids]


def write_runs(documents: Iterable[dict[str, Any]], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(d, ensure_ascii=False, separators=(",", ":"), default=str) for d in documents]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def read_runs(path: Path) -> list[dict[str, Any]]:
    try:
        text = read_text(path)
    except MissingFile:
        raise DemoError(f"no demo runs at {path} — run `judgelab demo record`") from None
    except InputError as exc:
        raise DemoError(str(exc)) from None
    documents = []
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
            document["run"]["id"], document["events"], document["calls"]  # noqa: B018 — the shape is checked
        except (ValueError, KeyError, TypeError):
            raise DemoError(f"{path}:{n} is not a run document — run `judgelab demo record`") from None
        documents.append(document)
    return documents


def _ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass
class LoadReport:
    loaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    events: int = 0
    calls: int = 0


def import_run(store: Store, document: dict[str, Any]) -> bool:
    """Store one run document with its events and calls, in one transaction; False when its id is stored."""
    meta = document["run"]
    if store.get_run(meta["id"]) is not None:
        return False
    run = Run(
        id=meta["id"],
        kind=meta["kind"],
        name=meta.get("name") or "",
        status=meta["status"],
        config_json=_dumps(document.get("config") or {}),
        config_hash=meta.get("config_hash") or "",
        summary_json=_dumps(document.get("summary") or {}),
        error=meta.get("error"),
        started_at=_ts(meta["started_at"]) or datetime.now(),
        finished_at=_ts(meta.get("finished_at")),
    )
    events = [
        EventRow(
            run_id=run.id,
            seq=e["seq"],
            type=e["type"],
            payload_json=_dumps(e["payload"]),
            ts=_ts(e["ts"]) or run.started_at,
        )
        for e in document["events"]
    ]
    calls = [
        LlmCall.from_record(
            CallRecord(
                run_id=run.id,
                purpose=c["purpose"],
                model_id=c["model_id"],
                backend=c["backend"],
                model_name=c.get("model_name") or "",
                request_hash=c["request_hash"],
                request=c["request"],
                raw_text=c.get("raw_text"),
                parsed=c.get("parsed"),
                prompt_tokens=c.get("prompt_tokens") or 0,
                completion_tokens=c.get("completion_tokens") or 0,
                latency_s=c.get("latency_s") or 0.0,
                cost=c.get("cost") or 0.0,
                would_cost=c.get("would_cost"),
                finish_reason=c.get("finish_reason"),
                error=c.get("error"),
                error_type=c.get("error_type"),
                flags=c.get("flags") or [],
                attempts=c.get("attempts") or 1,
                created_at=_ts(c["created_at"]) or run.started_at,
            )
        )
        for c in document["calls"]
    ]
    try:
        with Session(store.engine) as session:
            session.add(run)
            session.flush()  # the run first: events reference it
            session.add_all([*events, *calls])
            session.commit()
    except Exception as exc:
        if store.get_run(meta["id"]) is not None:  # another process loaded it at the same moment
            return False
        raise StoreError(f"cannot load demo run {meta['id']}: {exc}") from exc
    store.set_tags(meta["id"], sorted({*meta.get("tags", []), DEMO_TAG}))
    return True


def load_demo(store: Store, folder: Path | None = None) -> LoadReport:
    """Import the shipped demo runs into `store`; runs already there are left alone (idempotent)."""
    report = LoadReport()
    for document in read_runs((folder or demo_dir()) / RUNS_FILE):
        if import_run(store, document):
            report.loaded.append(document["run"]["id"])
            report.events += len(document["events"])
            report.calls += len(document["calls"])
        else:
            report.present.append(document["run"]["id"])
    return report
