"""The offline jury under hostile maps and settings (the #36 attack's findings, each fixed): a damaged adopted map is
refused and the shipped one read, flagged `map_fallback`; a number from a map is checked before it is used; the
selective cut never decides more at a stricter rate; a failure is shown as a warning. No model is loaded: phase-1
readings are synthetic, the embedder is a stub."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from engine.jury.config import JuryCase, JuryConfig, Rubric
from engine.jury.decisions import JurorEvaluation, JurorSeat
from engine.jury.runner import Jury
from tests.fakes.jury_readings import SEATS, STACK, V, shipped, stacked_final

NEIGH = "jury.neighbours.use-m3"


@pytest.fixture
def adopt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Plant a version of a map in JUDGELAB_MAPS_DIR and adopt it through in_use.json."""
    monkeypatch.setenv("JUDGELAB_MAPS_DIR", str(tmp_path / "maps"))

    def plant(key: str, mutate: Any) -> None:
        d = copy.deepcopy(shipped(key))
        d["version"] = "20990101T000000Z"
        mutate(d)
        folder = tmp_path / "maps" / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "20990101T000000Z.json").write_text(json.dumps(d))
        (tmp_path / "maps" / "in_use.json").write_text(json.dumps({key: "20990101T000000Z"}))

    return plant


def test_stack_with_overflowing_coefficients_publishes_no_verdict(adopt: Any) -> None:
    """Finite but huge coefficients (1e308 passes FittedMap's finiteness check) overflow to NaN probabilities:
    main publishes safe_pass '(nan% sure)' — the selective cut's `probs < cut` is False for NaN."""

    def huge(d: dict[str, Any]) -> None:
        for m in d["maps"].values():
            m["coef"] = [1e308] * len(m["coef"])

    adopt(STACK, huge)
    final = stacked_final()
    assert final.verdict != "safe_pass" and "nan" not in final.reasoning


@pytest.mark.parametrize("value", ["abc", {"a": 1}, [1]])
def test_round_weight_not_a_number_is_a_flagged_fallback(adopt: Any, value: object) -> None:
    adopt(STACK, lambda d: d["metrics"].__setitem__("round_weight", value))
    final = stacked_final()  # main: ValueError/TypeError out of _learned_discussion: the whole run fails
    assert "map_fallback" in final.flags or "stack_unavailable" in final.flags


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e308, -5.0])
def test_round_weight_out_of_range_is_refused(adopt: Any, value: float) -> None:
    """NaN/inf give NaN positions (every seat 'moves' to safe_pass with a nan distribution); 1e308 flips the 90 %
    unsafe seat to 100 % doubtful; a negative weight pushes seats away from the others. fit_round_weight bounds it
    to [0, ROUND_MAX_WEIGHT]; the reader never checks. Expect: refused (flagged), no round run from it."""
    adopt(STACK, lambda d: d["metrics"].__setitem__("round_weight", value))
    final = stacked_final()
    assert "map_fallback" in final.flags or "stack_unavailable" in final.flags


@pytest.mark.parametrize("value", [["a"], "str", 5])
def test_selective_not_a_mapping_is_a_flagged_fallback(adopt: Any, value: object) -> None:
    adopt(STACK, lambda d: d["metrics"].__setitem__("selective", value))
    final = stacked_final()  # main: AttributeError in selective_cut: the run fails
    assert "map_fallback" in final.flags or "stack_unavailable" in final.flags


@pytest.mark.parametrize("cut", [1.5, -0.3, "0.9", None])
def test_selective_cut_unusable_never_means_always_decide(adopt: Any, cut: object) -> None:
    """A cut outside [0, 1], a string, or None ('no cut reaches the rate', what selective_cuts itself writes)
    silently turns the selective verdict off: the panel decides a 50 %-sure case."""
    adopt(STACK, lambda d: d["metrics"].__setitem__("selective", {"0.2": {"cut": cut}}))
    final = stacked_final()
    assert "selective:not_sure" in final.flags or "map_fallback" in final.flags  # None: no cut reached it: decide none
    assert final.verdict == "needs_review"


@pytest.mark.parametrize("rate", [0.05, 0.01])
def test_a_stricter_error_rate_is_never_looser(rate: float) -> None:
    """The shipped map: at JURY_SELECTIVE_ERROR 0.2 and 0.1 this case is 'not sure'; at 0.05 (stricter) it is
    decided, because selective_cut finds no stored rate at or below 0.05 and returns None (= always decide)."""
    assert stacked_final(JuryConfig(selective_error=0.1)).verdict == "needs_review"
    assert stacked_final(JuryConfig(selective_error=rate)).verdict == "needs_review"


class _Stub:
    def embed(self, texts: list[str]) -> np.ndarray:
        v = np.random.default_rng(0).normal(size=(len(texts), 512))
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _neighbours_seat(jury: Jury) -> JurorEvaluation:
    jury._embedders["use-m3"] = _Stub()  # type: ignore[assignment]
    case = JuryCase(id="c", content="Agent: x")
    parsed, why, facts = asyncio.run(jury._neighbours_score(SEATS[2], case, Rubric(), 0.0, "phase1"))
    return jury._evaluation(SEATS[2], parsed, why, facts, Rubric(), 0, "reasoning")


def test_neighbours_map_overflow_is_refused_and_flagged(adopt: Any) -> None:
    """Weights no fit writes (here 1e308: NaN once applied) make the adopted version damaged: the seat reads the
    shipped map and says so."""

    def huge(d: dict[str, Any]) -> None:
        for m in d["maps"].values():
            m["coef"] = [1e308] * len(m["coef"])

    adopt(NEIGH, huge)
    e = _neighbours_seat(Jury(SEATS, {}, JuryConfig()))
    assert "map_fallback" in e.flags and not e.fallback


@pytest.mark.parametrize("value", [5, 1.5, True])
def test_labelled_cases_not_a_list_is_ignored_or_flagged(adopt: Any, value: object) -> None:
    adopt(NEIGH, lambda d: d["metrics"].__setitem__("labelled_cases", value))
    _neighbours_seat(Jury(SEATS, {}, JuryConfig()))  # main: TypeError in nearest_cases: the run fails


def test_adopted_jury_map_that_cannot_be_used_is_flagged(adopt: Any) -> None:
    """An adopted version that is damaged (here: fewer coefficients than features) gives the shipped map, and
    `Calibration.fallback` says why; the hand-raise judge flags that `map_fallback`, the jury seat does not."""

    def damaged(d: dict[str, Any]) -> None:
        d["maps"]["safe_pass"]["coef"] = d["maps"]["safe_pass"]["coef"][:10]

    adopt(NEIGH, damaged)
    e = _neighbours_seat(Jury(SEATS, {}, JuryConfig()))
    assert any("fallback" in f for f in e.flags)


@pytest.mark.parametrize(
    "fig", [{"accuracy": "0.9", "interval": [0.1, 0.2]}, {"accuracy": 0.5, "interval": "ab"}, ["x"]]
)
def test_stack_note_survives_a_damaged_figure(adopt: Any, fig: object) -> None:
    """dashboard/mechanisms/jury/stack_figures.py stack_note (the final card's 'One case says little' line, Jury and
    Replay pages): a map's figures of the wrong type raise (ValueError/AttributeError) and break the page."""
    from dashboard.mechanisms.jury.stack_figures import stack_note

    adopt(STACK, lambda d: d["metrics"].__setitem__("cross_validated", fig))
    view = SimpleNamespace(final={"method": "stack"}, config={}, jurors=[{"model_id": s.model_id} for s in SEATS])
    stack_note(view)  # type: ignore[arg-type]


def test_stack_unavailable_is_shown_as_a_warning() -> None:
    """The final card shows flags that say how a verdict was made only with details, and any other always:
    "stack_unavailable" and "map_fallback" start like informative flags but are warnings."""
    from dashboard.mechanisms.jury.view import split_flags

    flags = ["stack", "stacked:safe_pass", "selective:not_sure", "minority_veto:j2", "calibration:v1"]
    warnings, informative = split_flags([*flags, "stack_unavailable", "map_fallback", "failed:j1"])
    assert warnings == ["stack_unavailable", "map_fallback", "failed:j1"]
    assert informative == flags


def test_an_all_neighbours_panel_records_its_embeddings(store: Any) -> None:
    """A panel of neighbours seats only has no model seat to take the call log and replay source from: its
    embedder records into (and replays from) the final judge's, which is built but never called."""
    from models.registry import ModelHub

    seat = JurorSeat(juror_id="j", model_id="use-m3", role_name="C", judge="neighbours")
    emb = Jury([seat], ModelHub(call_log=store).get, JuryConfig())._embedder("use-m3")
    assert emb.call_log is store
    assert Jury([seat], {}, JuryConfig())._embedder("use-m3").call_log is None  # no model at all: nothing to log to


def test_a_stack_map_that_reads_other_seats_is_said_not_silently_replaced(adopt: Any) -> None:
    """A stack fitted under this panel's name that reads other seats is not used, and the final judgment says so
    (the vote, flagged `stack_unavailable`), instead of quietly asking the final judge."""

    def other(d: dict[str, Any]) -> None:
        for m in d["maps"].values():
            m["features"] = [f.replace("use-m3", "minilm") for f in m["features"]]

    adopt(STACK, other)
    jury = Jury(SEATS, {}, JuryConfig())
    assert jury.stack_map(Rubric()) is not None  # the adopted version is refused: the shipped map, flagged
    assert jury.stack_map(Rubric()).fallback


def test_selective_error_none_or_off_means_always_decide() -> None:
    assert JuryConfig.from_env({"JURY_SELECTIVE_ERROR": "none"}).selective_error is None
    assert JuryConfig.from_env({"JURY_SELECTIVE_ERROR": "off"}).selective_error is None
    final = stacked_final(JuryConfig(selective_error=None))
    assert "selective:not_sure" not in final.flags
    assert "selective:not_sure" not in stacked_final(JuryConfig(selective_error=0)).flags


def test_a_set_of_maps_is_written_all_or_none(tmp_path: Path) -> None:
    """A panel's seat maps and stack go together: when one cannot be written, none is replaced."""
    import os

    from engine.judgemaps import MapError, calibration_path, save_calibrations

    seat = judgemapsshipped("jury.seat", "gemma3-270m")
    stack = judgemapsshipped("jury.stack", "gemma3-270m+smollm2-135m+use-m3")
    out = tmp_path / "maps"
    first = save_calibrations([seat, stack], out)
    before = [p.read_bytes() for p in first]
    blocked = calibration_path(stack.name, stack.model_id, out)
    blocked.unlink()
    blocked.mkdir()  # a folder where the stack's file goes: its rename fails after the seat's was staged
    (blocked / "x").write_text("keep")
    changed = seat.model_copy(update={"version": "20990101T000000Z"})
    with pytest.raises(MapError, match="no map was changed"):
        save_calibrations([changed, stack], out)
    assert first[0].read_bytes() == before[0]
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def judgemapsshipped(name: str, model_id: str) -> Any:
    from engine.judgemaps import Calibration

    return Calibration.model_validate_json((Path("data/calibration") / f"{name}.{model_id}.json").read_text())


def test_a_refit_checks_its_output_folder_before_the_model_pass(tmp_path: Path, store: Any) -> None:
    from engine.refit import RefitError, RefitJob, refit

    called = []

    async def rows() -> list[dict[str, float]]:
        called.append(1)
        return []

    (tmp_path / "file").write_text("not a folder")
    job = RefitJob(store, "jury", "x", tmp_path / "split.jsonl", rows, lambda _r: [])
    with pytest.raises(RefitError, match="cannot be written"):
        refit(job, tmp_path / "file" / "maps")
    assert not called and not store.list_runs(kind="calibration")


def test_a_split_too_small_for_the_folds_is_refused_before_any_model_loads() -> None:
    from engine.jury.panelfit import split_problem

    assert split_problem(V * 5, V) == ""
    assert "at least 5 cases of each verdict" in split_problem(V * 4, V)
    assert "not one of" in split_problem([*V * 5, "maybe"], V)
