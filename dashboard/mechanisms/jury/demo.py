"""The Jury page's demo: a case of the shipped case files judged by the page's default panel and settings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.text import in_words
from engine import judgemaps
from engine.config import get_settings
from engine.demo import MODEL, PageDemo, log, recording_hub
from engine.jury.config import JuryConfig, case_files, load_cases, panel_seats
from engine.jury.likelihood import JURY
from engine.jury.runner import Jury, run_case
from engine.store import Store
from models.catalog import load_catalog

if TYPE_CHECKING:
    from engine.jury.config import JuryCase

JURY_TRIES = 12  # the shipped case files' cases, in order: the first real deliberation is recorded


def page_jury() -> tuple[list[Any], Any]:
    """The Jury page's defaults: the first panel preset, the stack where one is fitted for its seats (else a final
    judge), up to 3 rounds, jurors judging as their models suit (`auto`), not sure below the 20 % error cut."""

    catalog = load_catalog()
    preset = next(iter(catalog.panels), "local")  # none at all: the error names the panel and the catalog file
    seats = panel_seats(
        [
            {"model": s.model, "role_name": s.role_name, "role_focus": s.role_focus, "judge": s.judge}
            for s in catalog.panel(preset)
        ]
    )
    config = JuryConfig(
        max_discussion_rounds=3,
        consensus_threshold=2.0,
        final_judgment_method="auto",
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
    phase1 = {e.verdict for e in result.phase1_evaluations if not e.fallback}
    cal = judgemaps.load_calibration(JURY, MODEL)
    weight = cal.metrics.get("others_weight") if cal is not None else None
    return run_id, {
        "changes": changes,
        "rounds": result.total_rounds,
        "verdict": result.final_verdict,
        "gold": case.gold,
        "others_weight": f"weight {weight}" if weight is not None else "no fitted weight",
        "disagreed": len(phase1) > 1,
        "decided": "selective:not_sure" not in result.phase3_judgment.flags,
        "method": result.phase3_judgment.method,
    }


def jury_note(facts: dict[str, Any]) -> str:
    """The sidebar's note on the recorded jury run, in words (a stakeholder reads it beside the page)."""

    verdict, gold = in_words(facts["verdict"]), in_words(facts["gold"])
    head = f"Verdict: {verdict}" + (", as the gold label. " if verdict == gold else f"; the gold label is {gold}. ")
    if facts.get("method") == "stack":
        moved = f"{facts['changes']} position change(s) in {facts['rounds']} discussion round(s)"
        return head + (
            f"The seats disagreed in phase 1; {moved}, each saying why. The verdict is the stack's, which weighs "
            "the seats as the labelled cases taught it."
            if facts.get("rounds")
            else "No discussion round was run: no seat was unsure enough for the others to move it."
        )
    if not facts.get("rounds"):
        return head + (
            "No discussion round was run: the bundled model judges by likelihood, and its fitted map gives the "
            "others' verdicts no weight, so a round could move no one."
        )
    return head + f"{facts['changes']} position change(s) in {facts['rounds']} discussion round(s)."


def record_page(store: Store) -> PageDemo:
    """A real deliberation: the first shipped case whose seats disagree, whose discussion moves someone and whose
    decided verdict matches its gold label; else the first right one; else the last tried (the note says which)."""

    tried: list[tuple[Path, Any, str, dict[str, Any]]] = []
    for path, case in jury_cases()[:JURY_TRIES]:
        run_id, facts = asyncio.run(record_jury(store, case))
        log(f"jury {case.id}: {facts}")
        tried.append((path, case, run_id, facts))
        if facts["verdict"] == facts["gold"] and facts["changes"] and facts["disagreed"] and facts["decided"]:
            break
    else:
        right = [t for t in tried if t[3]["verdict"] == t[3]["gold"]]
        tried.append((right or tried)[0])
    path, case, run_id, facts = tried[-1]
    return PageDemo(
        title="Jury",
        inputs=[f"{path.name}: {case.id} — {case.title}"],
        run_ids=[run_id],
        prefill={"jury.file": path.name, "jury.case": case.id},
        note=jury_note(facts),
    )
