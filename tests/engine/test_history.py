"""The run history on real databases — a SQLite file and a real PostgreSQL server: search by text, kind,
status, model, config hash, tags and dates; paging through every run with no overlap; tags, renames and
deletes that take events, calls and tags with them; migration 4 on a database from before tags. Then the
headline figures, the config diff and the comparison of two runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select, text, update
from sqlmodel import col

from engine.events import run_context
from engine.history import NotComparable, compare_runs, config_diff, flatten, headline
from engine.store import MIGRATIONS, EventRow, LlmCall, Run, RunFilter, RunTag, Store, StoreError
from models.recording import CallRecord


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()


def _call(run_id: str, model_id: str = "gemma3-270m", **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "run_id": run_id,
        "model_id": model_id,
        "backend": "llamacpp",
        "request_hash": "h",
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "raw_text": "ok",
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "cost": 0.002,
    }
    fields.update(kw)
    return CallRecord(**fields)


def _run(
    store: Store,
    kind: str,
    config: dict[str, object] | None = None,
    name: str = "",
    status: str = "finished",
    error: str | None = None,
    model: str | None = None,
) -> str:
    run = store.create_run(kind, config or {}, name=name)
    store.append_event(run.id, 0, "run_started", {"kind": kind}, datetime.now(UTC))
    if model:
        store.record_call(_call(run.id, model))
    if status != "running":
        store.finish_run(run.id, status=status, error=error, summary={"n": 1})
    return run.id


def _ids(store: Store, **where: object) -> set[str]:
    return {r.id for r in store.search_runs(RunFilter(**where), limit=1000)}  # type: ignore[arg-type]


def test_search_by_text_kind_status_model_hash_and_tags(store: Store) -> None:
    jury = _run(
        store, "jury.run", {"case": {"title": "Password LEAK in the log"}}, name="night batch", model="gemma3-270m"
    )
    director = _run(store, "director.check", {"text": "えー、ほんと？", "model_id": "gpt-4o"}, name="yana lines")
    failed = _run(
        store,
        "jury.run",
        {"case": {"title": "fine"}},
        status="failed",
        error="ServerError: upstream 502 from 100% busy_server",
    )
    running = _run(store, "skip.simulate", {"workload": {"channels": 5}}, status="running")
    assert _ids(store) == {jury, director, failed, running}
    # Text: every word, case-insensitive, in id, name, kind, error or config (Japanese too).
    assert _ids(store, text="password leak") == {jury}
    assert _ids(store, text="NIGHT") == {jury}
    assert _ids(store, text="ほんと") == {director}
    assert _ids(store, text="upstream 502") == {failed}
    assert _ids(store, text=director[-6:]) == {director}
    assert _ids(store, text="password yana") == set()
    # LIKE wildcards in the search are literal characters.
    assert _ids(store, text="100%") == {failed} and _ids(store, text="busy_server") == {failed}
    assert _ids(store, text="1_0%") == set() and _ids(store, text="%") == {failed}
    # Kinds, kind prefix, statuses.
    assert _ids(store, kinds=("jury.run",)) == {jury, failed}
    assert _ids(store, kind_prefix="jury") == {jury, failed} and _ids(store, kind_prefix="jury_") == set()
    assert _ids(store, statuses=("failed", "running")) == {failed, running}
    # Model: a run that called it, or a run whose config names it.
    assert _ids(store, model="gemma3-270m") == {jury}
    assert _ids(store, model="gpt-4o") == {director}
    assert _ids(store, model="gpt-4") == set()
    # Config hash: any prefix, as shown on the page.
    target = store.get_run(running)
    assert target is not None
    assert _ids(store, config_hash=target.config_hash[:6]) == {running}
    # Tags: runs carrying every tag asked for.
    assert store.set_tags(jury, ["baseline", " night ", "baseline", ""]) == ["baseline", "night"]
    store.set_tags(failed, ["baseline"])
    assert _ids(store, tags=("baseline",)) == {jury, failed}
    assert _ids(store, tags=("baseline", "night")) == {jury}
    assert store.all_tags() == ["baseline", "night"]
    assert store.tags([jury, failed, director]) == {jury: ["baseline", "night"], failed: ["baseline"]}
    # Filters combine.
    assert _ids(store, kinds=("jury.run",), statuses=("finished",), text="leak", tags=("night",)) == {jury}
    assert store.count_runs(RunFilter(kinds=("jury.run",))) == 2
    assert store.run_kinds() == ["director.check", "jury.run", "skip.simulate"]
    assert store.call_models() == ["gemma3-270m"]


def test_search_by_date_range_in_utc(store: Store) -> None:
    old = _run(store, "demo.old")
    new = _run(store, "demo.new")
    then = datetime(2024, 3, 1, 23, 30, tzinfo=UTC)
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id) == old).values(started_at=then))
    day = datetime(2024, 3, 1, tzinfo=UTC)
    assert _ids(store, started_from=day, started_to=day + timedelta(days=1, microseconds=-1)) == {old}
    assert _ids(store, started_from=day + timedelta(days=1)) == {new}
    assert _ids(store, started_to=day) == set()
    # A time in another zone is the same instant: 2024-03-02 01:00 in UTC+2 is 23:00 UTC on the 1st.
    east = timezone(timedelta(hours=2))
    assert _ids(
        store, started_from=datetime(2024, 3, 2, 1, 0, tzinfo=east), started_to=datetime(2024, 3, 2, 2, 0, tzinfo=east)
    ) == {old}
    assert [r.id for r in store.search_runs(limit=10)] == [new, old]  # newest first


def test_paging_through_every_run_without_overlap(store: Store) -> None:
    ids = [_run(store, "demo.page", {"i": i}) for i in range(57)]
    same_time = datetime(2025, 1, 1, tzinfo=UTC)  # ties on started_at are ordered by id: pages stay stable
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(col(Run.id).in_(ids[:20])).values(started_at=same_time))
    assert store.count_runs() == 57
    seen: list[str] = []
    for offset in range(0, 57, 25):
        page = store.search_runs(limit=25, offset=offset)
        assert len(page) == min(25, 57 - offset)
        seen += [r.id for r in page]
    assert len(seen) == len(set(seen)) == 57 and set(seen) == set(ids)
    assert store.search_runs(limit=25, offset=57) == []
    assert [r.id for r in store.list_runs(kind="demo", limit=3)] == seen[:3]


def test_rename_redacts_and_tags_replace(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(store, "demo.rename", name="before")
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-rename-Zz9Yy8Xx7Ww6")
    store.rename_run(run, "  after sk-rename-Zz9Yy8Xx7Ww6  ")
    saved = store.get_run(run)
    assert saved is not None and saved.name == "after <MY_SERVICE_API_KEY>"
    store.set_tags(run, ["a", "b"])
    assert store.set_tags(run, ["c"]) == ["c"] and store.tags([run]) == {run: ["c"]}
    assert store.set_tags(run, []) == [] and store.tags([run]) == {}
    with pytest.raises(StoreError, match="no run"):
        store.rename_run("nope", "x")
    with pytest.raises(StoreError, match="no run"):
        store.set_tags("nope", ["x"])


def test_delete_takes_events_calls_and_tags_and_nothing_else(store: Store) -> None:
    with run_context(store, "demo.delete", {"a": 1}) as gone:
        gone.emit("step", n=1)
        store.record_call(_call(gone.run_id))
        store.record_call(_call(gone.run_id, "other-model"))
    with run_context(store, "demo.keep", {"a": 1}) as kept:
        kept.emit("step", n=1)
        store.record_call(_call(kept.run_id))
    store.set_tags(gone.run_id, ["x", "y"])
    store.set_tags(kept.run_id, ["x"])
    assert store.delete_run(gone.run_id) == {"events": 3, "calls": 2, "tags": 2}
    assert store.get_run(gone.run_id) is None
    with store.engine.connect() as conn:
        for table in (EventRow, LlmCall, RunTag):
            left = select(func.count()).select_from(table).where(col(table.run_id) == gone.run_id)
            assert conn.execute(left).scalar() == 0
    assert len(store.events(kept.run_id)) == 3 and len(store.calls(kept.run_id)) == 1
    assert store.tags([kept.run_id]) == {kept.run_id: ["x"]}
    with pytest.raises(StoreError, match="no run"):
        store.delete_run(gone.run_id)


def test_a_running_run_is_not_deleted(store: Store) -> None:
    running = _run(store, "demo.live", status="running")
    with pytest.raises(StoreError, match="still running"):
        store.delete_run(running)
    assert store.get_run(running) is not None and len(store.events(running)) == 1


def test_migration_4_adds_tags_to_a_database_from_before(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store(url)
    run = _run(old, "demo.old")
    with old.engine.begin() as conn:  # the database as version 3 left it
        conn.execute(text("DROP TABLE run_tags"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version = 4"))
    old.dispose()
    store = Store(url)
    assert store.schema_version() == max(v for v, _, _ in MIGRATIONS)
    assert store.set_tags(run, ["kept"]) == ["kept"] and _ids(store, tags=("kept",)) == {run}
    store.dispose()


# -- headline figures, diff, comparison ----------------------------------------------------------------------


def test_flatten_and_config_diff() -> None:
    a = {
        "jury": {"rounds": 3, "threshold": 0.67},
        "jurors": [{"model": "m1"}, {"model": "m2"}],
        "tags": [],
        "only_a": True,
    }
    b = {
        "jury": {"rounds": 3.0, "threshold": 1.0},
        "jurors": [{"model": "m1"}, {"model": "m3"}, {"model": "m4"}],
        "tags": [],
        "only_b": None,
    }
    assert dict(flatten(a))["jurors[1].model"] == "m2" and dict(flatten(a))["tags"] == []
    changes = {(c.path, c.change, c.a, c.b) for c in config_diff(a, b)}
    assert changes == {
        ("jury.threshold", "changed", 0.67, 1.0),
        ("jurors[1].model", "changed", "m2", "m3"),
        ("jurors[2].model", "added", None, "m4"),
        ("only_a", "removed", True, None),
        ("only_b", "added", None, None),
    }
    assert config_diff(a, a) == []
    assert [c.path for c in config_diff({"x": 1}, {"x": True})] == ["x"]  # True is not 1


def test_headline_and_comparison_of_two_runs(store: Store) -> None:
    a = _run(store, "jury.run", {"jury": {"rounds": 1}}, model="gemma3-270m")
    b = _run(store, "jury.run", {"jury": {"rounds": 3}})
    other = _run(store, "director.check")
    with store.engine.begin() as conn:
        conn.execute(
            update(Run)
            .where(col(Run.id) == a)
            .values(
                summary_json='{"verdict": "unsafe_fail", "score": 12.5, "result": {"huge": 1}, '
                '"agreement": {"kappa": 0.4, "deep": {"x": 1}}, "items": [1, 2]}'
            )
        )
    run_a, run_b = store.get_run(a), store.get_run(b)
    assert run_a is not None and run_b is not None
    totals = store.run_totals([a, b])
    figures = headline(run_a, totals[a])
    assert figures["calls"] == 1 and figures["tokens"] == 8 and figures["cost"] == pytest.approx(0.002)
    assert figures["verdict"] == "unsafe_fail" and figures["agreement.kappa"] == 0.4
    assert "result.huge" not in figures and "agreement.deep.x" not in figures and "items" not in figures
    assert "would_cost" not in figures  # nothing was replayed
    result = compare_runs(run_a, run_b, totals)
    assert [(c.path, c.a, c.b) for c in result.changes] == [("jury.rounds", 1, 3)]
    rows = {name: (x, y) for name, x, y in result.figures}
    assert rows["calls"] == (1, 0) and rows["verdict"] == ("unsafe_fail", None) and rows["n"] == (None, 1)
    director = store.get_run(other)
    assert director is not None
    with pytest.raises(NotComparable, match="one kind"):
        compare_runs(run_a, director)


# -- the history as people read it ----------------------------------------------------------------------------


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_an_experiments_cells_are_grouped_under_it_and_each_run_has_a_name(store: Store, tmp_path: Path) -> None:
    """One 264-cell experiment made the history 278 rows long and pushed the jury and chat runs pages away:
    without its cells and recordings the history holds one row per thing someone ran, each named from what
    it stored."""
    from engine.history import MEMBER_KINDS, display_name, experiment_line, experiment_of
    from tests.fakes.runs import FORMULAS, stored_conversation, stored_director_batch, stored_experiment, stored_jury

    jury_id, _ = stored_jury(store)
    experiment = stored_experiment(store, tmp_path)
    conversation_id, _ = stored_conversation(store)
    director_id = stored_director_batch(store)
    assert store.count_runs() == 4 + 264 + 1  # every cell and the recording are runs of their own
    grouped = store.search_runs(RunFilter(exclude_kinds=MEMBER_KINDS), limit=50)
    assert [r.id for r in grouped] == [director_id, conversation_id, experiment.run_id, jury_id]
    assert store.count_runs(RunFilter(exclude_kinds=MEMBER_KINDS)) == 4

    firsts = store.first_events([conversation_id], "user_message")
    names = {r.id: display_name(r, firsts.get(r.id, {}).get("text")) for r in grouped}
    assert names[jury_id] == "leak (c1)"  # the case's title and id, not "jury c1"
    assert names[conversation_id] == f"“{FORMULAS[0]} KeyError in my config loader”"  # its first message
    assert names[director_id] == "script script.jsonl"
    assert names[experiment.run_id] == "hand raise test"
    run = store.get_run(experiment.run_id)
    assert run is not None and experiment_of(run) == experiment.experiment_id
    best = experiment.best
    assert experiment_line(run) == f"264 cells · best f1 {best['f1']:.4g} (cell {best['cell']})"

    members = store.search_runs(RunFilter(kinds=MEMBER_KINDS, text=experiment.experiment_id), limit=1000)
    assert len(members) == 265 and {experiment_of(m) for m in members} == {experiment.experiment_id}
    cell = next(m for m in members if m.config.get("cell") == 3)
    assert display_name(cell) == "cell 3: threshold=0.3, weights.relevance=0.4, cooldown_per_turn=0.1, mode=brainstorm"
    recording = next(m for m in members if m.kind == "experiment.record")
    assert display_name(recording) == "recording of the cases"


def test_a_name_someone_gave_is_kept_and_a_conversation_without_a_message_says_so(store: Store) -> None:
    from engine.history import display_name
    from tests.fakes.runs import stored_jury

    jury_id, _ = stored_jury(store, name="Night batch alpha")
    run = store.get_run(jury_id)
    assert run is not None and display_name(run) == "Night batch alpha"
    store.rename_run(jury_id, "")
    run = store.get_run(jury_id)
    assert run is not None and display_name(run) == "leak (c1)"
    empty = store.create_run("handraise.conversation", {}, name="conversation")
    assert display_name(empty) == "conversation, no message yet"
    assert display_name(store.create_run("demo.page", {"x": 1})) == ""


def test_checks_and_evaluations_are_named_by_what_they_judged(store: Store) -> None:
    """The tour found confidence and director-check runs with empty names: they say their query, their line."""
    from engine.history import display_name

    asked = store.create_run("confidence.evaluate", {"query": "What is the capital of France?", "answer": "Paris"})
    assert display_name(asked) == "“What is the capital of France?”"
    line = store.create_run("director.check", {"character": "yana", "text": "今夜は星がきれいだね。"})
    assert display_name(line) == "yana: “今夜は星がきれいだね。”"
    labelled = store.create_run("confidence.calibrate", {"labels": "confidence.jsonl"})
    assert display_name(labelled) == "labelled set confidence.jsonl"
