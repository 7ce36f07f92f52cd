"""A grid: every cell of the definition's space × its repeats, run by the driver.

Cells that differ only in decision parameters share a group; a group is recorded once, then each of its cells is
decided from the recording with no call. Bounded at any size: the cells are made lazily (`definition.Cells`,
refused above JUDGELAB_MAX_CELLS), `concurrency` workers take one group at a time, and a group's cells are decided
in chunks (in a worker thread or on the executor), so a Cancel, SIGTERM or SIGINT lands within a chunk. A resumed
grid skips the cells finished before, and a group whose cells all finished is not recorded again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

from engine.experiments.adapters.base import ExperimentAdapter
from engine.experiments.definition import Cell, Experiment, Group, expand
from engine.experiments.driver import Driver
from engine.runctx import progress


def _chunks(items: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    while part := list(itertools.islice(items, size)):
        yield part


class Grid:
    """The plan of a grid experiment (see `driver.Plan`)."""

    title = ""
    minimize = False
    resumable = True
    trials = False

    def __init__(self, definition: Experiment, mech: ExperimentAdapter, *, resumed: bool) -> None:
        self.definition = definition
        self.cells = expand(definition, mech.decision)  # lazy; refused here above the cell cap
        self.units = len(self.cells)
        self.config: dict[str, Any] = {"resumed": resumed}
        self.metric = definition.metric or mech.default_metric
        self.done: frozenset[int] = frozenset()

    def begin(self, driver: Driver) -> None:
        self.done = frozenset(driver.rows)  # finished before (resume): skipped
        # the cells wait on the recordings: their cases (and calls) are counted too, and pace the ETA
        pending = (
            sum(1 for g in self.cells.groups() if any(c.index not in self.done for c in self.cells.members(g)))
            if driver.mech.calls
            else 0
        )
        recorded_items = len(driver.cases) * pending
        progress(
            total=len(self.cells),
            done=len(self.done),
            step="starting",
            items_total=recorded_items or None,
            unit="cells",
        )

    async def run(self, driver: Driver) -> None:
        groups = self.cells.groups()

        async def worker() -> None:
            for group in groups:  # shared: each worker takes the next group (asyncio: no two take one)
                await self._group(driver, group)

        workers = min(self.definition.concurrency, self.cells.group_count)
        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _group(self, driver: Driver, group: Group) -> None:
        """Record one group (unless every cell of it finished before) and store each of its cells."""
        members = (c for c in self.cells.members(group) if c.index not in self.done)
        first = next(members, None)
        if first is None:
            return
        recorded = await driver.record(group.call_params, group.key)
        new = recorded.new_calls  # the group's new calls are counted on its first cell
        for part in _chunks(itertools.chain([first], members), driver.decide_chunk):
            decided = await driver.decide(recorded, [c.decision_params for c in part])
            for cell, one in zip(part, decided, strict=True):
                await driver.store_cell(cell.as_dict(), one, recorded, new_calls=new, label=f"cell {cell.index}")
                new = 0

    def summary(self) -> dict[str, Any]:
        return {}
