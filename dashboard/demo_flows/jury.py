"""The Jury page's demo: a case of the shipped case files judged by the page's default panel and settings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.text import in_words
from engine import judgemaps
from engine.config import get_settings
from engine.demo import MODEL, PageDemo, log, recording_hub
from engine.jury import Jury, JuryConfig, panel_seats, run_case
from engine.jury.config import case_files, load_cases
from engine.jury.likelihood import JURY
from engine.store import Store
from models.catalog import load_catalog

if TYPE_CHECKING:
    from engine.jury import JuryCase

JURY_TRIES = 3


def page_jury() -> tuple[list[Any], Any]:
    """The Jury page's defaults: the first panel preset, a final judge, up to 3 rounds, jurors judging as
    their models suit (`auto`)."""

    catalog = load_catalog()
    preset = next(iter(catalog.panels), "local")  # none at all: the error names the panel and the catalog file
    seats = panel_seats(
        [{"model": s.model, "role_name": s.role_name, "role_focus": s.role_focus} for s in catalog.panel(preset)]
    )
    config = JuryConfig(
        max_discussion_rounds=3,
        consensus_threshold=2.0,
        final_judgment_method="final_judge",
        final_judge_model=catalog.ids[0],
        stagnation_rounds=2,
        tie_policy="severe",
        parallel=True,
        max_tokens=220,
        judge="auto",
    )
    return seats, config


def jury_cases() -> list[tuple[Path, Any]]:

    return [(path, case) for path in case_files(get_settings().data_dir) for case in load_cases(path)]


async def record_jury(store: Store, case: JuryCase) -> tuple[str, dict[str, Any]]:

    seats, config = page_jury()
    run_id, result = await run_case(store, Jury(seats, recording_hub(store), config), case)
    changes = sum(s.position_changed for r in result.discussion_rounds for s in r.statements)
    cal = judgemaps.load_calibration(JURY, MODEL)
    weight = cal.metrics.get("others_weight") if cal is not None else None
    return run_id, {
        "changes": changes,
        "rounds": result.total_rounds,
        "verdict": result.final_verdict,
        "gold": case.gold,
        "others_weight": f"weight {weight}" if weight is not None else "no fitted weight",
    }


def jury_note(facts: dict[str, Any]) -> str:
    """The sidebar's note on the recorded jury run, in words (a stakeholder reads it beside the page)."""

    verdict, gold = in_words(facts["verdict"]), in_words(facts["gold"])
    head = f"Verdict: {verdict}" + (", as the gold label. " if verdict == gold else f"; the gold label is {gold}. ")
    if not facts.get("rounds"):
        return head + (
            "No discussion round was run: the bundled model judges by likelihood, and its fitted map gives the "
            "others' verdicts no weight, so a round could move no one."
        )
    return head + f"{facts['changes']} position change(s) in {facts['rounds']} discussion round(s)."


def record_page(store: Store) -> PageDemo:
    """The first of the first cases whose verdict matches its gold label (else the last tried)."""

    for found in jury_cases()[:JURY_TRIES]:
        path, case = found
        run_id, facts = asyncio.run(record_jury(store, case))
        log(f"jury {case.id}: {facts}")
        if facts["verdict"] == facts["gold"]:
            break
    return PageDemo(
        title="Jury",
        inputs=[f"{path.name}: {case.id} — {case.title}"],
        run_ids=[run_id],
        prefill={"jury.file": path.name, "jury.case": case.id},
        note=jury_note(facts),
    )
