"""The lines under the Jury page's panel: whether the jurors offered carry measurable signal (each likelihood
juror model's map diagnosis, or the stack's figures), and — with Details on — how each seat judges and which
fitted map it reads. Also whether the seats in the editor form a stacked panel (the final judge is then not
asked) and how a model judges under the 'Jurors judge by' setting, which the panel's widgets follow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dashboard import state
from dashboard.mechanisms.jury.fields import METHOD_CHOICES, seat_records
from dashboard.mechanisms.jury.stack_figures import stack_summary
from engine import judgemaps
from engine.diagnostics import cross_validated, diagnosis_for, identical_seats, share
from engine.jury.config import JuryConfig, Rubric, panel_seats
from engine.jury.decisions import JurorSeat
from engine.jury.likelihood import JURY
from engine.jury.likelihood_seats import JURY_SEAT, auto_judge
from engine.jury.neighbours import JURY_NEIGHBOURS, neighbours_problem
from engine.jury.roles import JURY_ROLE, JURY_ROLES, role_slug
from engine.jury.runner import Jury
from models import registry as model_registry


def judge_method(model_id: str, judge: str) -> str:
    """How a model judges under the `judge` setting: 'likelihood' or 'generate' (`auto`: the catalog's
    preferred method where its backend scores exactly; a model not in the catalog generates, and fails there)."""
    if judge != "auto":
        return judge
    try:
        spec = state.get_catalog().get(model_id)
    except KeyError:
        return "generate"
    return auto_judge(spec, model_registry.scoring_support(spec))


def _cv(cal: Any) -> str:
    fig = cross_validated(cal.metrics)
    if fig is None:
        return "no cross-validated figure"
    return f"cross-validated accuracy {fig.accuracy:.2f} ({fig.low:.2f}–{fig.high:.2f}) on {fig.cases} cases"


def seat_line(seat: JurorSeat) -> str:
    """How a seat judges and the map it reads (the one its judge would use: an adopted version the judge refuses
    is not it)."""
    neighbours = seat.judge == "neighbours"
    name, how = (JURY_NEIGHBOURS, "neighbours") if neighbours else (JURY_SEAT, "likelihood")
    try:
        cal = judgemaps.load_calibration(
            name, seat.model_id, check=neighbours_problem if neighbours else judgemaps.logistic_problem
        )
    except ValueError as exc:
        return f"{seat.model_id}: {how} — its map cannot be used ({exc})"
    if cal is None:
        return f"{seat.model_id}: {how} — no fitted map"
    used = f"calibration {cal.label} ({_cv(cal)})"
    return f"{seat.model_id}: {how} — {used}" + (f"; {cal.fallback}" if cal.fallback else "")


def stacked_panel(rows: Sequence[dict[str, Any]], judge: str) -> bool:
    """Whether these seat rows (the editor's) form a panel with a fitted stack (the final judge is then not asked)."""
    try:
        seats = panel_seats(seat_records(rows))
        return Jury(seats, {}, JuryConfig(judge=judge)).stack_map(Rubric()) is not None
    except (ValueError, KeyError):
        return False


def panel_signal(seats: list[JurorSeat], config: JuryConfig) -> str:
    """Whether the jurors offered carry measurable signal: each likelihood juror model's map diagnosis, and a
    panel of seats identical by construction (one model, role-blind, one input) said as such."""
    stack = Jury(seats, {}, config).stack_map(Rubric())
    method = config.final_judgment_method
    if stack is not None and method in ("auto", "stack"):
        text = stack_summary(stack, config.selective_error)
        return "Panel: different judges, stacked — " + (text or "no cross-validated figure stored with its map.")
    if stack is not None:
        rounds = stack.metrics.get("rounds_cross_validated")
        majority = share(rounds.get("majority_after_rounds")) if isinstance(rounds, dict) else None
        if method == "majority_vote" and majority is not None:
            return (
                f"Panel: different judges — their majority after the rounds was right on {majority:.0%} of the "
                "labelled cases held out (chance 33 %); the stack, the default, is measured beside it."
            )
        return (
            f"Panel: different judges — the {METHOD_CHOICES.get(method, method).lower()} is not measured on the "
            "labelled cases for this panel; the stack (the default final judgment) is."
        )
    parts = []
    roles = _role_panel(seats, config)
    for m in dict.fromkeys(s.model_id for s in seats if s.judge != "neighbours"):
        if judge_method(m, config.judge) != "likelihood":
            continue
        diagnosis = diagnosis_for("jury.panel" if roles else "jury.likelihood", m)
        if diagnosis is not None:
            how = ", each seat by its own role's map and the verdict by the panel map" if roles else " by likelihood"
            parts.append(f"{m}{how}: {diagnosis.label} — {diagnosis.text}")
    if (
        not roles
        and len(seats) > 1
        and len({s.model_id for s in seats}) == 1
        and judge_method(seats[0].model_id, config.judge) == ("likelihood")
    ):
        parts.append(identical_seats("jury", len(seats)).label + ": the seats read one map, so they agree by design")
    return "Jurors: " + "; ".join(parts) if parts else ""


def _role_panel(seats: list[JurorSeat], config: JuryConfig) -> bool:
    """Whether the seats judge from their own roles (`engine.jury.roles`): role maps on, and two or more seats
    on one likelihood model whose roles each have a map fitted for it (they then differ)."""
    roles = {role_slug(s.role_name) for s in seats}
    return (
        config.role_maps
        and len(seats) > 1
        and len({s.model_id for s in seats}) == 1
        and len(roles) > 1
        and judge_method(seats[0].model_id, config.judge) == "likelihood"
        and all(r in JURY_ROLES and judgemaps.load_calibration(f"{JURY_ROLE}.{r}", seats[0].model_id) for r in roles)
    )


def judging_line(seats: list[JurorSeat], config: JuryConfig) -> str:
    """One line: how each model of the panel (and the final judge) judges under the chosen setting, and
    for likelihood which fitted map is in use (its held-out accuracy and the others' fitted weight)."""
    catalog = state.get_catalog()
    stack = Jury(seats, {}, config).stack_map(Rubric()) if config.final_judgment_method in ("auto", "stack") else None
    if stack is not None:
        return "Seats, each by its own fitted map, then the stack: " + "; ".join(
            [*(seat_line(s) for s in seats), f"the verdict: the stack, calibration {stack.label} ({_cv(stack)})"]
        )
    models = dict.fromkeys(s.model_id for s in seats)
    if config.final_judgment_method == "final_judge":
        models[config.final_judge_model] = None
    parts = []
    for m in models:
        if m not in catalog.ids:
            parts.append(f"{m}: not in the catalog")
            continue
        if judge_method(m, config.judge) == "generate":
            parts.append(f"{m}: generate (JSON)")
            continue
        cal = judgemaps.load_calibration(JURY, m)
        if cal is None:
            parts.append(f"{m}: likelihood of the label words, uncalibrated (no jury map for this model)")
            continue
        facts = [f"leave-one-case-out accuracy {cal.metrics.get('loo_case_accuracy')}"]
        if "others_weight" in cal.metrics:
            weight = cal.metrics["others_weight"]
            facts.append(
                f"weight of the others' verdicts in a round {weight:.2f}"
                + (": positions do not move in the discussion" if weight == 0 else "")
            )
        parts.append(f"{m}: likelihood — calibration {cal.label} ({', '.join(facts)})")
    return f"Jurors judge by ({config.judge}): " + "; ".join(parts)
