"""Experiments are bounded and always cancellable (issue 26): the cell cap checked by arithmetic before
anything is built, ranges counted without building them, cells made lazily (and equal to the eager grid),
decisions off the event loop with Cancel honoured within seconds while other runs keep starting."""

from __future__ import annotations

import itertools
import time
import tracemalloc
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dashboard.bench.experiment_bounds import decision_experiment_yaml, huge_grid_yaml
from engine.director.experiment import DirectorAdapter
from engine.experiments import DefinitionError, Range, expand, parse_definition
from engine.experiments.definition import group_key
from engine.jury.experiment import JuryAdapter
from engine.store import CANCELLED, FINISHED, RUNNING, RunFilter, Store

ROOT = Path(__file__).resolve().parents[2]


def _yaml(space: str, extra: str = "") -> str:
    return (
        f"name: x\nmechanism: director\ncases: {ROOT / 'data/scripts/beach.jsonl'}\n"
        "base: {format_retry_lines: 100000, scatter_retry_sentences: 100000, scatter_retry_topics: 100000}\n"
        f"space:\n{space}{extra}"
    )


def test_a_billion_cell_grid_is_refused_at_validation_in_milliseconds_and_kilobytes() -> None:
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(DefinitionError) as err:
        parse_definition(huge_grid_yaml(), "huge.yaml")
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 20 * 2**20, (elapsed, peak)
    (problem,) = err.value.problems  # the cap alone: nothing else was checked (or built)
    assert problem.startswith("huge.yaml:5: space: 1000000000 cells (format_warn_lines 1000 × ")
    assert "more than the cap of 100000 cells (JUDGELAB_MAX_CELLS)" in problem


def test_the_cap_is_a_setting_and_counts_repeats_and_models(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _yaml("  format_warn_lines: [1, 2, 3]\n  tone_pass: [1, 2]\n", "repeats: 5\n")
    assert parse_definition(text).cell_count() == 30
    monkeypatch.setenv("JUDGELAB_MAX_CELLS", "30")
    parse_definition(text)  # exactly the cap: accepted
    monkeypatch.setenv("JUDGELAB_MAX_CELLS", "29")
    with pytest.raises(DefinitionError) as err:
        parse_definition(text, "e.yaml")
    assert "e.yaml:5: space: 30 cells (format_warn_lines 3 × tone_pass 2 × repeats 5): more than the cap of 29" in str(
        err.value
    )
    from engine.experiments import Experiment

    unchecked = Experiment.model_validate(
        {"name": "x", "mechanism": "director", "cases": "c", "space": {"tone_pass": [1, 2, 3]}, "repeats": 10}
    )
    with pytest.raises(DefinitionError, match="30 cells"):  # whoever skips validation meets it at expansion
        expand(unchecked, DirectorAdapter.decision)


@pytest.mark.parametrize(
    "space",
    [
        "{from: 0, to: 1e300, step: 1e-300}",
        "{from: -1e308, to: 1e308, step: 1}",
        "{from: 0, to: 1, step: 5e-324}",
        "{from: 0, to: 100000, step: 1}",
    ],
)
def test_a_range_too_long_or_overflowing_is_a_message_naming_its_line(space: str) -> None:
    started = time.perf_counter()
    with pytest.raises(DefinitionError) as err:
        parse_definition(_yaml(f"  tone_pass: [1]\n  format_warn_lines: {space}\n"), "r.yaml")
    assert time.perf_counter() - started < 1.0
    (problem,) = err.value.problems
    assert problem.startswith("r.yaml:7: space.format_warn_lines: ") and "(at most 100 000)" in problem


@pytest.mark.parametrize(
    "fields",
    [
        {"from": 0, "to": 10, "step": 1, "integer": True},
        {"from": 0.5, "to": 20.5, "step": 1, "integer": True},  # ties: banker's rounding merges some
        {"from": 0, "to": 3, "step": 0.1, "integer": True},
        {"from": 1, "to": 100, "num": 7, "integer": True},
        {"from": 0, "to": 1, "num": 11},
        {"from": 0.3, "to": 0.8, "step": 0.1},
        {"from": 2, "to": 2},
        {"from": 1e15, "to": 1e15 + 40, "step": 0.5, "integer": True},
    ],
)
def test_a_ranges_length_is_the_number_of_its_values(fields: dict[str, Any]) -> None:
    r = Range.model_validate(fields)
    assert r.length() == len(r.values())


def _eager(axes: dict[str, list[Any]], repeats: int, decision: frozenset[str]) -> list[dict[str, Any]]:
    """The grid as `expand` used to build it, every cell up front: the reference."""
    names = list(axes)
    out: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for values in itertools.product(*(axes[n] for n in names)):
            params = dict(zip(names, values, strict=True))
            calls = {k: v for k, v in params.items() if k not in decision}
            out.append({"index": len(out), "params": params, "repeat": repeat, "group": group_key(calls, repeat)})
    return out


def test_lazy_cells_equal_the_eager_grid_by_index_iteration_and_group() -> None:
    from engine.experiments import Experiment

    definition = Experiment.model_validate(
        {
            "name": "x",
            "mechanism": "jury",
            "cases": "c",
            "space": {
                "consensus_threshold": [0.5, 0.67, 1.0],
                "temperature": [0.0, 0.4],
                "tie_policy": ["severe", "lenient"],
                "max_tokens": [32, 64],
            },
            "repeats": 2,
        }
    )
    decision = JuryAdapter.decision
    reference = _eager(definition.axes(), 2, decision)
    cells = expand(definition, decision)
    assert len(cells) == len(reference) == definition.cell_count() == 48
    as_dicts = [{"index": c.index, "params": c.params, "repeat": c.repeat, "group": c.group} for c in cells]
    assert as_dicts == reference
    assert [cells[i].params for i in (0, 17, 47, -1)] == [reference[i]["params"] for i in (0, 17, 47, -1)]
    groups = list(cells.groups())
    first_seen = list(dict.fromkeys(r["group"] for r in reference))
    assert [g.key for g in groups] == first_seen and cells.group_count == len(groups) == 8
    for g in groups:
        members = list(cells.members(g))
        assert [m.index for m in members] == [r["index"] for r in reference if r["group"] == g.key]
        assert all(m.call_params == g.call_params for m in members)
    with pytest.raises(IndexError):
        cells[48]


def test_a_hundred_thousand_cells_cost_no_memory_until_walked() -> None:
    definition = parse_definition(decision_experiment_yaml(), "<t>")
    tracemalloc.start()
    cells = expand(definition, DirectorAdapter.decision)
    last = cells[len(cells) - 1]
    (group,) = cells.groups()
    next(cells.members(group))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(cells) == 100_000 and last.index == 99_999 and peak < 5 * 2**20


def test_a_run_id_drawn_twice_is_drawn_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    import engine.store.database as store_module

    store = Store(f"sqlite:///{tmp_path / 'ids.db'}")
    fixed = uuid.UUID("12345678123456781234567812345678")
    draws = iter([fixed, fixed, uuid.uuid4()])
    monkeypatch.setattr(store_module, "uuid4", lambda: next(draws))
    monkeypatch.setattr(store_module, "utcnow", lambda: datetime(2030, 1, 1, tzinfo=UTC))
    first = store.create_run("experiment.cell")
    second = store.create_run("experiment.cell")  # the same id first: drawn again, not a StoreError
    assert first.id != second.id and first.id.endswith("-123456")
    store.dispose()


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_cancel_of_a_large_decision_experiment_is_prompt_and_other_runs_start_meanwhile(tmp_path: Path) -> None:
    """The dashboard's path: the registry on the background loop every page shares."""
    from dashboard.background import BackgroundLoop
    from dashboard.live_runs import RunRegistry
    from engine.director.review import CheckConfig, review_line
    from engine.experiments import run_experiment
    from engine.runctx import RunCancelled

    store = Store(f"sqlite:///{tmp_path / 'exp.db'}")
    loop = BackgroundLoop()
    registry = RunRegistry(loop, store, reap_every_s=None, hard_cancel_after_s=0, attach_timeout_s=10)
    try:
        definition = parse_definition(decision_experiment_yaml(), "<t>")
        run_id = registry.start("experiment", {"t": 1}, partial(run_experiment, definition, store))
        live = registry.get(run_id)
        assert live is not None
        deadline = time.monotonic() + 60
        while live.control.progress.done < 100 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert live.control.progress.done >= 100 and not live.done
        config = CheckConfig(character="yana", text="えー、ほんと？")
        started = time.monotonic()
        check = registry.start("director.check", {"t": 2}, partial(review_line, config, None, store))
        registry.wait(check, timeout=10)
        assert time.monotonic() - started < 5  # the experiment never holds the loop
        started = time.monotonic()
        registry.cancel(run_id)
        with pytest.raises(RunCancelled):
            registry.wait(run_id, timeout=30)
        assert time.monotonic() - started < 5
        assert store.get_run(run_id).status == CANCELLED  # type: ignore[union-attr]
        cells = store.search_runs(RunFilter(kinds=("experiment.cell",)), limit=100_000)
        assert cells and {c.status for c in cells} == {FINISHED}  # stopped between cells: none left running
        assert not store.search_runs(RunFilter(statuses=(RUNNING,)), limit=10)
        assert len(cells) < 100_000
    finally:
        registry.close()
        loop.stop()
        store.dispose()
