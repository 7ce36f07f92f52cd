"""Jury: choose jurors (model + role), the final method, rounds and threshold; pick or paste a case; watch
phase 1, the continuous discussion and the final verdict arrive live. Everything shown is a fold of the
run's events (`JuryView`), which is also what the Replay page folds, so both pages show the same."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import formstate as form
from dashboard import state
from dashboard.components import (
    breakable,
    details_on,
    export_buttons,
    flow_columns,
    in_words,
    md,
    run_usage,
)
from dashboard.jury_figures import stack_summary
from dashboard.labelling import jury_label
from dashboard.live_runs import RegistryError
from dashboard.mechanisms.jury.view import render_jury_whatif, render_view
from dashboard.watch import set_url_run, url_run, watch_run
from engine import judgemaps
from engine.config import ConfigError, get_settings
from engine.diagnostics import cross_validated, diagnosis_for, identical_seats, share
from engine.embeddings import EMBEDDERS
from engine.jury.config import CaseError, JuryCase, JuryConfig, Rubric, load_cases, panel_seats
from engine.jury.config import case_files as jury_case_files
from engine.jury.decisions import JurorSeat
from engine.jury.likelihood import JURY
from engine.jury.likelihood_seats import JURY_SEAT, auto_judge
from engine.jury.neighbours import JURY_NEIGHBOURS, neighbours_problem
from engine.jury.roles import JURY_ROLE, JURY_ROLES, role_slug
from engine.jury.runner import Jury, run_case
from engine.jury.view import JuryView
from models import registry as model_registry

KEY = "jury."
FORM = KEY.removesuffix(".")  # its form's marker: "jury.form_for" names the run the form shows
RUN_PANEL = "as in the attached run"  # the seats of the run the page re-attached to, when no preset has them
# The final methods and tie policies in words (short: they fit a 185 px select box)
METHOD_CHOICES = {
    "auto": "Stack (auto)",
    "stack": "Stack",
    "majority_vote": "Majority vote",
    "weighted_average": "Weighted average",
    "final_judge": "Final judge",
}
TIE_WORDS = {
    "severe": "More severe",
    "lenient": "More lenient",
    "higher_score": "Higher mean score",
    "first": "First juror",
}
THRESHOLD_SHORT = {2.0: "no agreement stop", 1.0: "unanimity", 0.67: "2 of 3", 0.5: "majority"}  # fits the box
THRESHOLDS = {
    "2.0 — agreement never stops (the stagnation stop still can)": 2.0,
    "1.0 — only unanimity stops": 1.0,
    "0.67 — a 2-of-3 majority stops": 0.67,
    "0.5 — any strict majority stops": 0.5,
}


def case_files() -> list[Path]:
    return jury_case_files(get_settings().data_dir)


def _init_state() -> None:
    st.session_state.setdefault(KEY + "run_id", None)
    st.session_state.setdefault(KEY + "error", None)


def render() -> None:
    _init_state()
    st.title("⚖️ Jury")
    st.caption(
        "A panel of AI jurors judges whether an agent's conversation is safe: each gives a verdict, they discuss, "
        "and a final judgment decides."
    )
    details = details_on(
        "jury",
        help="Show how each juror model judges and the fitted map it reads, and behind each verdict its score, "
        "confidence, axes and a likelihood juror's distribution, features and map.",
    )
    run_id = _watched_run()
    # Once a run is attached, the settings and the case picker fold away: its progress and verdict show at the
    # top of a 1440×900 window, not under an open panel.
    seats, config = _render_panel(expanded=run_id is None)
    with st.container() if run_id is None else st.expander("Case", expanded=False):
        case = _render_case()
    live = run_id is not None and state.get_registry().is_live(run_id)
    busy = seats is None or config is None or case is None or live
    if st.button(
        "Run the jury",
        type="primary",
        key=KEY + "run",
        disabled=busy,
        help="A run is going: watch it below, or cancel it" if live else None,
    ):
        assert seats is not None and config is not None and case is not None
        if handle_run(seats, config, case):
            st.rerun()  # drawn again with Run disabled while the run goes
    if st.session_state[KEY + "error"]:
        st.error(md(st.session_state[KEY + "error"], inline=False))
    if run_id:
        st.divider()
        st.caption(f"Run `{run_id}` — [open in Runs](/runs?run={run_id}) · replay it on the Replay page")
        watch_run(run_id, JuryView, lambda view, live: _render_watched(view, live, run_id, details), key=KEY + "watch")
        if not live:
            stored = state.get_store().get_run(run_id)
            if stored is not None and stored.status == "finished":
                jury_label(stored, key=KEY + "label")
            export_buttons(state.get_store(), run_id, key=KEY + "export")
            if stored is not None and stored.status == "finished":
                render_jury_whatif(stored, key=KEY + "whatif")


def _watched_run() -> str | None:
    """The run this page shows: the URL's (a reload, a shared link, a second tab), else this session's
    last one (a return visit from another page), which is put back into the URL."""
    run_id = url_run() or st.session_state[KEY + "run_id"]
    if run_id:
        st.session_state[KEY + "run_id"] = run_id
        set_url_run(run_id)
        form.restore_from(FORM, run_id, restore_form)  # first sight of this run: the form shows its settings
    return run_id


def restore_form(run_id: str) -> None:
    """Put the settings of a stored run into the form (before its widgets are drawn), so that after a reload
    the form shows the run it re-attached to and the next click runs that case, not the default one."""
    run = state.get_store().get_run(run_id)
    if run is None or not run.kind.startswith("jury"):
        return
    config = run.config
    try:
        jury = JuryConfig(**(config.get("jury") or {}))
        case = JuryCase(**(config.get("case") or {}))
        seats = [JurorSeat(**s) for s in config.get("jurors") or []]
    except (TypeError, ValueError):  # a run stored by an older version: the form keeps its own settings
        return
    values: dict[str, Any] = {
        "method": jury.final_judgment_method,
        "collaborative": jury.use_collaborative,
        "rounds": jury.max_discussion_rounds,
        "stagnation": jury.stagnation_rounds,
        "tie": jury.tie_policy,
        "parallel": jury.parallel,
        "judge": jury.judge,
        "max_tokens": jury.max_tokens,
        "veto": jury.minority_veto,
        "veto_at": jury.veto_at,
        "selective": _selective_label(jury.selective_error),
    }
    if jury.final_judge_model in state.get_catalog().ids:
        values["judge_model"] = jury.final_judge_model
    label = next((k for k, v in THRESHOLDS.items() if v == jury.consensus_threshold), None)
    if label:
        values["threshold"] = label
    form.restore({KEY + name: value for name, value in values.items()})
    rows = [
        {"model": s.model_id, "role_name": s.role_name, "role_focus": s.role_focus, "judge": s.judge or AUTO}
        for s in seats
    ]
    presets = {
        name: [p.model_dump() for p in panel]
        for name, panel in state.get_catalog().panels.items()
        if len(panel) == len(rows)
    }
    matched = next((n for n, p in presets.items() if p == rows), None)
    if matched or all(r["model"] in _seat_models() for r in rows):  # else: seats this page cannot run
        form.put(KEY + "preset", matched or RUN_PANEL)
        st.session_state[KEY + "run_panel"] = None if matched else rows
    _restore_case(case)


def _restore_case(case: JuryCase) -> None:
    for path in case_files():
        try:
            found = next((c for c in load_cases(path) if c.id == case.id and c.content == case.content), None)
        except CaseError:
            continue
        if found is not None:
            form.restore({KEY + "source": "From a file", KEY + "file": path, KEY + "case." + path.name: found})
            return
    form.restore({KEY + "source": "Paste one", KEY + "paste_title": case.title, KEY + "paste_content": case.content})


def _render_watched(view: JuryView, live: bool, run_id: str, details: bool = False) -> None:
    if view.case.get("content"):
        with st.expander(f"Case text: {md(view.case.get('title') or view.case.get('id'))}", expanded=False):
            st.text(str(view.case["content"]))
    # While the run goes, the rounds stay open and the charts wait for the end (they change with every event).
    render_view(
        view,
        key=KEY + ("live" if live else "view"),
        charts_too=not live,
        show_rounds=False if live else None,
        usage=run_usage(state.get_store(), run_id) if view.finished else None,  # shown with the finished line only
        details=details,  # the page's one Details toggle, not a second one in the view
    )


# -- controls ---------------------------------------------------------------------------------------


def _render_panel(expanded: bool = True) -> tuple[list[JurorSeat] | None, JuryConfig | None]:
    catalog = state.get_catalog()
    availability = state.get_availability()
    with st.expander("Panel and settings", expanded=expanded):
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
        edited = st.data_editor(
            pd.DataFrame(rows, columns=["model", "role_name", "role_focus", "judge"]),
            num_rows="dynamic",
            width="stretch",
            key=KEY
            + "seats."
            + (preset or "")
            + (st.session_state.get(FORM + ".form_for") or "" if preset == RUN_PANEL else ""),
            column_config={
                "model": st.column_config.SelectboxColumn("Model", options=_seat_models(), required=True),
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
        c1, c2, c3, c4 = flow_columns(4, width=185)  # two rows of two in a narrow window, not four cut ones
        method = form.choice(
            c1.selectbox,
            "Final judgment",
            list(METHOD_CHOICES),
            KEY + "method",
            help="Stack (auto): a panel whose seats judge by distributions and have a stack fitted on labelled "
            "cases is decided by it (a final judge otherwise); Stack: the stack or, without one, the majority vote.",
            format_func=METHOD_CHOICES.__getitem__,
        )
        seat_rows = [r for r in edited.to_dict("records") if isinstance(r.get("model"), str) and r.get("model")]
        stacked = _stacked(seat_rows, str(st.session_state.get(KEY + "judge", "auto")))
        asked = method == "final_judge" or (method == "auto" and not stacked)
        judge_model = form.choice(
            c1.selectbox,
            "Final judge model",
            catalog.ids,
            KEY + "judge_model",
            disabled=not asked,
            help="Asked for the final judgment: with 'Final judge', and with 'Stack (auto)' on a panel that has no "
            "stack fitted for its seats (this one " + ("has one: not asked)" if stacked else "has none: asked)"),
        )
        collaborative = form.field(
            c2.toggle,
            "Collaborative (discussion rounds)",
            KEY + "collaborative",
            initial=_env_config().use_collaborative,
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
        parallel = form.field(
            c4.toggle,
            "Parallel jurors",
            KEY + "parallel",
            initial=True,
            help="Off: jurors speak one after another (to compare wall time).",
        )
        judge = form.choice(
            c4.selectbox,
            "Jurors judge by",
            ["auto", "generate", "likelihood"],
            KEY + "judge",
            help="auto: likelihood for a base model that can score (the bundled Gemma), generate for instruction "
            "and API models; generate: each juror writes its evaluation as JSON; likelihood: its verdict comes from "
            "likelihoods (models that can score): the fitted channel map (data/calibration/) for the default "
            "labels, the calibrated likelihood of the label words for other rubrics",
        )
        used = {
            str(r.get("judge")) if r.get("judge") in ("likelihood", "generate") else _method(str(r["model"]), judge)
            for r in seat_rows
            if r.get("judge") != "neighbours"
        }
        if asked:
            used.add(_method(judge_model, judge))
        generates = "generate" in used
        max_tokens = form.field(
            c4.number_input,
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
        v1, v2, v3 = flow_columns(3, width=185)
        env = _env_config()
        options = _selective_options(st.session_state.get(KEY + "selective"), env.selective_error)
        by_stack = stacked and method in ("auto", "stack")  # the selective verdict and the veto are the stack's
        selective = form.choice(
            v1.selectbox,
            "Not sure below",
            list(options),
            KEY + "selective",
            initial=_selective_label(env.selective_error),
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
    try:
        records = [r for r in edited.to_dict("records") if isinstance(r.get("model"), str) and r.get("model")]
        seats = panel_seats(_seat_records(records))
        config = JuryConfig(
            use_collaborative=bool(collaborative),
            max_discussion_rounds=int(rounds),
            consensus_threshold=threshold,
            final_judgment_method=method,
            final_judge_model=judge_model,
            stagnation_rounds=int(stagnation),
            tie_policy=tie,
            parallel=parallel,
            max_tokens=int(max_tokens),
            judge=judge,
            selective_error=options[selective],
            minority_veto=bool(veto),
            veto_at=float(veto_at),
        )
    except (ValueError, KeyError, ConfigError) as exc:
        st.error(f"Panel: {md(exc, inline=False)}")
        return None, None
    if not seats:
        st.warning("Add at least one juror.")
        return None, None
    signal = _signal(seats, config)
    if signal:
        st.caption(md(signal))
    if st.session_state.get("details.jury", False):  # the fitted maps and their figures: research detail
        st.caption(md(breakable(_judging(seats, config))))
    needed = Jury(seats, {}, config).models_needed()
    missing = [
        f"{m}: {availability[m].reason}" for m in sorted(needed) if m in availability and not availability[m].available
    ]
    if missing:
        st.error("Unavailable: " + md("; ".join(missing)))
        return None, None
    # Seats that generate on one local model queue for it; likelihood seats share one scoring call (the
    # channel judge is role-blind), so they do not queue and the notice would mislead.
    shared_local = [
        m
        for m in needed
        if catalog.get(m).backend == "llamacpp"
        and sum(s.model_id == m for s in seats) > 1
        and _method(m, config.judge) == "generate"
    ]
    if shared_local and parallel:
        st.info(
            f"{md(', '.join(shared_local))} seats several jurors: one local model answers one call at a time, "
            "so their calls queue behind its lock (the timeline shows it). API jurors run truly in parallel."
        )
    return seats, config


AUTO = "auto (Jurors judge by)"  # a seat without a judge of its own: the 'Jurors judge by' setting


def _seat_records(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The seat editor's rows as panel_seats reads them: empty cells '', the 'as the panel says' judge ''."""
    out = []
    for r in rows:
        row = {k: ("" if pd.isna(v) else str(v)) for k, v in r.items()}
        if row.get("judge") == AUTO:
            row["judge"] = ""
        out.append(row)
    return out


SELECTIVE = {
    "always decide": None,
    "10 % error": 0.1,
    "15 % error": 0.15,
    "20 % error": 0.2,
    "25 % error": 0.25,
    "30 % error": 0.3,
}


def _selective_label(rate: float | None) -> str:
    """The option of a rate: a listed one, else its own ("12 % error"; a rate that '%' would round, to the
    digit: "0.1499999 error rate"), so a restored run's rate is not lost or changed."""
    if not rate:
        return "always decide"
    listed = next((k for k, v in SELECTIVE.items() if v == rate), None)
    if listed:
        return listed
    percent = f"{rate * 100:g}"
    return f"{percent} % error" if float(percent) / 100 == rate else f"{rate!r} error rate"


def _selective_options(*rates: object) -> dict[str, float | None]:
    """The listed rates, plus a restored run's or JURY_SELECTIVE_ERROR's own (a label or a rate)."""
    out = dict(SELECTIVE)
    for rate in rates:
        if isinstance(rate, str) and rate.endswith((" % error", " error rate")) and rate not in out:
            try:
                value = (
                    float(rate.removesuffix(" % error")) / 100
                    if rate.endswith(" % error")
                    else float(rate.removesuffix(" error rate"))
                )
            except ValueError:
                continue
            if 0 < value < 1:
                out[rate] = value
        elif isinstance(rate, float) and 0 < rate < 1:
            out.setdefault(_selective_label(rate), rate)
    return out


def _env_config() -> JuryConfig:
    """The JURY_* settings, which the page's defaults follow where it has the control (a bad value: the built-in
    defaults; the CLI names the variable)."""
    try:
        return JuryConfig.from_env()
    except ConfigError:
        return JuryConfig()


def _seat_models() -> list[str]:
    """What a seat may read with: the catalog's models and the embedders a neighbours seat uses."""
    return [*state.get_catalog().ids, *EMBEDDERS]


def _method(model_id: str, judge: str) -> str:
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


def _seat_line(seat: JurorSeat) -> str:
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


def _stacked(rows: Sequence[dict[str, Any]], judge: str) -> bool:
    """Whether these seat rows (the editor's) form a panel with a fitted stack (the final judge is then not asked)."""
    try:
        seats = panel_seats(_seat_records(rows))
        return Jury(seats, {}, JuryConfig(judge=judge)).stack_map(Rubric()) is not None
    except (ValueError, KeyError):
        return False


def _signal(seats: list[JurorSeat], config: JuryConfig) -> str:
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
        if _method(m, config.judge) != "likelihood":
            continue
        diagnosis = diagnosis_for("jury.panel" if roles else "jury.likelihood", m)
        if diagnosis is not None:
            how = ", each seat by its own role's map and the verdict by the panel map" if roles else " by likelihood"
            parts.append(f"{m}{how}: {diagnosis.label} — {diagnosis.text}")
    if (
        not roles
        and len(seats) > 1
        and len({s.model_id for s in seats}) == 1
        and _method(seats[0].model_id, config.judge) == ("likelihood")
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
        and _method(seats[0].model_id, config.judge) == "likelihood"
        and all(r in JURY_ROLES and judgemaps.load_calibration(f"{JURY_ROLE}.{r}", seats[0].model_id) for r in roles)
    )


def _judging(seats: list[JurorSeat], config: JuryConfig) -> str:
    """One line: how each model of the panel (and the final judge) judges under the chosen setting, and
    for likelihood which fitted map is in use (its held-out accuracy and the others' fitted weight)."""
    catalog = state.get_catalog()
    stack = Jury(seats, {}, config).stack_map(Rubric()) if config.final_judgment_method in ("auto", "stack") else None
    if stack is not None:
        return "Seats, each by its own fitted map, then the stack: " + "; ".join(
            [*(_seat_line(s) for s in seats), f"the verdict: the stack, calibration {stack.label} ({_cv(stack)})"]
        )
    models = dict.fromkeys(s.model_id for s in seats)
    if config.final_judgment_method == "final_judge":
        models[config.final_judge_model] = None
    parts = []
    for m in models:
        if m not in catalog.ids:
            parts.append(f"{m}: not in the catalog")
            continue
        if _method(m, config.judge) == "generate":
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


def _render_case() -> JuryCase | None:
    source = form.choice(st.radio, "Case", ["From a file", "Paste one"], KEY + "source", horizontal=True)
    if source == "Paste one":
        title = form.field(st.text_input, "Title", KEY + "paste_title", initial="My case")
        content = form.field(
            st.text_area,
            "Agent card and conversation log (or any text to judge)",
            KEY + "paste_content",
            initial="",
            height=160,
        )
        if not content.strip():
            st.info("Paste the case to judge.")
            return None
        return JuryCase(id="pasted", title=title, content=content)
    files = case_files()
    if not files:
        st.warning("No case files under data/scenarios/jury or data/benchmarks.")
        return None
    path = form.choice(st.selectbox, "File", files, KEY + "file", format_func=lambda p: p.name)
    try:
        cases = load_cases(path)
    except CaseError as exc:
        st.error(md(exc, inline=False))
        return None
    chosen = form.choice(
        st.selectbox,
        "Case",
        cases,
        KEY + "case." + path.name,
        format_func=lambda c: f"{c.id} — {c.title}" + (f" (gold: {in_words(c.gold)})" if c.gold else ""),
    )
    st.caption("Case text (what the jurors read)")
    with st.container(height=180, border=True):  # shown, in a box of its own height: the Run button stays near
        st.text(chosen.content)
        if chosen.rubric is not None:
            rubric = chosen.rubric
            st.caption(f"Own rubric: verdicts {md(', '.join(rubric.verdicts))}; axes {md(', '.join(rubric.axes))}")
    return chosen


# -- running live ---------------------------------------------------------------------------------------


def handle_run(seats: list[JurorSeat], config: JuryConfig, case: JuryCase) -> str | None:
    """Start the run in the registry (or attach to the identical one already going) and return its id at
    once; the page then watches it. Nothing here waits on a model."""
    store = state.get_store()
    hub = state.get_hub()
    jury = Jury(seats, hub.get, config)
    settings = {
        "case": case.model_dump(),
        "jurors": [s.model_dump() for s in jury.seats],
        "jury": jury.config.model_dump(),
    }
    st.session_state[KEY + "error"] = None
    try:
        run_id = state.get_registry().start("jury.run", settings, lambda: run_case(store, jury, case))
    except RegistryError as exc:  # e.g. the database refused the run: say why, nothing was lost
        st.session_state[KEY + "error"] = f"The jury run could not start: {exc}"
        return None
    st.session_state[KEY + "run_id"] = run_id
    form.shown(FORM, run_id)  # the form already shows its settings
    set_url_run(run_id)
    state.clear_reads()
    return run_id


def fold_run(run_id: str) -> JuryView:
    store = state.get_store()
    return JuryView.fold([(e.type, e.payload) for e in store.events(run_id)])


if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
