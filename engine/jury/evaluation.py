"""Case-set evaluation: one line per case, and totals computed only from those lines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine import stats
from engine.agreement import fleiss_kappa, krippendorff_alpha
from engine.events import async_run_context
from engine.jury.config import JuryCase, Rubric
from engine.jury.decisions import IDENTICAL_SEATS_TEXT, NO_VERDICT, CollaborativeJuryResult, TiePolicy, majority_vote
from engine.jury.runner import run_case


def evaluation_item(
    case: JuryCase, result: CollaborativeJuryResult, run_id: str | None = None, tie_policy: TiePolicy = "severe"
) -> dict[str, Any]:
    """One case's line of a case-set report. `phase1_outcome` is the majority vote of the phase-1
    verdicts (what the panel would have said without discussion); `outcome_changed` compares it with
    the final verdict."""
    rubric = case.rubric or Rubric()
    # A failed juror has no position: a missing rating (None), never a vote for the fallback's label.
    phase1 = {e.juror_id: None if e.fallback else e.verdict for e in result.phase1_evaluations}
    final_positions = {e.juror_id: None if e.fallback else e.verdict for e in result.final_evaluations()}
    phase1_outcome = majority_vote(result.phase1_evaluations, tie_policy=tie_policy, verdicts=rubric.verdicts).verdict
    rounds_outcome = majority_vote(result.final_evaluations(), tie_policy=tie_policy, verdicts=rubric.verdicts).verdict
    flags = result.phase3_judgment.flags
    stacked = next((f.split(":", 1)[1] for f in flags if f.startswith("stacked:")), None)
    return {
        "id": case.id,
        "run_id": run_id,
        "gold": case.gold,
        "final_verdict": result.final_verdict,
        "final_score": result.final_score,
        "no_verdict": result.final_verdict == NO_VERDICT,
        "failed_seats": sum(v is None for v in final_positions.values()),
        # No verdict is a wrong answer (it is not left out of the accuracy).
        "correct": None if case.gold is None else result.final_verdict == case.gold,
        "phase1_verdicts": phase1,
        "final_positions": final_positions,
        "phase1_outcome": phase1_outcome,
        "phase1_correct": None if case.gold is None else phase1_outcome == case.gold,
        "outcome_changed": phase1_outcome != result.final_verdict,
        "positions_changed": sum(s.position_changed for r in result.discussion_rounds for s in r.statements),
        "rounds": result.total_rounds,
        "termination_reason": result.termination_reason,
        "fallbacks": sum(e.fallback for e in result.phase1_evaluations)
        + sum(
            bool(s.updated_evaluation and s.updated_evaluation.fallback)
            for r in result.discussion_rounds
            for s in r.statements
        ),
        "method": result.phase3_judgment.method,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "wall_s": result.wall_s,
        "identical_seats": result.identical_seats,
        "language": case.language,
        # A stacked panel: its verdict before the selective cut and the veto, and whether it decided.
        "stacked_verdict": stacked,
        "stacked_correct": None if case.gold is None or stacked is None else stacked == case.gold,
        "decided": "selective:not_sure" not in flags,
        # The seats' majority after the rounds (their final positions), against phase 1's.
        "rounds_outcome": rounds_outcome,
        "rounds_correct": None if case.gold is None else rounds_outcome == case.gold,
    }


def _agreement(
    items: Sequence[Mapping[str, Any]], key: str, intervals: bool
) -> dict[str, float | int | str | list[float] | None]:
    """α over every rating (a failed juror's is missing); κ, which needs complete ratings, over the
    cases where every juror worked (how many is reported). Cases whose seats are identical by construction
    (the same model and role-blind prompt: one judgment repeated) are left out and counted: their matching
    verdicts are no agreement; with only such cases κ and α are None and `note` says why."""
    identical = sum(bool(i.get("identical_seats")) for i in items)
    units = [list(i[key].values()) for i in items if not i.get("identical_seats")]
    complete = [u for u in units if None not in u]
    sizes = {len(u) for u in complete}
    kappa = fleiss_kappa(complete) if len(sizes) == 1 and sizes != {1} and complete else None
    alpha = krippendorff_alpha(units) if units else None
    spread: dict[str, list[float] | None] = {}
    if intervals:
        kappa_ci = (
            stats.bootstrap(stats.looped(lambda idx: fleiss_kappa([complete[i] for i in idx]), len(complete)))[1]
            if kappa is not None
            else None
        )
        alpha_ci = (
            stats.bootstrap(stats.looped(lambda idx: krippendorff_alpha([units[i] for i in idx]), len(units)))[1]
            if alpha is not None
            else None
        )
        spread = {
            "fleiss_kappa_ci": kappa_ci.as_list() if kappa_ci else None,
            "krippendorff_alpha_ci": alpha_ci.as_list() if alpha_ci else None,
        }
    return {
        "fleiss_kappa": None if kappa is None else round(kappa, 4),
        **spread,
        "fleiss_kappa_cases": len(complete),
        "krippendorff_alpha": None if alpha is None else round(alpha, 4),
        "identical_by_construction_cases": identical,
        "note": IDENTICAL_SEATS_TEXT if identical and not units else "",
    }


def evaluation_totals(items: Sequence[Mapping[str, Any]], intervals: bool = True) -> dict[str, Any]:
    """Totals of a case-set report, computed only from its items (so anyone can recompute them).

    With `intervals`, each rate carries `<rate>_ci` (95 %): Wilson over graded cases for the accuracies and the
    changed-outcome rate, a seeded bootstrap over cases for κ and α (engine/stats.py)."""

    graded = [i for i in items if i["gold"] is not None]
    n = len(items)

    rounds = Counter(int(i["rounds"]) for i in items)

    def rate_ci(hits: int, of: int) -> dict[str, list[float] | None]:
        interval = stats.wilson(hits, of) if intervals else None
        return {"ci": interval.as_list() if interval else None}

    changed = sum(bool(i["outcome_changed"]) for i in items)
    right = sum(bool(i["correct"]) for i in graded)
    right_first = sum(bool(i["phase1_correct"]) for i in graded)
    cis = (
        {
            "accuracy_ci": rate_ci(right, len(graded))["ci"],
            "phase1_accuracy_ci": rate_ci(right_first, len(graded))["ci"],
            "outcome_changed_rate_ci": rate_ci(changed, n)["ci"],
        }
        if intervals
        else {}
    )
    out_extra = _panel_figures(graded, items, intervals)
    return {
        **out_extra,
        "items": n,
        "graded": len(graded),
        "accuracy": round(sum(i["correct"] for i in graded) / len(graded), 4) if graded else None,
        "phase1_accuracy": round(sum(i["phase1_correct"] for i in graded) / len(graded), 4) if graded else None,
        "agreement_phase1": _agreement(items, "phase1_verdicts", intervals),
        "agreement_final": _agreement(items, "final_positions", intervals),
        "outcome_changed": sum(bool(i["outcome_changed"]) for i in items),
        "outcome_changed_rate": round(sum(bool(i["outcome_changed"]) for i in items) / n, 4) if n else None,
        "positions_changed": sum(int(i["positions_changed"]) for i in items),
        "rounds_mean": round(sum(int(i["rounds"]) for i in items) / n, 4) if n else None,
        "rounds_histogram": {str(k): rounds[k] for k in sorted(rounds)},
        "fallbacks": sum(int(i["fallbacks"]) for i in items),
        "no_verdict": sum(bool(i.get("no_verdict")) for i in items),
        "prompt_tokens": sum(int(i["prompt_tokens"]) for i in items),
        "completion_tokens": sum(int(i["completion_tokens"]) for i in items),
        "cost": round(sum(float(i["cost"]) for i in items), 6),
        **cis,
    }


def _panel_figures(
    graded: Sequence[Mapping[str, Any]], items: Sequence[Mapping[str, Any]], intervals: bool
) -> dict[str, Any]:
    """By language, recall per verdict, the cases with a move, the rounds' paired effect (the seats' majority after
    phase 1 against after the rounds, exact McNemar) and, for a stacked panel, the selective verdict's coverage and
    error among the cases it decided, each with its Wilson interval."""

    def rate(hits: int, of: int) -> dict[str, Any]:
        out: dict[str, Any] = {"rate": round(hits / of, 4) if of else None, "hits": hits, "of": of}
        if intervals:
            ci = stats.wilson(hits, of)
            out["ci"] = ci.as_list() if ci else None
        return out

    by_language: dict[str, Any] = {}
    for code in sorted({str(i.get("language") or "?") for i in graded}):
        these = [i for i in graded if str(i.get("language") or "?") == code]
        by_language[code] = {"accuracy": rate(sum(bool(i["correct"]) for i in these), len(these))}
        stacked = [i for i in these if i.get("stacked_correct") is not None]
        if stacked:
            by_language[code]["stacked_accuracy"] = rate(sum(bool(i["stacked_correct"]) for i in stacked), len(stacked))
    recall = {
        v: rate(sum(i.get("final_verdict") == v for i in graded if i["gold"] == v), sum(i["gold"] == v for i in graded))
        for v in sorted({str(i["gold"]) for i in graded})
    }
    out: dict[str, Any] = {
        "by_language": by_language,
        "recall": recall,
        "cases_with_a_move": rate(sum(int(i.get("positions_changed") or 0) > 0 for i in items), len(items)),
    }
    paired = [i for i in graded if i.get("rounds_correct") is not None and i.get("phase1_correct") is not None]
    if paired:
        cmp = stats.compare_correct(
            [bool(i["phase1_correct"]) for i in paired], [bool(i["rounds_correct"]) for i in paired]
        )
        out["rounds_effect"] = {
            "majority_after_phase1": cmp.a,
            "majority_after_rounds": cmp.b,
            "difference": cmp.difference,
            "difference_ci": cmp.interval.as_list() if cmp.interval and intervals else None,
            "mcnemar_p": cmp.p_value,
            "discordant": list(cmp.discordant) if cmp.discordant else None,
            "cases": cmp.n,
        }
    stacked = [i for i in graded if i.get("stacked_correct") is not None]
    if stacked:
        decided = [i for i in stacked if i.get("decided", True)]
        out["stacked_accuracy"] = rate(sum(bool(i["stacked_correct"]) for i in stacked), len(stacked))
        out["selective"] = {
            "coverage": rate(len(decided), len(stacked)),
            "error_among_decided": rate(sum(not i["stacked_correct"] for i in decided), len(decided)),
        }
    return out


async def evaluate_cases(
    store: Any,
    jury: Any,
    cases: Sequence[JuryCase],
    *,
    source: str,
    on_item: Callable[[dict[str, Any]], object] | None = None,
    on_case: Callable[[JuryCase], object] | None = None,
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """The jury case-set evaluation as one stored run of kind `jury.eval` (the entry point the CLI and any page
    call): each case is its own `jury.eval.case` run, its line an event of the parent, the totals (with their
    intervals) its summary. `on_case` hears each case before it runs (a replay miss names it), `on_item` each
    line after. Returns (run id, lines, totals)."""
    config = {
        "cases": source,
        "jury": jury.config.model_dump(),
        "jurors": [s.model_dump() for s in jury.seats],
    }
    items: list[dict[str, Any]] = []
    name = f"jury eval {source.replace(chr(92), '/').rsplit('/', 1)[-1]}"
    async with async_run_context(store, "jury.eval", config, name=name) as parent:
        for case in cases:
            if on_case is not None:
                on_case(case)
            run_id, result = await run_case(store, jury, case, kind="jury.eval.case")
            item = evaluation_item(case, result, run_id, jury.config.tie_policy)
            items.append(item)
            parent.emit("jury_eval_item", **item)
            if on_item is not None:
                on_item(item)
        totals = evaluation_totals(items)
        parent.summary = totals
    return parent.run_id, items, totals
