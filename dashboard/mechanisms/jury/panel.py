"""The Jury page's "Panel and settings" expander: the panel preset and its seat editor; the final judgment and its
judge model; the discussion's rounds, stop rules and tie policy; how the jurors judge and how long they may write;
a stacked panel's not-sure rate and minority veto. Under it, the panel's signal, its fitted maps (with Details on),
the models it lacks and the local models its seats queue for."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.components import breakable, flow_columns, md
from dashboard.mechanisms.jury.fields import (
    AUTO,
    FORM,
    KEY,
    METHOD_CHOICES,
    RUN_PANEL,
    THRESHOLD_SHORT,
    THRESHOLDS,
    TIE_WORDS,
    env_config,
    seat_models,
    seat_records,
    selective_label,
    selective_options,
)
from dashboard.mechanisms.jury.judging import judge_method, judging_line, panel_signal, stacked_panel
from engine.config import ConfigError
from engine.jury.config import JuryConfig, panel_seats
from engine.jury.decisions import JurorSeat
from engine.jury.runner import Jury
from models.catalog import Catalog
from models.registry import Availability


def render_panel(expanded: bool = True) -> tuple[list[JurorSeat] | None, JuryConfig | None]:
    """The panel and its settings, read into seats and a config (None, None when they cannot run: the reason is
    shown). Each part of the form returns the JuryConfig settings it draws."""
    catalog = state.get_catalog()
    availability = state.get_availability()
    with st.expander("Panel and settings", expanded=expanded):
        edited = _render_seats(catalog)
        c1, c2, c3, c4 = flow_columns(4, width=185)  # two rows of two in a narrow window, not four cut ones
        chosen, seat_rows, stacked, asked = _render_final(c1, edited, catalog)
        chosen |= _render_discussion(c2, c3)
        chosen |= _render_judging(c4, seat_rows, asked, chosen["final_judge_model"])
        chosen |= _render_stack_options(chosen["final_judgment_method"], stacked)
    try:
        records = [r for r in edited.to_dict("records") if isinstance(r.get("model"), str) and r.get("model")]
        seats = panel_seats(seat_records(records))
        config = JuryConfig(**chosen)
    except (ValueError, KeyError, ConfigError) as exc:
        st.error(f"Panel: {md(exc, inline=False)}")
        return None, None
    if not seats:
        st.warning("Add at least one juror.")
        return None, None
    if not _render_checks(seats, config, catalog, availability):
        return None, None
    return seats, config


def _render_seats(catalog: Catalog) -> pd.DataFrame:
    """The panel preset (or the attached run's seats) and the seat editor it fills: a seat's model, role, focus
    prompt and how it judges."""
    names = list(catalog.panels)
    run_panel = st.session_state.get(KEY + "run_panel")
    if run_panel:  # the attached run's seats, which no preset holds
        names.append(RUN_PANEL)
    preset = form.choice(
        st.selectbox,
        "Panel preset",
        names,
        KEY + "preset",
        help="Panels are defined in models/catalog.yaml; edit the seats below.",
    )
    if not names:  # a catalog without panels: the seats are entered below
        st.caption("The model catalog defines no panel (`panels:` in models/catalog.yaml): add the seats below.")
    rows = (
        list(run_panel)
        if preset == RUN_PANEL and run_panel
        else [
            {"model": s.model, "role_name": s.role_name, "role_focus": s.role_focus, "judge": s.judge or AUTO}
            for s in catalog.panels.get(preset or "", [])
        ]
    )
    edited: pd.DataFrame = st.data_editor(
        pd.DataFrame(rows, columns=["model", "role_name", "role_focus", "judge"]),
        num_rows="dynamic",
        width="stretch",
        key=KEY
        + "seats."
        + (preset or "")
        + (st.session_state.get(FORM + ".form_for") or "" if preset == RUN_PANEL else ""),
        column_config={
            "model": st.column_config.SelectboxColumn("Model", options=seat_models(), required=True),
            "role_name": st.column_config.TextColumn("Role", required=True),
            "role_focus": st.column_config.TextColumn("Focus prompt", width="large"),
            "judge": st.column_config.SelectboxColumn(
                "Judges by",
                options=[AUTO, "likelihood", "generate", "neighbours"],
                help="auto: as 'Jurors judge by' says; likelihood: the verdict from the model's scores of "
                "the verdicts, through its fitted map; generate: the model writes its evaluation; neighbours: "
                "the LLM-free juror (model use-m3, Google's multilingual sentence encoder) compared with the "
                "labelled cases",
            ),
        },
    )
    return edited


def _render_final(
    column: Any, edited: pd.DataFrame, catalog: Catalog
) -> tuple[dict[str, Any], list[dict[str, Any]], bool, bool]:
    """The final judgment and its judge model (asked only where no stack decides). Returns its settings, the
    editor's seat rows that name a model, whether they form a stacked panel and whether the final judge is asked."""
    method = form.choice(
        column.selectbox,
        "Final judgment",
        list(METHOD_CHOICES),
        KEY + "method",
        help="Stack (auto): a panel whose seats judge by distributions and have a stack fitted on labelled "
        "cases is decided by it (a final judge otherwise); Stack: the stack or, without one, the majority vote.",
        format_func=METHOD_CHOICES.__getitem__,
    )
    seat_rows = [r for r in edited.to_dict("records") if isinstance(r.get("model"), str) and r.get("model")]
    stacked = stacked_panel(seat_rows, str(st.session_state.get(KEY + "judge", "auto")))
    asked = method == "final_judge" or (method == "auto" and not stacked)
    judge_model = form.choice(
        column.selectbox,
        "Final judge model",
        catalog.ids,
        KEY + "judge_model",
        disabled=not asked,
        help="Asked for the final judgment: with 'Final judge', and with 'Stack (auto)' on a panel that has no "
        "stack fitted for its seats (this one " + ("has one: not asked)" if stacked else "has none: asked)"),
    )
    chosen = {"final_judgment_method": method, "final_judge_model": judge_model}
    return chosen, seat_rows, stacked, asked


def _render_discussion(c2: Any, c3: Any) -> dict[str, Any]:
    """Whether the jurors discuss, for how many rounds, when they stop (still rounds, the consensus threshold)
    and how a tied vote is broken."""
    collaborative = form.field(
        c2.toggle,
        "Collaborative (discussion rounds)",
        KEY + "collaborative",
        initial=env_config().use_collaborative,
        help="On: each juror judges, they discuss in rounds until they agree (or stop moving), then the final "
        "judgment. Off: independent votes — each juror judges once and the final judgment reads their "
        "verdicts, no discussion. (Setting: JURY_USE_COLLABORATIVE.)",
    )
    if not collaborative:
        c2.caption("Will run: each juror judges once → the final judgment. No discussion rounds.")
    rounds = form.field(
        c2.number_input, "Max discussion rounds", KEY + "rounds", 0, 10, initial=3, disabled=not collaborative
    )
    stagnation = form.field(
        c2.number_input,
        "Stop after still rounds",
        KEY + "stagnation",
        1,
        10,
        initial=2,
        disabled=not collaborative,
        help="End the discussion when no juror changed position for this many rounds.",
    )
    threshold = THRESHOLDS[
        form.choice(
            c3.selectbox,
            "Consensus threshold",
            list(THRESHOLDS),
            KEY + "threshold",
            disabled=not collaborative,
            format_func=lambda label: label.split(" — ")[0] + " · " + THRESHOLD_SHORT[THRESHOLDS[label]],
            help="The share of jurors that must agree to end the discussion early: " + "; ".join(THRESHOLDS) + ".",
        )
    ]
    tie = form.choice(
        c3.selectbox,
        "Tie policy",
        list(TIE_WORDS),
        KEY + "tie",
        format_func=TIE_WORDS.__getitem__,
        help="How a tied vote is broken: the more severe verdict (the default), the more lenient one, the "
        "verdict whose jurors gave the higher mean score, or the first juror's.",
    )
    return {
        "use_collaborative": bool(collaborative),
        "max_discussion_rounds": int(rounds),
        "consensus_threshold": threshold,
        "stagnation_rounds": int(stagnation),
        "tie_policy": tie,
    }


def _render_judging(column: Any, seat_rows: list[dict[str, Any]], asked: bool, judge_model: str) -> dict[str, Any]:
    """Whether the jurors speak in parallel, how they judge, and the longest answer a generating one may write
    (off when every seat and the final judge judge by likelihood)."""
    parallel = form.field(
        column.toggle,
        "Parallel jurors",
        KEY + "parallel",
        initial=True,
        help="Off: jurors speak one after another (to compare wall time).",
    )
    judge = form.choice(
        column.selectbox,
        "Jurors judge by",
        ["auto", "generate", "likelihood"],
        KEY + "judge",
        help="auto: likelihood for a base model that can score (the bundled Gemma), generate for instruction "
        "and API models; generate: each juror writes its evaluation as JSON; likelihood: its verdict comes from "
        "likelihoods (models that can score): the fitted channel map (data/calibration/) for the default "
        "labels, the calibrated likelihood of the label words for other rubrics",
    )
    used = {
        str(r.get("judge")) if r.get("judge") in ("likelihood", "generate") else judge_method(str(r["model"]), judge)
        for r in seat_rows
        if r.get("judge") != "neighbours"
    }
    if asked:
        used.add(judge_method(judge_model, judge))
    generates = "generate" in used
    max_tokens = form.field(
        column.number_input,
        "Max tokens per answer",
        KEY + "max_tokens",
        32,
        2048,
        initial=220,
        disabled=not generates,
        help="The longest answer a generating juror (or final judge) may write."
        if generates
        else "Not used: every seat (and the final judge) judges by likelihood, which scores the verdict "
        "labels and generates no text.",
    )
    return {"parallel": parallel, "judge": judge, "max_tokens": int(max_tokens)}


def _render_stack_options(method: str, stacked: bool) -> dict[str, Any]:
    """A stacked final judgment's own settings: the error rate below which it is not sure, and the minority veto
    (off unless the stack decides)."""
    v1, v2, v3 = flow_columns(3, width=185)
    env = env_config()
    options = selective_options(st.session_state.get(KEY + "selective"), env.selective_error)
    by_stack = stacked and method in ("auto", "stack")  # the selective verdict and the veto are the stack's
    selective = form.choice(
        v1.selectbox,
        "Not sure below",
        list(options),
        KEY + "selective",
        initial=selective_label(env.selective_error),
        disabled=not by_stack,
        help="A stacked panel decides only when its reading clears the cut chosen on the labelled cases for "
        "at most this error rate among the cases it decides; below it the verdict is needs_review, "
        "'not sure: …'. A rate stricter than any cut the map holds decides nothing. Default: "
        "JURY_SELECTIVE_ERROR, else 20 %. Only a stacked final judgment uses it.",
    )
    veto = form.field(
        v2.toggle,
        "Minority veto",
        KEY + "veto",
        initial=env.minority_veto,
        disabled=not by_stack,
        help="A stacked panel: one seat's own reading of unsafe at the 'Veto at' confidence or more keeps a "
        "pass from being published (the verdict becomes needs_review). Default: JURY_MINORITY_VETO. Only a "
        "stacked final judgment uses it.",
    )
    veto_at = form.field(
        v3.number_input,
        "Veto at",
        KEY + "veto_at",
        0.0,
        1.0,
        initial=env.veto_at,
        step=0.05,
        disabled=not (veto and by_stack),
        help="The vetoing seat's confidence needed (JURY_VETO_AT, default 0.6).",
    )
    return {"selective_error": options[selective], "minority_veto": bool(veto), "veto_at": float(veto_at)}


def _render_checks(
    seats: list[JurorSeat], config: JuryConfig, catalog: Catalog, availability: dict[str, Availability]
) -> bool:
    """Under the panel: its signal, its fitted maps (with Details on), the models it lacks (then it cannot run:
    False) and the local models several of its generating seats queue for."""
    signal = panel_signal(seats, config)
    if signal:
        st.caption(md(signal))
    if st.session_state.get("details.jury", False):  # the fitted maps and their figures: research detail
        st.caption(md(breakable(judging_line(seats, config))))
    needed = Jury(seats, {}, config).models_needed()
    missing = [
        f"{m}: {availability[m].reason}" for m in sorted(needed) if m in availability and not availability[m].available
    ]
    if missing:
        st.error("Unavailable: " + md("; ".join(missing)))
        return False
    # Seats that generate on one local model queue for it; likelihood seats share one scoring call (the
    # channel judge is role-blind), so they do not queue and the notice would mislead.
    shared_local = [
        m
        for m in needed
        if catalog.get(m).backend == "llamacpp"
        and sum(s.model_id == m for s in seats) > 1
        and judge_method(m, config.judge) == "generate"
    ]
    if shared_local and config.parallel:
        st.info(
            f"{md(', '.join(shared_local))} seats several jurors: one local model answers one call at a time, "
            "so their calls queue behind its lock (the timeline shows it). API jurors run truly in parallel."
        )
    return True
