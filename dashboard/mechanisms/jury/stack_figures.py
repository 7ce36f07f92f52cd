"""The jury's figures in words for the pages: a stacked panel's held-out accuracy (by language, against its best
seat), what its selective verdict decided and got wrong at the rate in use, read defensively from the stack map
the verdict was made with (a map file is input)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from engine import judgemaps
from engine.diagnostics import cross_validated, selective_figure, share
from engine.jury.stack import JURY_STACK, selective_cut, stack_id, stack_problem

if TYPE_CHECKING:
    from engine.jury.view import JuryView


LANGUAGE_NAMES = {"en": "English", "ja": "Japanese"}


def stack_note(view: JuryView) -> str:
    """A stacked panel's figures under its verdict, read from the stack map the final judgment was made with, for
    the selective rate the run used."""
    final = view.final or {}
    if final.get("method") != "stack":
        return ""
    models = [str(j.get("model_id")) for j in view.jurors]
    try:  # the map the verdict was made with: an adopted version the engine refuses is not it
        cal = judgemaps.load_calibration(JURY_STACK, stack_id(models), check=stack_problem)
    except ValueError:
        cal = None
    if cal is None:
        return ""
    rate = (view.config or {}).get("selective_error")
    text = stack_summary(cal, rate if isinstance(rate, int | float) and not isinstance(rate, bool) else None)
    return "One case says little about the jury — " + text if text else ""


def stack_summary(cal: Any, rate: float | None) -> str:
    """How right a stacked panel is over the labelled cases it never saw while fitted, in words, for the selective
    rate in use: always deciding (with its interval, by language, against its best seat alone), and what the
    selective verdict decided and got wrong at that rate (measured at the rate it was measured at; at another,
    the cut and what it decided on the same cases, said to be optimistic). '' without a figure."""
    fig = cross_validated(cal.metrics)
    if fig is None:
        return ""
    text = (
        f"deciding every case, the stacked panel was right on {fig.accuracy:.0%} of {fig.cases} labelled cases it "
        f"never saw while fitted (95 % {fig.low:.0%}–{fig.high:.0%}; chance 33 %)"
    )
    if fig.by_language:
        text += " — " + ", ".join(f"{LANGUAGE_NAMES.get(c, c)} {a:.0%} of {n} cases" for c, a, n in fig.by_language)
    seats = cal.metrics.get("seats_cross_validated")
    alone = [share(v) for v in seats.values()] if isinstance(seats, dict) else []
    best = max((a for a in alone if a is not None), default=None)
    if best is not None:
        text += f"; its best seat alone: {best:.0%}"
    sel = selective_figure(cal.metrics)
    if rate and sel is not None and abs(rate - sel.rate) < 1e-9:
        decided = f"{sel.coverage:.0%}" + (
            f" ({sel.coverage_interval[0]:.0%}–{sel.coverage_interval[1]:.0%})" if sel.coverage_interval else ""
        )
        text += f". Saying 'not sure' below the cut for {rate:.0%} errors, it decided {decided} of the cases"
        if sel.error is not None:
            wrong = f"{sel.error:.0%}" + (
                f" ({sel.error_interval[0]:.0%}–{sel.error_interval[1]:.0%})" if sel.error_interval else ""
            )
            met = "met" if sel.error_interval and sel.error_interval[1] <= rate else "not shown to be met"
            text += f" and was wrong on {wrong} of those: the {rate:.0%} target is {met}"
    elif rate:
        entry = (cal.metrics.get("selective") or {}).get(f"{rate:g}")
        cut = selective_cut(cal, rate)
        covered = share(entry.get("coverage")) if isinstance(entry, dict) else None
        text += (
            f". At {rate:.0%} errors the cut is {cut:.0%}"
            + (
                f", deciding {covered:.0%} of the same cases it was chosen on (optimistic)"
                if covered is not None
                else ""
            )
            + (f"; held out, only {sel.rate:.0%} was measured" if sel is not None else "")
            if math.isfinite(cut)
            else f". At {rate:.0%} errors no cut on the labelled cases holds: it decides nothing"
        )
    return text + "."
