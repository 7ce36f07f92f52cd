"""Hostile inputs on the pages (issue 26): a file of 100 000 bad rows shows the first 20 problems and a
count — never the whole list, which crashed the browser tab — and a file that is not a regular file is an
error, not a hang. The files are the pages' default inputs under JUDGELAB_DATA_DIR (AppTest has no upload)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

BAD_ROWS = 100_000


def _director() -> None:
    from pages import director

    director.render()


def _confidence() -> None:
    from pages import confidence

    confidence.render()


def _errors(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in at.error).replace("\\", "")  # md() escapes the punctuation


def test_the_director_batch_shows_the_first_20_bad_rows_and_a_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "beach.jsonl").write_text("not json\n" * BAD_ROWS, encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(tmp_path))
    started = time.monotonic()
    at = AppTest.from_function(_director, default_timeout=120).run()
    assert not at.exception
    shown = _errors(at)
    assert "beach.jsonl:1: not JSON" in shown and "beach.jsonl:20: not JSON" in shown
    assert "beach.jsonl:21:" not in shown and f"… and {BAD_ROWS - 20:,} more" in shown
    assert len(shown) < 5_000
    assert time.monotonic() - started < 60


def test_the_confidence_calibration_shows_the_first_20_bad_rows_and_a_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "confidence.jsonl").write_text('{"correct": "no"}\n' * BAD_ROWS, encoding="utf-8")
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(tmp_path))
    at = AppTest.from_function(_confidence, default_timeout=120).run()
    assert not at.exception
    shown = _errors(at)
    assert "confidence.jsonl:1: needs a boolean" in shown and f"… and {BAD_ROWS - 20:,} more" in shown
    assert "confidence.jsonl:21:" not in shown and len(shown) < 5_000


def test_a_fifo_in_place_of_the_default_script_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scripts").mkdir()
    os.mkfifo(tmp_path / "scripts" / "beach.jsonl")  # no writer: a blocking read would wait forever
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(tmp_path))
    at = AppTest.from_function(_director, default_timeout=60).run()
    assert not at.exception
    assert "beach.jsonl: a FIFO (named pipe), not a regular file" in _errors(at)


def test_a_long_valid_script_is_tabled_up_to_the_pages_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10 MB script of short lines took 5.7 GB on the page (every verdict cached, every row tabled): the page
    judges and tables its first PAGE_LINES lines and says so; the whole script is the batch run's."""
    from dashboard.mechanisms.director import batch

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "beach.jsonl").write_text(
        '{"text": "えー、ほんと？海って気持ちいいわ！"}\n' * 120, encoding="utf-8"
    )
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(batch, "PAGE_LINES", 50)
    at = AppTest.from_function(_director, default_timeout=120).run()
    assert not at.exception
    notes = [str(i.value) for i in at.info if "This script has 120 lines" in str(i.value)]
    assert notes and "first 50" in notes[0]
    table = next(df.value for df in at.dataframe if "status" in df.value.columns)
    assert len(table) == 50
    assert {m.label: m.value for m in at.metric}["Lines"] == "50"
