"""Label imports (issue 35): each label stored once (its unique key), on SQLite and PostgreSQL — a file imported
again, with or without times, adds nothing; two processes importing one file at once store each label once and
each says how many of its rows were new; a re-label on a page is a new label; migration 6 keys the rows of a
database from before, duplicates included. Hostile rows (deep nesting, times at the calendar's edges, duplicate
keys, huge numbers, long lines) are one line each naming the file, line and field, in bounded time; a multi-MB
import stays within its memory bound."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import inspect, text

from engine.labels import LabelImportError, add_label, import_labels, import_text, list_labels
from engine.store import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()


def _rows(n: int, *, timed: bool, start: int = 0) -> str:
    out = []
    for i in range(start, start + n):
        row: dict[str, Any] = {"mechanism": "handraise", "run_id": f"r{i // 100}", "item_key": f"t{i}/coder"}
        row |= {"label": "speak"}
        row |= {"user": "ann", "context": {"will": 0.5, "i": i}}
        if timed:
            row["created_at"] = (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)).isoformat()
        out.append(json.dumps(row))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("timed", [True, False])
def test_a_file_imported_again_adds_nothing(store: Store, timed: bool) -> None:
    text_ = _rows(300, timed=timed)
    first = import_text(store, text_, "jsonl", "a.jsonl")
    assert (first.imported, first.already_present, first.lines) == (300, 0, 300)
    again = import_text(store, text_, "jsonl", "a.jsonl")
    assert (again.imported, again.already_present) == (0, 300) and again.words() == "0 imported, 300 already present"
    both = import_text(store, text_ + _rows(5, timed=timed, start=300), "jsonl", "b.jsonl")
    assert (both.imported, both.already_present) == (5, 300)
    assert len(list_labels(store, latest=False)) == 305


def test_an_export_of_labels_imported_without_times_imports_back_as_present(store: Store) -> None:
    """A row without a time is stamped at its import; its export carries that time, and importing the export into
    the same database finds every label there (the time key), as the file without times does (the content key)."""
    from engine.labels import export_labels

    import_text(store, _rows(20, timed=False), "jsonl", "a.jsonl")
    formats: tuple[Literal["jsonl", "csv"], ...] = ("jsonl", "csv")
    for fmt in formats:
        exported = export_labels(list_labels(store, latest=False), fmt)
        report = import_text(store, exported, fmt, f"export.{fmt}")
        assert (report.imported, report.already_present) == (0, 20)


def test_a_relabel_on_a_page_is_a_new_label_and_the_same_label_twice_is_one(store: Store) -> None:
    first = add_label(store, mechanism="director", item_key="line1", label="ok", user="ann")
    second = add_label(store, mechanism="director", item_key="line1", label="ok", user="ann")  # later: a new label
    third = add_label(store, mechanism="director", item_key="line1", label="retry", user="ann")
    assert len({first.id, second.id, third.id}) == 3
    when = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    a = add_label(store, mechanism="director", item_key="line2", label="ok", user="ann", created_at=when)
    b = add_label(store, mechanism="director", item_key="line2", label="ok", user="ann", created_at=when)
    assert a.id == b.id  # the same label at the same microsecond: stored once, its id given back
    assert len(list_labels(store, latest=False)) == 4
    assert [lab.label for lab in list_labels(store, mechanism="director")] == ["retry", "ok"]


def test_rows_that_differ_only_in_time_are_each_kept(store: Store) -> None:
    """A history (ok, then retry, then ok again) is three labels: the key holds the time."""
    rows = [
        {"mechanism": "director", "item_key": "l1", "label": v, "user": "ann", "created_at": f"2026-01-0{d}T00:00:00Z"}
        for d, v in ((1, "ok"), (2, "retry"), (3, "ok"))
    ]
    report = import_text(store, "".join(json.dumps(r) + "\n" for r in rows), "jsonl", "h.jsonl")
    assert (report.imported, report.already_present) == (3, 0)


CONCURRENT = """
import sys, time
from pathlib import Path
from engine.labels.io import parse_labels
from engine.store import Store
url, path, me, other = sys.argv[1:5]
store = Store(url)
rows = parse_labels(Path(path).read_text(), "jsonl", "c.jsonl")
Path(me).touch()
deadline = time.monotonic() + 30
while not Path(other).exists() and time.monotonic() < deadline:  # both parsed: insert together
    time.sleep(0.005)
print(store.insert_labels(rows))
"""


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_two_processes_importing_one_file_at_once_store_each_label_once(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """Both hold the parsed rows, then insert at the same moment: between them every label goes in exactly once
    (the unique key, ON CONFLICT DO NOTHING in one transaction each), and the counts add up."""
    path = tmp_path / "c.jsonl"
    path.write_text(_rows(3000, timed=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, db_url, str(path), str(tmp_path / me), str(tmp_path / other)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-1500:] for _, err in outputs]
    counts = sorted(int(out.strip()) for out, _ in outputs)
    assert sum(counts) == 3000, counts
    assert len(list_labels(store, latest=False)) == 3000
    assert time.monotonic() - started < 90


def test_migration_6_keys_the_labels_of_a_database_from_before_keeping_duplicates(store: Store, db_url: str) -> None:
    when = datetime(2026, 2, 1, tzinfo=UTC)
    add_label(store, mechanism="director", item_key="line1", label="ok", user="ann", created_at=when)
    add_label(store, mechanism="director", item_key="line2", label="retry", user="ann", created_at=when)
    with store.engine.begin() as conn:  # the database as migration 5 left it, the duplicates written by hand
        for index in ("uq_labels_dedup_key", "uq_labels_content_key"):
            conn.execute(text(f"DROP INDEX {index}"))
        conn.execute(text("ALTER TABLE labels DROP COLUMN dedup_key"))
        conn.execute(text("ALTER TABLE labels DROP COLUMN content_key"))
        conn.execute(
            text(
                "INSERT INTO labels (mechanism, run_id, item_key, label, note, user_name, source, "
                "created_at, context_json) SELECT mechanism, run_id, item_key, label, 'again', user_name, "
                "source, created_at, context_json FROM labels WHERE item_key = 'line1'"
            )
        )
        # a second copy of line1: what two concurrent imports left before the key existed
        conn.execute(text("DELETE FROM schema_migrations WHERE version = 6"))
    store.dispose()
    again = Store(db_url)
    try:
        assert again.schema_version() == 6
        keys = [str(row.dedup_key or "") for row in again.labels()]
        assert len(keys) == 3 and all(keys) and len(set(keys)) == 3  # kept: the later copy has a key of its own
        assert keys[2].startswith(keys[0] + "-")
        indexes = {i["name"]: i["unique"] for i in inspect(again.engine).get_indexes("labels")}
        assert indexes.get("uq_labels_dedup_key") and indexes.get("uq_labels_content_key")
        row = {"mechanism": "director", "item_key": "line1", "label": "ok", "user": "ann", "source": "manual"}
        exported = json.dumps(row | {"created_at": datetime(2026, 2, 1, tzinfo=UTC).isoformat()}) + "\n"
        report = import_text(again, exported, "jsonl", "x.jsonl")
        assert (report.imported, report.already_present) == (0, 1)
    finally:
        again.dispose()


BAD = [
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "context": {"x": ' + "[" * 5000 + "]" * 5000 + "}}",
        "context: nested more than 64 levels deep",
    ),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "created_at": "9999-12-31T23:59:59-23:59"}',
        "created_at: '9999-12-31T23:59:59-23:59' is outside the years 1970 to 9998 (UTC)",
    ),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "created_at": "0001-01-01T00:00:00+05:00"}',
        "created_at: '0001-01-01T00:00:00+05:00' is outside the years 1970 to 9998 (UTC)",
    ),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "created_at": "1969-12-31T23:59:59Z"}',
        "is outside the years 1970 to 9998",
    ),
    ('{"mechanism": "director", "item_key": "a", "label": "ok", "label": "retry"}', "duplicate key 'label'"),
    ('{"mechanism": "director", "item_key": "a", "label": "ok", "context": {"k": 1, "k": 2}}', "duplicate key 'k'"),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "context": {"n": ' + "9" * 5000 + "}}",
        "a number of more than 4,300 digits",
    ),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "context": {"n": 1e999}}',
        "context: holds a non-finite number",
    ),
    (
        '{"mechanism": "director", "item_key": "a", "label": "ok", "note": "' + "x" * 300_000 + '"}',
        "longer than 256,000 bytes",
    ),
    (
        '{"mechanism": "director", "item_key": "a\\ud800", "label": "ok"}',
        "item_key: holds '\\ud800', half a character (a lone surrogate)",
    ),
]


@pytest.mark.parametrize(("line", "message"), BAD, ids=[m[:30] for _, m in BAD])
def test_a_hostile_row_is_one_line_naming_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    good = '{"mechanism": "director", "item_key": "b", "label": "ok"}'
    path = tmp_path / "hostile.jsonl"
    path.write_text(good + "\n" + line + "\n", encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(LabelImportError) as caught:
        import_labels(store, path)
    assert time.perf_counter() - started < 2
    lines = str(caught.value).splitlines()
    assert lines == [f"{path}: 1 bad row(s); nothing was imported", f"{path}:2: {lines[1].split(': ', 1)[1]}"]
    assert message in lines[1]
    assert list_labels(store) == []
    store.dispose()


def test_a_hostile_csv_context_cell_is_refused_the_same_way(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    deep = "[" * 3000 + "]" * 3000
    dup = '{"a": 1, "a": 2}'
    csv_text = (
        "mechanism,item_key,label,context,created_at\r\n"
        f'director,a,ok,"{{""x"": {deep}}}",\r\n'
        f'director,b,ok,"{dup.replace(chr(34), chr(34) * 2)}",\r\n'
        "director,c,ok,,0001-01-01T00:00:00+05:00\r\n"
    )
    with pytest.raises(LabelImportError) as caught:
        import_text(store, csv_text, "csv", "marks.csv")
    assert str(caught.value).splitlines()[1:] == [
        "marks.csv:2: context: x: nested more than 64 levels deep",
        "marks.csv:3: context: duplicate key 'a' (JSON keeps only the last; write it once)",
        "marks.csv:4: created_at: '0001-01-01T00:00:00+05:00' is outside the years 1970 to 9998 (UTC)",
    ]
    store.dispose()


def test_one_moment_written_many_ways_and_padded_or_cased_values_are_one_label(store: Store) -> None:
    """The key is the instant in UTC to the microsecond: seconds, milliseconds, microseconds, 'Z', '+00:00', another
    offset and a naive time (taken as UTC) naming one instant are one label; so are values padded with spaces or
    cased differently where the mechanism has a closed set of values. A note or context does not make a timed row
    another label (the first one stored stays); a different instant does."""
    same = ["2026-01-01T00:00:01", "2026-01-01T00:00:01.000Z", "2026-01-01T00:00:01.000000+00:00"]
    same += ["2026-01-01T01:00:01+01:00", "2026-01-01T00:00:01Z"]
    rows: list[dict[str, Any]] = [{"item_key": "a", "label": "ok", "created_at": t} for t in same]
    rows += [{"item_key": " a ", "label": " OK ", "created_at": same[0], "note": "later", "context": {"x": 1}}]
    rows += [{"item_key": "a", "label": "ok", "created_at": "2026-01-01T00:00:01.001Z"}]
    text_ = "".join(json.dumps({"mechanism": "director", "user": "ann"} | r) + "\n" for r in rows)
    assert import_text(store, text_, "jsonl", "a.jsonl").words() == "2 imported, 5 already present"
    stored = list_labels(store, latest=False)
    assert [(lab.item_key, lab.label, lab.note, lab.created_at.microsecond) for lab in stored] == [
        ("a", "ok", "", 0),
        ("a", "ok", "", 1000),
    ]


def test_rows_without_times_stamped_on_one_clock_tick_are_each_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A coarse clock (or a fast loop) gives every untimed row the same microsecond: each is still its own label.
    tick = datetime(2026, 1, 1, tzinfo=UTC)
    monkeypatch.setattr("engine.labelstore.utcnow", lambda: tick)
    text_ = "".join(
        json.dumps({"mechanism": "jury", "item_key": "k", "label": "x", "note": f"n{i}"}) + "\n" for i in range(3)
    )
    assert import_text(store, text_, "jsonl", "a.jsonl").words() == "3 imported, 0 already present"
    assert import_text(store, text_, "jsonl", "a.jsonl").words() == "0 imported, 3 already present"
    assert sorted(lab.note for lab in list_labels(store, latest=False)) == ["n0", "n1", "n2"]


@pytest.mark.parametrize(
    ("csv_text", "problem"),
    [
        ("mechanism,item_key,label,label\njury,k,x,y\n", "marks.csv:1: the header names 'label' twice"),
        ("mechanism,item_key,label,c0,c1\njury,k,x,,\n" * 50, "marks.csv:1: 'c0' is not a label field"),
        ("mechanism,item_key,label,context\njury,k,x,[]\n", "marks.csv:2: context: must be an object, got list"),
        ("mechanism,item_key,label,source\njury,k,x,false\n", "marks.csv:2: source: 'false' is not one of"),
    ],
    ids=["column twice", "unknown columns", "context list", "source false"],
)
def test_a_bad_csv_header_or_cell_is_refused_not_overwritten_or_defaulted(
    store: Store, csv_text: str, problem: str
) -> None:
    with pytest.raises(LabelImportError) as caught:
        import_text(store, csv_text, "csv", "marks.csv")
    lines = str(caught.value).splitlines()
    assert len(lines) == 2 and lines[1].startswith(problem), lines


@pytest.mark.parametrize("field", ['"context": []', '"context": 0', '"source": false', '"context": ""'])
def test_a_json_field_given_as_an_empty_value_of_another_type_is_refused(store: Store, field: str) -> None:
    line = '{"mechanism": "jury", "item_key": "k", "label": "x", ' + field + "}\n"
    if field == '"context": ""':  # an empty text is "not given", as in a CSV cell
        assert import_text(store, line, "jsonl", "a.jsonl").imported == 1
        return
    with pytest.raises(LabelImportError) as caught:
        import_text(store, line, "jsonl", "a.jsonl")
    assert "a.jsonl:1: " + field.split('"')[1] + ":" in str(caught.value)


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_a_multi_mb_import_stays_within_its_memory_bound(tmp_path: Path) -> None:
    """3 MB of labels (~30,000 rows) parsed and written in a fresh process: peak RSS ≤ 300 MB, a few seconds."""
    path = tmp_path / "big.jsonl"
    path.write_text(_rows(30_000, timed=True), encoding="utf-8")
    assert path.stat().st_size > 2_500_000
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from engine.labels import import_labels
        from engine.store import Store
        store = Store("sqlite:///{tmp_path / "big.db"}")
        t0 = time.perf_counter()
        report = import_labels(store, Path({str(path)!r}))
        seconds = time.perf_counter() - t0
        peak = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")) / 1024
        print(report.imported, round(seconds, 2), round(peak))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, seconds, peak_mb = done.stdout.split()
    assert int(imported) == 30_000
    assert float(seconds) < 20 and int(peak_mb) <= 300, done.stdout


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_three_processes_opening_a_database_from_before_at_once_all_migrate_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store(url)
    import_text(old, _rows(5000, timed=True), "jsonl", "a.jsonl")
    with old.engine.begin() as conn:  # 5,000 labels as migration 5 left them
        for index in ("uq_labels_dedup_key", "uq_labels_content_key"):
            conn.execute(text(f"DROP INDEX {index}"))
        conn.execute(text("ALTER TABLE labels DROP COLUMN dedup_key"))
        conn.execute(text("ALTER TABLE labels DROP COLUMN content_key"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version = 6"))
    old.dispose()
    code = f"from engine.store import Store\nprint(Store({url!r}).schema_version())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [out.strip() for out, _ in outputs] == ["6"] * 3, [err[-1500:] for _, err in outputs]
    again = Store(url)
    keys = [row.dedup_key for row in again.labels()]
    assert len(keys) == 5000 and len(set(keys)) == 5000 and None not in keys
    report = import_text(again, _rows(5000, timed=True), "jsonl", "a.jsonl")
    assert (report.imported, report.already_present) == (0, 5000)
    again.dispose()


def _fuzz_lines() -> Any:
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=12,
    )
    field = st.sampled_from(
        ["mechanism", "item_key", "label", "run_id", "note", "user", "source", "created_at", "context", "x"]
    )
    good = {"mechanism": "director", "item_key": "l", "label": "ok"}
    records = st.dictionaries(field, values, max_size=6).map(lambda extra: json.dumps(good | extra))
    dates = st.datetimes(timezones=st.timezones()).map(lambda d: json.dumps(good | {"created_at": d.isoformat()}))
    fragments = st.sampled_from(["[" * 200, '{"a": 1, "a": 2}', "9" * 5000, "NaN", "\x00", "\ufeff{}"])
    surrogates = st.sampled_from(["item_key", "note", "user", "label"]).map(
        lambda f: json.dumps(good | {f: "x"}).replace('"x"', '"\\ud800x"')
    )
    noise = st.lists(st.one_of(records, dates, fragments, surrogates, st.text(max_size=40)), min_size=1, max_size=8)
    return noise.map(lambda parts: "\n".join(parts))


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_fuzz_any_text_is_rows_or_one_line_problems(tmp_path: Path) -> None:
    """Whatever the text (records with any values and times in any zone, hostile fragments, noise), parsing gives
    rows that the store takes, or a LabelImportError whose every problem is one line naming the file and the
    line — never another exception."""
    from hypothesis import HealthCheck, given, settings

    from engine.labels import parse_labels

    store = Store(f"sqlite:///{tmp_path / 'fuzz.db'}")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_fuzz_lines())
    def check(text_: str) -> None:
        for fmt in ("jsonl", "csv"):
            try:
                store.insert_labels(parse_labels(text_, fmt, "f.txt"))
            except LabelImportError as exc:
                lines = str(exc).splitlines()
                assert lines[0].startswith("f.txt: ") and len(lines) >= 2
                assert all(re.match(r"^f\.txt:\d+: \S", line) or line.startswith("… and ") for line in lines[1:]), lines

    check()
    store.dispose()
