"""A jury run as the pages draw it — the Jury page live, the Replay page step by step: the verdict first, each seat's
card, the discussion, the final judgment, the charts, and the what-if that decides a finished run again. Every text of
a run (case, roles, verdict labels, reasoning, statements, errors) is untrusted: shown with `st.text` or escaped by
`md` inside trusted markdown, never as markdown or HTML of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st
from pydantic import ValidationError

from dashboard import demo
from dashboard.components import GLOSSARY, flow_columns
from dashboard.mechanisms.jury import charts
from dashboard.mechanisms.jury.stack_figures import stack_note
from dashboard.text import (
    BADGE,
    CONSENSUS_WORDS,
    METHOD_WORDS,
    STOP_WORDS,
    breakable,
    in_words,
    md,
    method_words,
    money,
)
from engine.diagnostics import diagnosis_for
from engine.jury.config import JuryConfig, Rubric
from engine.jury.decisions import CollaborativeJuryResult, failed_fields
from engine.jury.redecide import redecide

if TYPE_CHECKING:
    from engine.jury.view import JuryView


def _badge(verdict: object) -> str:
    return BADGE.get(verdict, "⚪") if isinstance(verdict, str) else "⚪"


def judge_quality_note(view: JuryView) -> str:
    """One case is one draw: what the jurors' judge scores over many cases (its map's stored diagnosis), so a
    single "right" is not read as a good judge."""

    stacked = stack_note(view)
    if stacked:
        return stacked
    likelihood = any(
        "likelihood" in (e.get("flags") or []) or any(str(f).startswith("likelihood") for f in e.get("flags") or [])
        for e in view.phase1
    )
    if not likelihood:
        return ""
    notes = []
    # seats that judged from their own roles: the verdict is the panel map's, so its figure is the one to read
    roles = any("role_map" in (e.get("flags") or []) for e in view.phase1)
    for model_id in dict.fromkeys(str(j.get("model_id")) for j in view.jurors):
        diagnosis = diagnosis_for("jury.panel" if roles else "jury.likelihood", model_id)
        if diagnosis is not None:
            how = "role seats and the panel map" if roles else "likelihood"
            notes.append(f"{model_id} by {how}: {diagnosis.text} ({diagnosis.label})")
    if not notes:
        return ""
    return "One case says little about the jury — over many cases, " + "; ".join(notes) + "."


def not_decided(view: JuryView) -> bool:
    """Whether the stacked panel was not sure enough to decide (the selective verdict): passed to a human."""
    return "selective:not_sure" in ((view.final or {}).get("flags") or [])


def gold_check(view: JuryView) -> bool | None:
    """Whether the final verdict matches the case's gold label; None without a gold label or a verdict, or when
    the panel did not decide (a case passed to a human is neither right nor wrong)."""
    gold = view.case.get("gold")
    if not gold or view.final is None or view.no_verdict or not_decided(view):
        return None
    return bool(view.final.get("verdict") == gold)


def seat_groups(view: JuryView) -> list[list[dict[str, Any]]]:
    """The phase-1 cards, as groups of jurors. Each juror has its own card, except on a panel whose seats are
    identical by construction (one model, one role-blind scoring call): there the seats that gave one and the same
    judgment share one card (three copies of one judgment read as independent agreement); a seat that failed
    keeps its own card, and seats still waiting for their shared call wait together."""
    if not view.identical_seats:
        return [[j] for j in view.jurors]
    by_juror = {e["juror"]: e for e in view.phase1}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for juror in view.jurors:
        e = by_juror.get(juror["juror_id"])
        if e is None:
            sig: tuple[Any, ...] = ("waiting",)
        elif e.get("fallback"):
            sig = ("failed", juror["juror_id"])
        else:
            sig = ("judged", e.get("verdict"), e.get("score"), e.get("reasoning"))
        groups.setdefault(sig, []).append(juror)
    return list(groups.values())


def token_line(view: JuryView, usage: dict[str, Any] | None = None) -> str:
    """The run's tokens, one definition on every page: the tokens of its recorded model calls (prompt, plus the
    tokens generated or, for a likelihood juror, scored), as the Runs page counts them. Without the call log
    (`usage` None) the run's own count from its last event, labelled as such."""
    if usage is not None:
        prompt, other = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        calls = int(usage.get("calls", 0))
        return (
            f"{prompt + other} tokens in {calls} model call{'s' if calls != 1 else ''} "
            f"({prompt} prompt + {other} generated or scored)"
        )
    d = view.finished or {}
    prompt, generated = int(d.get("promptTokens") or 0), int(d.get("completionTokens") or 0)
    return f"{prompt + generated} tokens ({prompt} prompt + {generated} generated)"


def render_view(
    view: JuryView,
    *,
    key: str,
    charts_too: bool = True,
    show_rounds: bool | None = None,
    stacked: bool = False,
    usage: dict[str, Any] | None = None,
    details: bool | None = None,
) -> None:
    """A fold of a jury run's events. Every text of the run (case, roles, verdict labels, reasoning, statements,
    errors) is untrusted: shown with `st.text` or escaped by `md` inside trusted markdown, never as markdown or
    HTML of its own. `stacked` puts the charts one under the other (a half-width column: side by side, their
    legends would overlap). `usage`: the run's call totals (`Store.run_totals`), the one source of its token
    count. `details`: the page's own Details toggle (one per page); None draws the view's own."""

    _render_failure(view)
    if not view.case:
        st.info("Waiting for the jury to start…")
        return
    labels = view.rubric.get("verdicts") or ["safe_pass", "needs_review", "unsafe_fail"]
    st.subheader(f"Case {md(view.case.get('id'))}: {md(view.case.get('title', ''))}")
    if view.final and not view.no_verdict:  # the outcome first: above the fold, before the cards that explain it
        right = gold_check(view)
        mark = "" if right is None else " — ✅ right" if right else " — ❌ wrong"
        if not_decided(view):
            mark = " — 🤔 not decided: passed to a human"
        st.markdown(
            f"**Verdict:** {_badge(view.final['verdict'])} **{md(in_words(view.final['verdict']))}**{mark}"
            " (phase 3 below says how it was reached)"
        )
    head, toggle = st.columns([2, 1])
    head.markdown("**Phase 1 — independent evaluations**")
    # Research detail (scores, confidence, axes, a likelihood juror's distribution, features and map) stays
    # behind one toggle per view (or the page's, when it has one), which keeps its state; the cards say the
    # verdict and why in words.
    if details is None:
        details = toggle.toggle(
            "Details",
            value=False,
            key=key + ".details",
            help="Each juror's score, confidence and axes, and what stands behind its verdict: a likelihood "
            "juror's distribution over the verdicts, its features and the fitted map.",
        )
    # Side by side where they fit, one under the other in a narrow window (squeezed, a sentence a word a line);
    # seats identical by construction share one wider card.
    groups = seat_groups(view)
    row = st.container(horizontal=True, wrap=True, gap="medium")
    by_juror = {e["juror"]: e for e in view.phase1}
    for group in groups:
        with row.container(width=300 if len(group) == 1 else 620), st.container(border=True):
            _render_seat_card(view, group, by_juror.get(group[0]["juror_id"]), details=details)
    if view.phase1_consensus and not view.identical_seats:
        c = view.phase1_consensus
        st.caption(
            f"Consensus after phase 1: **{md(in_words(c['consensusStatus'], CONSENSUS_WORDS))}** "
            f"({c['agreementLevel']:.0%} of the working jurors hold the most common verdict)"
            + (f", {c['failedSeats']} failed seat(s) not voting" if c.get("failedSeats") else "")
            + (" — reached, no discussion needed" if c["consensusReached"] else "")
        )

    _render_discussion(view, key=key, show_rounds=show_rounds, details=details)

    if view.final:
        render_final(view, details=details)
    if view.finished:
        d = view.finished
        rounds = int(d.get("totalRounds") or 0)
        st.caption(
            (f"{rounds} discussion round(s)" if rounds else "No discussion round")
            + f" — {md(in_words(d['terminationReason'], STOP_WORDS))} · {d['wallS']:.1f} s · "
            + token_line(view, usage)
            + f" · cost {money(d['cost'])}"
            + (f" · gold: {md(in_words(view.case['gold']))}" if view.case.get("gold") else "")
        )
    if charts_too:
        _render_charts(view, labels, key=key, stacked=stacked)


def _render_failure(view: JuryView) -> None:
    """Why the run stopped, when it did: a replay miss is a notice (not a fault of the jury), anything else an
    error."""
    if not view.failed:
        return
    if demo.is_miss(view.failed):  # a replay asked for what the recording lacks: not a fault of the jury
        st.info(
            "This run stopped: it asked for something the recording does not hold (demo mode and `--replay` "
            "answer only the recorded case; switch Demo off to run it live). "
            + md(str(view.failed)[:200], inline=False),
            icon="🎬",
        )
    else:
        st.error(f"Run failed: {md(view.failed, inline=False)}")


def _render_discussion(view: JuryView, *, key: str, show_rounds: bool | None, details: bool) -> None:
    """Phase 2: why no round ran, or every statement in order (with round marks when asked) and the consensus
    per round."""
    if view.skipped:
        st.markdown("**Phase 2 — discussion**")
        st.info(md(view.skipped.get("text", "No discussion round was run.")), icon="⏭️")
    if view.rounds:
        head, toggle = st.columns([2, 1])  # the toggle's label fits in a narrow window too
        head.markdown("**Phase 2 — discussion**")
        if any(
            str(stt.get("detail") or "").startswith("learned round") for r in view.rounds for stt in r["statements"]
        ):
            st.caption(
                "These rounds are computed, not spoken: no model is called. Each seat's new position is its own "
                "phase-1 reading plus the others' readings at the weight fitted on the labelled cases, so a seat "
                "moves only when it was unsure and the others are sure; each says why in words."
            )
        rounds_on = (
            show_rounds
            if show_rounds is not None
            else toggle.toggle(
                "Round numbers", value=False, key=key + ".rounds", help="Mark where each round starts and its consensus"
            )
        )
        for rnd in view.rounds:
            if rounds_on:
                st.caption(f"— round {rnd['round']} —")
            for stt in rnd["statements"]:
                render_statement(view, stt, details=details)
            if rounds_on and rnd["completed"]:
                c = rnd["completed"]
                st.caption(
                    f"consensus: {md(in_words(c['consensusStatus'], CONSENSUS_WORDS))} ({c['agreementLevel']:.0%})"
                )
        flow = [in_words(r["completed"]["consensusStatus"], CONSENSUS_WORDS) for r in view.rounds if r["completed"]]
        if flow:
            st.caption(
                "Consensus per round: "
                + md(" → ".join(flow))
                # why it ended: said once, by the line under the verdict once the run has finished
                + (
                    f" · ended: {md(in_words(view.ended['reason'], STOP_WORDS))}"
                    if view.ended and not view.finished
                    else ""
                )
            )


def _render_charts(view: JuryView, labels: list[str], *, key: str, stacked: bool) -> None:
    """The jurors' trajectory, timeline and votes; none for seats identical by construction that never
    discussed (one judgment drawn three times would read as three jurors agreeing)."""
    if view.phase1 and view.identical_seats and not view.rounds:
        # One judgment repeated: per-juror charts would draw it three times, as if three jurors had agreed.
        st.caption(
            "No per-juror charts: the seats are identical by construction and gave one judgment (the card above); "
            "charts of scores and votes are drawn for panels whose seats judge apart."
        )
    elif view.phase1:
        settled = bool(view.finished or view.ended or view.skipped)  # whether a round can still come
        figures = [(charts.jury_trajectory(view.trajectory(), settled), ".trajectory")]
        timeline = view.timeline()
        if timeline:
            figures.append((charts.jury_timeline(timeline), ".timeline"))
        figures.append((charts.jury_verdicts(view.verdicts(), [*labels, "failed"], settled), ".verdicts"))
        # Side by side where three fit; in a narrow window one under the other (squeezed, titles and legends
        # were cut). `stacked` (a half-width column) always stacks them.
        places = [st.container() for _ in figures] if stacked else flow_columns(len(figures), width=280)
        for place, (figure, suffix) in zip(places, figures, strict=False):
            place.plotly_chart(figure, key=key + suffix)


def _render_seat_card(view: JuryView, group: list[dict[str, Any]], e: dict[str, Any] | None, *, details: bool) -> None:
    """One phase-1 card: a juror's role, model, verdict and why; for a group of identical seats, their roles
    and that their one judgment is not agreement."""

    if len(group) == 1:
        st.markdown(f"**{md(group[0]['role_name'])}**")
        st.caption(md(group[0]["model_id"]))
    else:
        st.markdown(f"**{len(group)} seats, one judgment** — identical by construction")
        st.caption(md(" · ".join(j["role_name"] for j in group)) + " — all on " + md(group[0]["model_id"]))
    if e is None:
        st.caption("thinking…")
        return
    st.markdown(f"{_badge(e['verdict'])} **{md(in_words(e['verdict']))}**")
    if e.get("fallback"):
        st.warning(f"fallback (does not vote) — {md(e.get('fallbackReason'))}", icon="⚠️")
    if failed_fields(e.get("flags") or []):
        st.caption("⚠ failed fields: " + md(breakable(", ".join(failed_fields(e["flags"])))))
    _reasoning_text(e["reasoning"] or "(no reasoning)", e.get("detail") if details else "")
    if details:
        st.caption(f"score {e['score']:.0f} · confidence {e['confidence']:.2f}")
        if e.get("axes"):
            st.caption(" · ".join(f"{md(breakable(k))} {v:.0f}" for k, v in e["axes"].items()))
    if len(group) > 1:
        st.caption(
            f"The same model reads the same role-blind prompt, so one scoring call judges for all {len(group)} "
            "seats: their matching verdicts are one judgment repeated, not agreement (κ and α are not computed).",
            help=GLOSSARY["κ"],
        )


def render_final(view: JuryView, *, details: bool = True) -> None:
    """Phase 3: the verdict in a box coloured by whether it is right against the case's gold label (green
    right, red wrong, neutral without gold), the right-or-wrong mark first, as prominent as the verdict (the mark
    is in the text: no box icon beside it, which would show it twice)."""

    f = view.final or {}
    gold = view.case.get("gold")
    st.markdown("**Phase 3 — final judgment**")
    if view.no_verdict:
        st.error(
            f"⛔ **No verdict** · {md(method_words(f, view.config))} — too few jurors worked to decide"
            + (f" · gold: {md(in_words(gold))}" if gold else "")
        )
    else:
        verdict = (
            f"{_badge(f['verdict'])} **{md(in_words(f['verdict']))}** · score {f['score']:.1f} of 100 · "
            + ("read by" if not_decided(view) else "decided by")
            + f" {md(method_words(f, view.config))}"
            + ("  (tie broken)" if f.get("tie_broken") else "")
        )
        right = gold_check(view)
        flags = f.get("flags") or []
        held = next((x.split(":", 1)[1] for x in flags if x.startswith("stacked:")), "")
        if not_decided(view):
            # Not decided is neither right nor wrong: the panel passed the case to a human (the selective verdict).
            would = ""
            if gold and held:
                outcome = "right" if held == gold else "wrong"
                would = f"— its best reading, {in_words(held)}, would have been {outcome}"
            st.info(
                f"🤔 **Not decided** — passed to a human · {verdict}"
                + (f" · gold label: **{md(in_words(gold))}** {md(would)}" if gold else ""),
                icon="⚖️",
            )
        elif right is None:
            st.info(f"{verdict} · no gold label to check it against", icon="⚖️")
        elif right:
            st.success(f"✅ **Right** — matches the gold label **{md(in_words(gold))}** · {verdict}")
        else:
            st.error(f"❌ **Wrong** — the gold label is **{md(in_words(gold))}** · {verdict}")
        quality = judge_quality_note(view)
        if gold and quality:
            st.caption(md(quality))
    if f.get("reasoning"):
        st.text(f["reasoning"])
    if f.get("detail") and details:
        st.caption(md(breakable(f["detail"])))
    # How the judge worked (likelihood, which map) is detail; a flag that something failed is shown always
    warnings, informative = split_flags(f.get("flags") or [])
    if warnings:
        st.warning("Flags: " + md(breakable(", ".join(warnings))))
    if informative and details:
        st.caption("How it was judged: " + md(breakable(", ".join(informative))))


HOW_FLAGS = ("likelihood", "calibration:", "panel_map", "role_map", "stacked:", "neighbours", "selective:")
HOW_EXACT = ("stack", "minority_veto")


def split_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(warnings, informative): a flag that says how a judgment was made (likelihood, which map, the stack, the
    selective cut, a veto) is detail; any other (a fallback, a failed seat, `stack_unavailable`, `map_fallback`)
    is a warning, shown always."""
    informative = [
        x
        for x in flags
        if x.startswith(HOW_FLAGS) or x.split(":", 1)[0] in HOW_EXACT or x.split(":", 1)[-1].startswith(HOW_FLAGS)
    ]
    return [x for x in flags if x not in informative], informative


def _reasoning_text(text: str, detail: object = "") -> None:
    """A juror's reasoning or statement as plain text, and its machine detail (a likelihood juror's features,
    map and what it heard: the event's `detail`) below it, small and escaped, with break points after the
    identifiers' underscores: in a narrow card the feature names otherwise break mid-word."""

    st.text(text)
    if detail:
        st.caption(md(breakable(detail)))


def render_statement(view: JuryView, stt: dict[str, Any], *, details: bool = True) -> None:
    """One juror statement as a card: trusted badges around the statement, which is shown as plain text; its
    machine detail only with `details`."""

    badges = (" :blue-badge[立場変更 / position changed]" if stt["positionChanged"] else "") + (
        " :orange-badge[fallback]" if stt.get("evaluation", {}).get("fallback") else ""
    )
    with st.container(border=True):
        st.markdown(f"**{md(view.role(stt['juror']))}**{badges}")
        # a failed statement has no detail (not its last one's)
        _reasoning_text(stt["statement"], stt.get("detail") if details else "")
        st.caption(
            f"{_badge(stt['newVerdict'])} {md(in_words(stt['newVerdict']))} · score {stt['newScore']:.0f} of 100"
        )


# -- plain words first: research detail behind a remembered "Details" toggle -------------------------------------

# What the research terms mean, for help tooltips (one sentence each, for a reader who has not met them).
TIE_WORDS = {
    "severe": "the more severe verdict",
    "lenient": "the more lenient verdict",
    "higher_score": "the verdict with the higher score",
    "first": "the first juror's verdict",
}


def jury_whatif(run: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """The verdict the stored jury run `run` reaches under `settings` (consensus threshold, stagnation rounds,
    rounds, final method, tie policy) on its recorded calls — `engine.jury.redecide`, no model call. Returns
    {"verdict", "score", "rounds", "stop", "changed"} or {"error": why it cannot be re-decided}."""

    summary = run.summary if isinstance(run.summary, dict) else {}
    stored = summary.get("result")
    if not isinstance(stored, dict):
        return {"error": "this run stored no final result (it did not finish)"}
    try:
        result = CollaborativeJuryResult.model_validate(stored)
        base = dict(run.config.get("jury") or {})
        # the recorded rounds are all there is to replay: by default, at most those
        base["max_discussion_rounds"] = min(int(base.get("max_discussion_rounds", 3)), len(result.discussion_rounds))
        config = JuryConfig.model_validate({**base, **settings})
        case = run.config.get("case") or {}
        rubric = Rubric.model_validate(case.get("rubric") or {})
    except ValidationError as exc:
        return {"error": f"the stored run cannot be read as a jury result ({exc.errors()[0]['msg']})"}
    recorded = len(result.discussion_rounds)
    if config.max_discussion_rounds > recorded:
        return {
            "error": f"{config.max_discussion_rounds} rounds asked, {recorded} recorded: a what-if can stop "
            "earlier than the run did, never discuss longer"
        }
    try:
        derived = redecide(result, config, rubric)
    except ValueError as exc:
        return {"error": str(exc)}
    return {
        "verdict": derived.final_verdict,
        "score": derived.final_score,
        "rounds": derived.total_rounds,
        "stop": derived.termination_reason,
        "changed": derived.final_verdict != result.final_verdict,
        "not_sure": "selective:not_sure" in derived.phase3_judgment.flags,
        "recorded_rounds": len(result.discussion_rounds),
    }


def render_jury_whatif(run: Any, key: str) -> None:
    """An expander under a finished jury run: other settings, the verdict they give on the same recorded calls."""

    stored = (run.summary or {}).get("result") if isinstance(run.summary, dict) else None
    if not isinstance(stored, dict):
        return
    recorded = len(stored.get("discussion_rounds") or [])
    with st.expander("What if — decide this run again with other settings (no model call)", expanded=False):
        st.caption(
            f"The jurors' recorded answers are kept; only the stop rules and the final vote change. This run "
            f"recorded {recorded} discussion round{'s' if recorded != 1 else ''}: a what-if can stop earlier, never "
            "discuss longer; the final judge needs a model call, so only the stack (where it decided the run), the "
            "vote and the average are offered."
        )
        outcome = jury_whatif(run, _whatif_settings(run, stored, recorded, key))
        if "error" in outcome:
            st.info(f"Cannot be decided again this way: {md(outcome['error'])}")
            return
        _render_whatif_verdict(run, stored, outcome)


def _whatif_settings(run: Any, stored: dict[str, Any], recorded: int, key: str) -> dict[str, Any]:
    """The what-if's settings, starting at the run's own: the stop rules (left) and the final vote (right)."""
    base = run.config.get("jury") or {}
    c1, c2 = st.columns(2)
    thresholds = [0.34, 0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1.0, 2.0]
    current = float(base.get("consensus_threshold", 2.0))
    threshold = c1.select_slider(
        "Consensus threshold",
        thresholds,
        value=current if current in thresholds else 2.0,
        key=key + ".threshold",
        help="The share of jurors holding one position that stops the discussion (2.0: never stops on agreement).",
    )
    stagnation = c1.number_input(
        "Stop after this many rounds nobody moved", 1, 20, int(base.get("stagnation_rounds", 2)), key=key + ".still"
    )
    rounds = c1.number_input("Rounds at most", 0, max(recorded, 0), recorded, key=key + ".rounds")
    methods: list[str] = ["majority_vote", "weighted_average"]
    stored_method = str(base.get("final_judgment_method"))
    if (stored.get("phase3_judgment") or {}).get("method") == "stack":  # decided by the stack: offered first
        methods.insert(0, "stack")
        stored_method = "stack"
    method = c2.selectbox(
        "Final decision",
        methods,
        index=methods.index(stored_method) if stored_method in methods else 0,
        format_func=lambda m: METHOD_WORDS.get(m, m),
        key=key + ".method",
    )
    ties: list[str] = list(TIE_WORDS)
    stored_tie = str(base.get("tie_policy"))
    tie = c2.selectbox(
        "A tie goes to",
        ties,
        index=ties.index(stored_tie) if stored_tie in ties else 0,
        format_func=lambda t: TIE_WORDS[t],
        key=key + ".tie",
    )
    return {
        "consensus_threshold": threshold,
        "stagnation_rounds": int(stagnation),
        "max_discussion_rounds": int(rounds),
        "final_judgment_method": method,
        "tie_policy": tie,
    }


def _render_whatif_verdict(run: Any, stored: dict[str, Any], outcome: dict[str, Any]) -> None:
    """The what-if's verdict, whether it changed the run's, and how it stands against the case's gold label."""
    stored_verdict = stored.get("final_verdict")
    verdict = md(in_words(outcome["verdict"]))
    line = (
        f"**{verdict}**, after {outcome['rounds']} round{'s' if outcome['rounds'] != 1 else ''} "
        f"({md(in_words(outcome['stop'], STOP_WORDS))})"
    )
    # Plain text, not a coloured box: the run's own verdict box is the one that says right or wrong.
    gold = (run.config.get("case") or {}).get("gold")
    against = (
        " Not decided: passed to a human."
        if outcome.get("not_sure")
        else (
            f" Against the gold label ({md(in_words(gold))}): " + ("right." if outcome["verdict"] == gold else "wrong.")
        )
        if isinstance(gold, str) and gold
        else ""
    )
    if outcome["changed"]:
        st.markdown(
            f"What-if verdict: {line} — **changed**: the run itself said {md(in_words(stored_verdict))}.{against}"
        )
    else:
        st.markdown(f"What-if verdict: {line} — the same verdict as the run.{against}")
