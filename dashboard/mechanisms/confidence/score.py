"""The score panel the Factors and Live tabs both draw: gauge, level, suggested action, penalties and breakdown; why a
factor does not count, and whether a live result can be trusted."""

from __future__ import annotations

import json
from collections.abc import Sequence

import streamlit as st

from dashboard.components import md
from dashboard.mechanisms.confidence import charts
from dashboard.mechanisms.confidence.fields import DETAILS
from engine.confidence.evaluation import answer_judged
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.levels import decide_action, decide_level
from engine.confidence.score import calculate, search_quality
from engine.confidence.settings import ConfidenceSettings


def not_counted(name: str, factors: ConfidenceFactors, settings: ConfidenceSettings) -> str | None:
    """Why a slider's factor does not count in the score now (None when it counts): the spec's inclusion rules
    (`engine.confidence.calculate`), in words, for the caption next to the slider."""

    search = name.startswith("search_")
    if factors.is_search_step and not search and name != "tool_success_rate":
        return "a search step's score is its search quality (and tool success)"
    if search:
        if factors.is_search_step:
            return None
        quality = search_quality(factors, settings)
        if quality > settings.include_search_quality_above:
            return None
        return (
            f"the search quality these give ({quality:.2f}) counts only above {settings.include_search_quality_above:g}"
        )
    if name == "source_agreement" and factors.source_count < settings.include_agreement_min_sources:
        return f"needs {settings.include_agreement_min_sources} or more sources (now {factors.source_count})"
    if name == "llm_self_confidence" and factors.llm_self_confidence <= settings.include_self_confidence_above:
        return f"the model's own rating counts only above {settings.include_self_confidence_above:g}"
    if name == "query_coverage" and factors.query_coverage <= settings.include_query_coverage_above:
        return f"coverage counts only above {settings.include_query_coverage_above:g}"
    if name == "tool_success_rate" and factors.tool_execution_count:
        return "the tool counts below decide it (successes / executions)"
    return None


ANSWER_JUDGES = {"llm_self_confidence": "self-confidence", "query_coverage": "query coverage"}  # in words
FACTOR_WORDS = charts.FACTOR_WORDS


def live_trust(factors: ConfidenceFactors, settings: ConfidenceSettings, flagged: Sequence[str]) -> tuple[bool, str]:
    """Whether a live result can be trusted, and the sentence that says so: which factors fell back or did not
    count, and what the score stands on. The factors that judge the answer itself (self-confidence, coverage)
    are the key ones: when none of them counts, the score rests on evidence that says nothing about whether the
    answer is right (source agreement, a tool success of 1 when no tool ran), and the result is not trustworthy."""
    score = calculate(factors, settings)
    used = {n: c for n, c in score.breakdown.items() if c.included}
    missing = []
    for name, words in ANSWER_JUDGES.items():
        if name in flagged:
            missing.append(f"its {words} could not be measured")
        elif name not in used:
            missing.append(f"its {words} did not count ({not_counted(name, factors, settings)})")

    def shown(name: str) -> str:
        if name == "tool_success" and not factors.tool_execution_count:
            return f"{FACTOR_WORDS[name]} {used[name].value:.2f}, a full mark only because no tool was used"
        return f"{FACTOR_WORDS.get(name, name)} {used[name].value:.2f}"

    rest = "; ".join(shown(n) for n in used) or "nothing"
    trusted = answer_judged(factors, settings, flagged)  # the engine's rule: the run stores the same
    if not missing:
        judged = " and ".join(ANSWER_JUDGES.values())
        return True, f"The answer was judged ({judged} both counted): the score {score.score:.3f} stands on {rest}."
    said = "; ".join(missing)
    if trusted:
        return True, f"{said[0].upper()}{said[1:]}. The score {score.score:.3f} stands on the rest: {rest}."
    level = decide_level(score.score, settings.thresholds).value
    return False, (
        f"Not trustworthy, so a person checks it (ESCALATE, not {level}): nothing judged the answer itself — "
        f"{said}. The score {score.score:.3f} rests only on {rest}. These cannot tell a right answer from a "
        "wrong one."
    )


ACTION_WORDS = {  # the engine's suggested actions ('proceed with status'), as a stakeholder reads them
    "SILENT": "go ahead without asking",
    "NOTIFY": "go ahead, and tell the user what it did",
    "CONFIRM": "ask the user to confirm before acting",
    "ESCALATE": "stop and ask the user to clarify",
}


def shown_level(trusted: bool, level: str) -> str:
    """The level the page shows: the score's, unless the result is not trustworthy — then ESCALATE (a person
    checks it), never a SILENT that reads as "fine, go ahead" next to "not trustworthy"."""
    return level if trusted else "ESCALATE"


def render_score(
    factors: ConfidenceFactors,
    settings: ConfidenceSettings,
    failed: list[str] | None = None,
    *,
    key: str,
    flagged: Sequence[str] | None = None,
) -> None:
    """The score of `factors`: gauge, level, penalties and breakdown. `key` tells the figures of the manual tab
    from the live result's (the same factors give the same figures, which Streamlit would refuse twice). A live
    result (`flagged`: its fallen-back factors) says first whether it can be trusted (`live_trust`)."""
    score = calculate(factors, settings)
    decision = decide_action(score, settings)
    thresholds = settings.thresholds.model_dump()
    trusted, sentence = live_trust(factors, settings, flagged) if flagged is not None else (True, "")
    if sentence:
        (st.success if trusted and not failed else st.warning)(md(sentence), icon="✅" if trusted else "⚠️")
    level = shown_level(trusted, decision.level.value)
    # The gauge and the figures side by side where they fit, one under the other in a narrow window (in fixed
    # columns the level was cut to 'NO…' at 900 px).
    row = st.container(horizontal=True, wrap=True, gap="medium")  # 340 + 240 + the gap fit the 620 px results
    dial, figures = row.container(width=340), row.container(width=240)
    dial.plotly_chart(
        charts.confidence_gauge(
            score.score, thresholds, level, title=None if trusted else f"ESCALATE (score says {decision.level.value})"
        ),
        key=key + ".gauge",
    )
    with figures:
        st.metric("Score", f"{score.score:.3f}", help="clamped to [0, 1], rounded to 3 decimals")
        if trusted:
            st.metric("Level", level)
            st.markdown(f"**Suggested action:** {ACTION_WORDS.get(level, decision.suggested_action)}")
            st.caption(decision.reason)
        else:
            st.metric(
                "Level",
                level,
                delta=f"the score alone: {decision.level.value}",
                delta_color="off",
                delta_arrow="off",
                help="Nothing judged the answer itself, so the score cannot say it is right: a person checks it.",
            )
            st.markdown("**Suggested action:** check the answer yourself before the agent acts on it")
    if failed:  # full width: in the gauge's column the sentences wrapped a few words a line
        st.caption("Fallbacks:  \n" + "  \n".join(md(f) for f in failed))
    if st.session_state.get(f"details.{DETAILS}", False):
        st.info(score.reason)
    st.plotly_chart(
        charts.penalty_waterfall(
            score.base,
            [p.model_dump() for p in score.penalties],
            score.score,
            {k: v.model_dump() for k, v in score.breakdown.items()},
        ),
        key=key + ".penalties",
    )
    st.plotly_chart(
        charts.breakdown_bars({k: v.model_dump() for k, v in score.breakdown.items()}), key=key + ".breakdown"
    )
    if st.session_state.get(f"details.{DETAILS}", False):
        with st.expander("Factors as JSON (for `judgelab confidence score --factors …`)"):
            st.code(json.dumps(factors.model_dump(), ensure_ascii=False), language="json")
