"""The #36 attack's second pass (hostile maps and settings), each finding fixed: integers too large for a float,
a refused adopted map with nothing shipped, figures of a map the engine did not use, a seat map that cannot be
applied, a dangling output link, a restored rate, an inconsistent selective table. No model is loaded: phase-1
readings are synthetic, as in test_jury_hostile.py."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.jury.config import JuryCase, JuryConfig, Rubric
from engine.jury.runner import Jury
from tests.fakes.jury_readings import SEATS, STACK, shipped, stacked_final

VERSION = "20990101T000000Z"
HUGE = "1" + "0" * 400  # a JSON integer: finite as an int, too large for a float


@pytest.fixture
def maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))
    return tmp_path / "maps"


def _plant(maps: Path, key: str, content: dict[str, Any] | str) -> None:
    """A version of a map in JUDGELAB_MAPS_DIR, adopted through in_use.json."""
    folder = maps / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{VERSION}.json").write_text(content if isinstance(content, str) else json.dumps(content))
    pointer = maps / "in_use.json"
    entries = json.loads(pointer.read_text()) if pointer.exists() else {}
    entries[key] = VERSION
    pointer.write_text(json.dumps(entries))


def _stack_version() -> dict[str, Any]:
    d = copy.deepcopy(shipped(STACK))
    d["version"] = VERSION
    return d


# -- 1. a JSON integer too large for a float crashes the stack map's check ------------------------------------


@pytest.mark.parametrize("where", ["round_weight", "cut"])
def test_a_huge_integer_in_an_adopted_stack_map_is_a_flagged_fallback(maps: Path, where: str) -> None:
    """Expected: an adopted stack version whose round_weight (or a selective cut) is a 400-digit JSON integer is
    refused like any other number out of range: the shipped map is read, flagged map_fallback (or the vote,
    flagged stack_unavailable). Main: `_number` calls math.isfinite on the int, which raises OverflowError; it
    escapes stack_problem, load_calibration and StackedPanel._stack (which catch ValueError only), so the run
    (and the page's _stacked/_signal) crash."""
    text = json.dumps(_stack_version())
    if where == "round_weight":
        text = text.replace('"round_weight": 0.5674', f'"round_weight": {HUGE}')
    else:
        text = text.replace('"0.2": {"cut": 0.7047', f'"0.2": {{"cut": {HUGE}')
    assert HUGE in text
    _plant(maps, STACK, text)
    final = stacked_final()
    assert "map_fallback" in final.flags or "stack_unavailable" in final.flags


def test_stack_note_survives_a_huge_integer_figure(maps: Path) -> None:
    """Expected: dashboard.mechanisms.jury.stack_figures.stack_note (the final card on the Jury and Replay pages)
    treats a figure that is a 400-digit JSON integer as no figure ('' or a note without it), as it does a string.
    Main: engine.diagnostics.share raises OverflowError and the page breaks."""
    from dashboard.mechanisms.jury.stack_figures import stack_note

    d = _stack_version()
    text = json.dumps(d).replace('"accuracy": 0.5194', f'"accuracy": {HUGE}', 1)
    assert HUGE in text
    _plant(maps, STACK, text)
    view = SimpleNamespace(final={"method": "stack"}, config={}, jurors=[{"model_id": s.model_id} for s in SEATS])
    assert "right on" not in stack_note(view)  # type: ignore[arg-type]


# -- 2. a refused adopted stack with no shipped map: silently no stack -----------------------------------------


def test_a_refused_adopted_stack_without_a_shipped_map_is_said(maps: Path) -> None:
    """Expected: a panel (gemma3-270m + smollm2-135m) has no shipped stack but an adopted version of one, which
    the stack check refuses (round_weight 5, beyond ROUND_MAX_WEIGHT): `stack_trouble` says so, so the final
    judgment is the flagged vote ('a foreign or damaged stack says so and votes, never a silent final judge').
    Main: load_calibration replaces the refused version by the shipped path, finds no file and returns None —
    the problem is dropped; stack_trouble is '' and `auto` quietly asks the final judge (models_needed adds it)."""
    d = _stack_version()
    d["model_id"] = "gemma3-270m+smollm2-135m"
    for m in d["maps"].values():
        m["features"], m["coef"] = m["features"][:6], m["coef"][:6]
    d["metrics"]["round_weight"] = 5.0
    _plant(maps, "jury.stack.gemma3-270m+smollm2-135m", d)
    jury = Jury(SEATS[:2], {}, JuryConfig())
    assert jury.stack_map(Rubric()) is None
    assert jury.stack_trouble(Rubric())


def test_a_damaged_adopted_map_without_a_shipped_map_is_not_silently_none(maps: Path) -> None:
    """Expected: `load_calibration` never answers 'no map' (None) for a map whose adopted version exists but cannot
    be used: it raises MapError (or returns something whose `fallback` says why). Main: the Adoption's problem
    is dropped when no shipped file exists, and the caller cannot tell a refused version from no map at all."""
    from engine import judgemaps

    d = _stack_version()
    d["model_id"] = "gemma3-270m+smollm2-135m"
    for m in d["maps"].values():
        m["features"], m["coef"] = m["features"][:6], m["coef"][:5]  # one coefficient short: damaged
    _plant(maps, "jury.stack.gemma3-270m+smollm2-135m", d)
    try:
        cal = judgemaps.load_calibration("jury.stack", "gemma3-270m+smollm2-135m")
    except judgemaps.MapError:
        return
    assert cal is not None and cal.fallback


# -- 3. the final card's figures come from a map the engine refused --------------------------------------------


def test_stack_note_never_shows_a_refused_versions_figures(maps: Path) -> None:
    """Expected: the 'One case says little' note under a stacked verdict reads the map the verdict was made with
    (its docstring: 'read from the stack map the final judgment names'). An adopted version the engine refuses
    (round_weight 5) is not used — the verdict comes from the shipped map, flagged map_fallback — so its stored
    figures (here 97 % accuracy) must not be shown. Main: stack_note called load_calibration without
    check=stack_problem and prints the refused version's 97 %."""
    from dashboard.mechanisms.jury.stack_figures import stack_note

    d = _stack_version()
    d["metrics"]["round_weight"] = 5.0
    d["metrics"]["cross_validated"] = {"accuracy": 0.97, "interval": [0.95, 0.99], "cases": 500}
    _plant(maps, STACK, d)
    final = stacked_final()
    assert "map_fallback" in final.flags  # the engine read the shipped map
    view = SimpleNamespace(
        final={"method": "stack", "flags": final.flags}, config={}, jurors=[{"model_id": s.model_id} for s in SEATS]
    )
    assert "97%" not in stack_note(view)  # type: ignore[arg-type]


def test_the_pages_seat_line_never_names_a_refused_neighbours_version(maps: Path) -> None:
    """The Jury page's 'how each seat judges' line names the map the seat reads. An adopted neighbours version that
    neighbours_problem refuses (an isotonic verdict map) is not used by the seat — it reads the shipped map,
    flagged map_fallback — so the line names the shipped one, and says why the adopted one is not used."""
    from dashboard.mechanisms.jury.judging import seat_line

    key = "jury.neighbours.use-m3"
    d = copy.deepcopy(shipped(key))
    d["version"] = VERSION
    d["maps"]["safe_pass"] = {"kind": "isotonic", "features": ["full_0"], "xs": [0.0], "ys": [0.5]}
    _plant(maps, key, d)
    line = seat_line(SEATS[2])
    in_use = shipped(key)["version"]
    assert f"calibration jury.neighbours · use-m3 · {in_use}" in line  # the map the seat reads
    assert f"{VERSION}.json: damaged" in line  # and why the adopted one is not it


# -- 4. a jury seat map of the wrong kind crashes the run ------------------------------------------------------


def test_an_adopted_seat_map_that_cannot_be_applied_fails_the_seat_not_the_run(
    maps: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expected: an adopted jury.seat version that check_version accepts (same components, known features) but
    that cannot give a distribution (its safe_pass map is isotonic: no linear score) is refused like a stack or
    neighbours map — the shipped map, flagged map_fallback — or at least fails its seat (a flagged fallback) as
    the neighbours seat does. Main: `_score` calls cal.distribution unguarded; ValueError('a isotonic map has no
    linear score') escapes phase 1 and the whole run fails. The model calls are stubbed: no model is loaded."""
    import time

    key = "jury.seat.gemma3-270m"
    d = copy.deepcopy(shipped(key))
    d["version"] = VERSION
    feats = d["maps"]["safe_pass"]["features"]
    d["maps"]["safe_pass"] = {"kind": "isotonic", "features": [feats[0]], "xs": [0.0], "ys": [0.5]}
    _plant(maps, key, d)

    async def phase1_scoring(self: Any, key: Any, model: Any, case: Any) -> Any:
        return {f: -1.0 for f in feats}, None, False

    async def shared(self: Any, calls: Any, key: Any, coro: Any) -> Any:
        coro.close()
        cues = {f: 0.0 for f in feats if f.startswith(("cue_", "rel_"))}
        return cues, SimpleNamespace(prompt_tokens=0), False

    monkeypatch.setattr(Jury, "_phase1_scoring", phase1_scoring)
    monkeypatch.setattr(Jury, "_shared", shared)
    models = {s.model_id: SimpleNamespace(model_id=s.model_id) for s in SEATS[:2]}
    jury = Jury(SEATS, models, JuryConfig())  # type: ignore[arg-type]
    case = JuryCase(id="c1", content="Agent: hi")
    parsed, why, facts = asyncio.run(jury._score(SEATS[0], case, Rubric(), [], time.perf_counter(), "phase1"))
    assert (parsed is None and why) or "map_fallback" in facts.get("flags", [])


# -- 5. a refit's folder check passes where the write then fails -----------------------------------------------


def test_check_writable_refuses_a_dangling_link(tmp_path: Path) -> None:
    """Expected: engine.refit.check_writable (run before calibrate/calibrate-panel's minutes-long model pass)
    refuses an output folder that is a dangling symlink, since save_calibrations' mkdir then fails
    (FileExistsError) after the pass. Main: `folder.exists()` is False, the parent is writable, the check
    passes; the maps are lost at the end."""
    from engine.judgemaps import MapError
    from engine.refit import check_writable

    (tmp_path / "out").symlink_to(tmp_path / "gone")
    with pytest.raises(MapError):
        check_writable(tmp_path / "out")


# -- 6. the page's 'Not sure below' loses a restored run's rate -------------------------------------------------


@pytest.mark.parametrize("rate", [0.9999999, 0.1499999])
def test_a_restored_runs_selective_rate_is_kept(rate: float) -> None:
    """Expected (dashboard/mechanisms/jury/fields.py selective_label's docstring: 'so a restored run's rate is not
    lost'): the option restore_form stores for a run's selective_error maps back to that rate. Main: 0.9999999
    (valid, < 1) is labelled '100 % error', which selective_options refuses (not < 1): the select box resets to the
    default 20 %; 0.1499999 becomes '15 % error' = 0.15, a looser rate with another cut (0.15's, not 0.1's)."""
    from dashboard.mechanisms.jury.fields import selective_label, selective_options

    label = selective_label(rate)
    assert selective_options(label).get(label) == rate


# -- 7. a map whose cuts grow as the rate loosens: a stricter rate decides more ---------------------------------


def test_a_stricter_rate_never_decides_more_on_an_inconsistent_map(maps: Path) -> None:
    """Expected ('a stricter error rate never decides more'): on an adopted stack whose selective table is
    inconsistent — a cut of 0.3 for ≤10 % error but 0.95 for ≤20 % (a real fit never writes this: a cut that
    reaches 10 % reaches 20 %) — either the map is refused (map_fallback) or the 10 % panel decides no more than
    the 20 % one. Main: stack_problem accepts it; at 10 % the 50 %-sure case is decided, at 20 % it is not."""
    d = _stack_version()
    d["metrics"]["selective"] = {"0.1": {"cut": 0.3}, "0.2": {"cut": 0.95}}
    _plant(maps, STACK, d)
    strict, loose = stacked_final(JuryConfig(selective_error=0.1)), stacked_final(JuryConfig(selective_error=0.2))
    refused = "map_fallback" in strict.flags
    assert refused or not ("selective:not_sure" in loose.flags and "selective:not_sure" not in strict.flags)
