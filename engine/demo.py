"""Demo recordings: runs of every mechanism, recorded once with the bundled model, shipped in `data/demo/`.

`runs.jsonl` holds one run a line in the JSON export format (`engine.exports.run_document`: the run, its
config, every event and every LLM call with its request hash); `manifest.json` says, per page, which inputs
were recorded, so demo mode can offer them and name them when a presenter types something else. Loading is
idempotent: a run whose id is already stored is left as it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, SQLModel, col, select

from engine.config import get_settings
from engine.exports import load_run, run_document
from engine.inputs import MAX_PROBLEMS_SHOWN, InputError, MissingFile, iter_lines, problem_lines, read_text
from engine.registry import mechanisms
from engine.store import (
    MAX_TAG_LENGTH,
    RUN_STATUSES,
    RUNNING,
    EventRow,
    LlmCall,
    Run,
    RunTag,
    Store,
    StoreError,
    stored_json,
)
from models.base import ChatModel
from models.fieldlines import compose, validation_problems
from models.files import write_atomic
from models.recording import CallRecord
from models.registry import ModelHub
from models.secrets import redact

DEMO_TAG = "demo"
RUNS_FILE = "runs.jsonl"
MANIFEST_FILE = "manifest.json"


def purpose_page(purpose: str) -> str | None:
    """Which page a call's purpose (its run kind, or a mechanism's own purpose: `jury.run`, `skip:judge`) belongs
    to: its mechanism's `demo_page`, or the Models page's."""
    head = purpose.split(".")[0].split(":")[0]
    if head == "models":
        return "models"
    return next((s.demo_page for s in mechanisms() if s.name == head), None)


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
    models: list[str] = []  # every model whose calls were recorded (the judge model, the answering model, …)

    @property
    def recorded_models(self) -> list[str]:
        return list(dict.fromkeys([self.model_id, *self.models]))


def demo_dir() -> Path:
    return get_settings().data_dir / "demo"


def load_manifest(folder: Path | None = None) -> DemoManifest:
    """The manifest, every field checked; a problem is a DemoError of `file:line: field 'x': message` lines."""
    path = (folder or demo_dir()) / MANIFEST_FILE
    try:
        text = read_text(path)
    except MissingFile:
        raise DemoError(f"no demo recording at {path} — run `judgelab demo record`") from None
    except InputError as exc:
        raise DemoError(f"{exc} — run `judgelab demo record`") from None
    try:
        return DemoManifest.model_validate_json(text, strict=True)
    except ValidationError as exc:
        problems = validation_problems(str(path), exc, compose(text) if text.strip() else None)
        header = f"the demo manifest {path} is broken — run `judgelab demo record`:"
        raise DemoError(problem_lines(problems, header)) from None


def miss_message(purpose: str, manifest: DemoManifest | None) -> str:
    """What a presenter reads when an input was not recorded: the recorded inputs of that page."""
    page = purpose_page(purpose)
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
    write_atomic(path, "\n".join(lines) + "\n")  # a recording is whole or absent, never half written
    return len(lines)


# -- recording: what every mechanism's demo flow (`engine/<mechanism>/demo.py`, named by its `MechanismUI.demo`)
# shares with the recorder (`judgelab demo record`, `dashboard.demo_record`)

MODEL = "gemma3-270m"  # the model the demo is recorded with


def recording_hub(store: Store) -> Callable[[str], Any]:
    """Fresh models for each attempt; content-free baselines (scored once per process) are scored again, so every
    kept run holds all the calls a fresh process replays."""

    ChatModel._BASELINES.clear()
    return ModelHub(call_log=store).get


def log(message: str) -> None:
    """The recorder's progress, on stderr (stdout is the command's result)."""

    print(message, file=sys.stderr, flush=True)


# What a recorded run may hold. Every field is typed strictly (no "3" for 3, no null for a number), so a damaged
# or hand-edited line is refused with its line and field instead of failing half-way through the import.
RunId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
FinalStatus = Literal["finished", "failed", "cancelled", "interrupted"]  # a recording holds only ended runs
FINAL_STATUSES: tuple[str, ...] = get_args(FinalStatus)
assert set(FINAL_STATUSES) == set(RUN_STATUSES) - {RUNNING}


class _Recorded(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")  # what the export adds for readers is ignored


class RecordedRun(_Recorded):
    id: RunId
    kind: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    name: str = ""
    status: FinalStatus
    tags: list[str] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    config_hash: str = ""


class RecordedEvent(_Recorded):
    seq: int
    type: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    ts: datetime
    payload: dict[str, Any]


class RecordedCall(_Recorded):
    created_at: datetime
    purpose: str
    model_id: str
    backend: str
    model_name: str = ""
    request_hash: str
    request: dict[str, Any]
    raw_text: str | None = None
    parsed: dict[str, Any] | None = None
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    latency_s: float = Field(default=0.0, ge=0)
    cost: float = Field(default=0.0, ge=0)
    would_cost: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    error_type: str | None = None
    flags: list[str] = Field(default_factory=list)
    attempts: int = Field(default=1, ge=1)


class RunDocument(_Recorded):
    """One line of runs.jsonl: a run in the JSON export format (`engine.exports.run_document`)."""

    run: RecordedRun
    config: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, Any] = Field(default_factory=dict)
    events: list[RecordedEvent]
    calls: list[RecordedCall]


def _read_runs_text(path: Path) -> str:
    try:
        return read_text(path)
    except MissingFile:
        raise DemoError(f"no demo runs at {path} — run `judgelab demo record`") from None
    except InputError as exc:
        raise DemoError(f"{exc} — run `judgelab demo record`") from None


def _validated(text: str, path: Path) -> list[RunDocument]:
    """Every run document of a runs.jsonl text, validated; any problem (a line that is not JSON, a missing key, a
    bad date, a wrong type, an unknown status, a seq or run id twice) is a DemoError that lists them as
    `file:line: field 'x': message` (the first 20, and how many more), and nothing is returned."""
    documents: list[RunDocument] = []
    shown: list[str] = []
    found = 0

    def problem(*lines: str) -> None:
        nonlocal found
        found += len(lines)
        shown.extend(lines[: max(0, MAX_PROBLEMS_SHOWN - len(shown))])  # a count, not a list, past the first 20

    run_lines: dict[str, int] = {}
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            document = RunDocument.model_validate_json(line)
        except ValidationError as exc:
            problem(*validation_problems(str(path), exc, line=n))
            continue
        seqs: dict[int, int] = {}
        for i, event in enumerate(document.events):  # the store's unique (run, seq), said with the field
            if event.seq in seqs:
                problem(f"{path}:{n}: field 'events[{i}].seq': seq {event.seq} is also events[{seqs[event.seq]}]")
            seqs.setdefault(event.seq, i)
        if document.run.id in run_lines:
            problem(
                f"{path}:{n}: field 'run.id': run {document.run.id!r} is already on line {run_lines[document.run.id]}"
            )
            continue
        run_lines[document.run.id] = n
        documents.append(document)
    if found:
        header = f"{path} is not a valid demo recording — run `judgelab demo record`:"
        more = found - len(shown)
        raise DemoError(problem_lines(shown, header) + (f"\n… and {more} more" if more else ""))
    return documents


def parse_runs(path: Path) -> list[RunDocument]:
    """The run documents of a runs.jsonl, every field of every line checked before any is returned."""
    return _validated(_read_runs_text(path), path)


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The run documents of a runs.jsonl as plain values (the export's every key), all validated first."""
    text = _read_runs_text(path)
    _validated(text, path)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class LoadReport:
    loaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    events: int = 0
    calls: int = 0


def _rows(document: RunDocument) -> list[SQLModel]:
    """The store rows of one validated run: the run, its events and calls, and its tags (the demo tag added)."""
    meta = document.run
    run = Run(
        id=meta.id,
        kind=meta.kind,
        name=redact(meta.name),
        status=meta.status,
        config_json=stored_json(document.config),
        config_hash=meta.config_hash,
        summary_json=stored_json(document.summary),
        error=redact(meta.error) if meta.error else meta.error,
        started_at=meta.started_at,
        finished_at=meta.finished_at,
    )
    events = [
        EventRow(run_id=meta.id, seq=e.seq, type=e.type, payload_json=stored_json(e.payload), ts=e.ts)
        for e in document.events
    ]
    calls = [LlmCall.from_record(CallRecord(run_id=meta.id, **c.model_dump())) for c in document.calls]
    names = {redact(t.strip())[:MAX_TAG_LENGTH] for t in meta.tags if t.strip()} | {DEMO_TAG}
    tags = [RunTag(run_id=meta.id, tag=t) for t in sorted(names)]
    return [run, *events, *calls, *tags]


def _stored_ids(session: Session, ids: Sequence[str]) -> set[str]:
    return set(session.exec(select(Run.id).where(col(Run.id).in_(ids))).all()) if ids else set()


def import_runs(store: Store, documents: Sequence[RunDocument]) -> LoadReport:
    """Store the runs whose ids are not stored yet, with their events, calls and tags, in ONE transaction: either
    all of them are loaded or none. A run that another process loads at the same moment counts as present."""
    ids = [d.run.id for d in documents]
    for attempt in (1, 2):
        report = LoadReport()
        try:
            with store._write_lock, Session(store.engine) as session:
                stored = _stored_ids(session, ids)
                for document in documents:
                    if document.run.id in stored:
                        report.present.append(document.run.id)
                        continue
                    run, *rest = _rows(document)
                    session.add(run)
                    session.flush()  # the run first: events, calls and tags reference it
                    session.add_all(rest)
                    report.loaded.append(document.run.id)
                    report.events += len(document.events)
                    report.calls += len(document.calls)
                session.commit()
            return report
        except DBAPIError as exc:  # the driver's reason only: its message would carry the SQL and the values
            if isinstance(exc, IntegrityError) and attempt == 1:
                continue  # another process loaded some of them at the same moment: they are present now
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
            raise StoreError(f"cannot load the demo runs into {store.display_url}: {reason}") from None
    raise AssertionError("unreachable")


def load_demo(store: Store, folder: Path | None = None) -> LoadReport:
    """Import the shipped demo runs into `store`; runs already there are left alone (idempotent). The whole file
    is validated before anything is written, and then written in one transaction."""
    return import_runs(store, parse_runs((folder or demo_dir()) / RUNS_FILE))
