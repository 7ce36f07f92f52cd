"""Labels: your own judgments of what the judges decided. A queue draws items from stored runs (at random,
evenly over what the judge said, or where the judge was least sure) for one-click labelling with keyboard keys;
the agreement view shows how far each judge or fitted map agrees with you (confusion matrix, accuracy and κ with
their intervals, the most confidently wrong items, agreement over time); and a judge can be refitted from your
labels, compared honestly with the map in use, adopted, or an earlier version restored.

A page of its own rather than a section of Runs: labelling is a workflow (a queue, a position in it, a
refit and its versions) that would push the run history below the fold, and a page has its own URL (/labels)
that the other pages' "your labels" lines link to. Each queue item links back to its run on Runs.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import partial
from typing import Any, Literal
from urllib.parse import quote

import pandas as pd
import streamlit as st

from dashboard import charts, state
from dashboard.components import breakable, details_on, flow_columns, md, metric_row
from dashboard.label_import import IMPORT_RUN, handle_import, render_import
from dashboard.labelling import (
    SOURCE_WORDS,
    answer_words,
    choices_for,
    current_user,
    handle_adopt,
    interval_text,
    label_words,
    mechanism_title,
    mechanism_titles,
    pct,
    record,
    refit_candidate,
    refittable,
    render_candidate,
    show_notice,
    value_words,
)
from dashboard.mechanism_ui import LabelWords
from dashboard.watch import is_live
from engine.history import display_name
from engine.judgemaps import SHIPPED, is_name
from engine.labels import (
    agreement,
    count_labels,
    default_map_id,
    export_labels,
    label_queue,
    labels_needed,
    list_labels,
    map_versions,
    positive_value,
    usable_count,
)
from engine.labels.corrected import FAIR_SAMPLE, corrected_by_run, corrected_row
from engine.labels.refit import created_at

KEY = "labels."
DETAILS = "labels"
RULES = {
    "teach": "Where a label teaches most",
    "uncertainty": "Where the judge was least sure",
    "stratified": "Evenly over what the judge said",
    "random": "At random",
}
FEW = 10  # below this many labels, agreement figures are shown in grey as "too few to tell"
SURE = 0.2  # a miss this far (or farther) from the judge's cut was a confident one
SKIP_KEY = "S"  # Streamlit reserves C and R; the values take 1, 2, 3…


def _init_state() -> None:
    for name, value in (("queue", []), ("pos", 0), ("done", {}), ("refit", None)):
        st.session_state.setdefault(KEY + name, value)


def render() -> None:
    _init_state()
    st.title("🏷️ Labels")
    st.caption(
        "Say what the right answer was for items the judges decided, see how often each judge agrees with you, "
        "and refit a judge to your own standard."
    )
    details_on(
        DETAILS,
        help="Show the judges' probabilities and cuts, map versions and the figures behind each comparison.",
    )
    # Each notice shows beside the button that caused it (never above the tabs: that would shift them, and
    # Streamlit would open the first tab again).
    queue_tab, agreement_tab, list_tab = st.tabs(["Label a queue", "Agreement with you", "Your labels"])
    with queue_tab:
        _render_queue()
    with agreement_tab:
        _render_agreement()
    with list_tab:
        _render_list()


def _details() -> bool:
    return bool(st.session_state.get(f"details.{DETAILS}", False))


def run_link(run_id: object) -> str:
    """A markdown link to a run on the Runs page (the id escaped in the text and quoted in the URL)."""
    text = "" if run_id is None else str(run_id)
    return f"[{md(text)}](/runs?run={quote(text, safe='')})"


# -- the queue ----------------------------------------------------------------------------------------------------


def _render_queue() -> None:
    st.caption(
        "Draw items from your stored runs, then give each its right answer with one click, or with the keys "
        f"1, 2, 3… (the buttons say which) and {SKIP_KEY} to skip one. Items you labelled before are left out."
    )
    row = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    titles = mechanism_titles()
    row.selectbox("Mechanism", list(titles), format_func=titles.__getitem__, key=KEY + "q.mechanism", width=280)
    row.selectbox(
        "Which items",
        list(RULES),
        format_func=RULES.__getitem__,
        key=KEY + "q.rule",
        width=280,
        help="Where a label teaches most: the judge least sure, its seats split, runs where it disagreed with your "
        "labels — first. Where the judge was least sure: its probability nearest its cut. "
        "Evenly: the same number of items for each answer the judge gave. At random: a fair sample for agreement.",
    )
    row.number_input("How many", 5, 200, 20, step=5, key=KEY + "q.n", width=120)
    row.button("Draw a queue", type="primary", key=KEY + "q.draw", on_click=handle_draw)
    queue: list[Any] = st.session_state[KEY + "queue"]
    if not queue:
        if st.session_state.get(KEY + "q.drawn"):
            st.info(
                "Nothing left to label here: every stored item of this kind has your label, or no run of this kind "
                "is stored yet (run one on its page, then come back)."
            )
        return
    done: dict[str, str] = st.session_state[KEY + "done"]
    pos = int(st.session_state[KEY + "pos"])
    st.progress(len(done) / len(queue), text=f"{len(done)} of {len(queue)} done")
    asked = int(st.session_state.get(KEY + "q.asked") or 0)
    if asked > len(queue):
        st.caption(short_queue_words(len(queue), asked))
    if pos >= len(queue):
        st.success(f"Queue finished: {len(done)} of {len(queue)} labelled. Draw another, or see the agreement tab.")
        return
    _render_item(queue[pos], pos, len(queue))
    show_notice(KEY + "q.notice")


def short_queue_words(drawn: int, asked: int) -> str:
    """Why the queue is shorter than asked: only so many items you have not labelled are stored."""
    items = f"{drawn} unlabelled item{'s' if drawn != 1 else ''}"
    return f"Only {items} of this kind in the stored runs (you asked for {asked}): run more, then draw again."


def handle_draw() -> None:
    """A new queue of items you have not labelled, drawn from the stored runs by the rule chosen above (read from
    the session: the widgets' values at the click)."""
    ss = st.session_state
    mechanism, rule, size = ss[KEY + "q.mechanism"], ss[KEY + "q.rule"], ss[KEY + "q.n"]

    items = label_queue(
        state.get_store(),
        mechanism=mechanism,
        rule=rule,
        n=int(size),
        seed=random.SystemRandom().randrange(1 << 30),  # a new draw each time; the engine's draw is seeded by it
        user=current_user(),
    )
    st.session_state[KEY + "queue"] = list(items)
    st.session_state[KEY + "pos"] = 0
    st.session_state[KEY + "done"] = {}
    st.session_state[KEY + "q.drawn"] = True
    st.session_state[KEY + "q.asked"] = int(size)


def _render_item(item: Any, pos: int, total: int) -> None:
    with st.container(border=True, key=KEY + "item"):
        st.markdown(f"**Item {pos + 1} of {total}** · {md(mechanism_title(item.mechanism))}")
        context = item.context if isinstance(item.context, dict) else {}
        words = label_words(item.mechanism)
        question = words.question if words is not None else ""  # the hand raise's "Should **coder** speak …?"
        if question and context.get("participant"):
            st.markdown(question.format(participant=md(context["participant"])))
        message = context.get("text") if question else None
        st.text(str(message or item.text or item.key))
        judged = (
            f"The judge's answer: **{md(answer_words(item.mechanism, item.predicted))}**"
            if item.predicted is not None
            else "The judge gave no answer for this item"
        )
        if _details() and item.probability is not None:
            judged += f" (probability {item.probability:.2f}" + (
                f", cut {item.cut:.2f})" if item.cut is not None else ")"
            )
        st.markdown(judged + (f" · run {run_link(item.run_id)}" if item.run_id else ""))
        if _details():
            st.caption(f"item {md(breakable(item.key))}")
        verdicts = (item.context or {}).get("verdicts") if isinstance(item.context, dict) else None
        values = choices_for(item.mechanism, verdicts if isinstance(verdicts, list) else None)
        row = st.container(horizontal=True, wrap=True)
        for i, value in enumerate(values[:9]):
            row.button(
                value_words(item.mechanism, value),
                key=f"{KEY}q.value.{i}",
                shortcut=str(i + 1),
                type="primary",
                on_click=handle_queue_label,
                args=(item, value),
            )
        row.button("Skip this one", key=KEY + "q.skip", shortcut=SKIP_KEY, on_click=handle_queue_skip)


def handle_queue_label(item: Any, value: str) -> None:
    context = dict(item.context or {})
    context.setdefault("predicted", item.predicted)
    if item.probability is not None:
        context.setdefault("probability", item.probability)
    if item.cut is not None:
        context.setdefault("cut", item.cut)
    error = record(item.mechanism, item.key, value, run_id=item.run_id, source="manual", context=context)
    if error:
        st.session_state[KEY + "q.notice"] = ("error", f"Not recorded: {error}")
        return
    st.session_state[KEY + "done"] = {**st.session_state[KEY + "done"], f"{item.run_id}/{item.key}": value}
    st.session_state[KEY + "pos"] = int(st.session_state[KEY + "pos"]) + 1


def handle_queue_skip() -> None:
    st.session_state[KEY + "pos"] = int(st.session_state[KEY + "pos"]) + 1


# -- agreement ----------------------------------------------------------------------------------------------------


def _render_agreement() -> None:
    st.caption(
        "How often each judge said what you said, on the items you labelled. Chance agreement is taken out in κ: "
        "1 is full agreement, 0 is what guessing with the same base rates would give."
    )
    row = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    titles = mechanism_titles()
    mechanism = row.selectbox(
        "Mechanism", list(titles), format_func=titles.__getitem__, key=KEY + "a.mechanism", width=280
    )
    results = agreement(state.get_store(), mechanism=mechanism, user=current_user())
    if not results:
        st.info(
            "No labels of yours for this mechanism yet: label a queue, or give your answer on its page "
            "(a Speak or Skip on the Hand raise page counts)."
        )
    else:
        judges = [r.judge for r in results]
        judge = row.selectbox("Judge or map", judges, key=KEY + "a.judge", width=360) if len(judges) > 1 else judges[0]
        _render_one(next(r for r in results if r.judge == judge), mechanism)
        _render_corrected_runs(mechanism)
    if refittable(mechanism):
        st.divider()
        _render_refit(mechanism)


def _render_one(a: Any, mechanism: str) -> None:
    st.caption(f"Judge or map: {md(breakable(a.judge))}")
    if a.n < FEW:  # a bold "100 % · κ 1.00" on three labels says more than they can
        metric_row([("Your labels", a.n)], key=KEY + "a.metrics")
        st.caption(tiny_sample_words(a))
    else:
        _agreement_metrics(a)
    parts = []
    if interval_text(a.accuracy_ci):
        parts.append(f"agreement between {interval_text(a.accuracy_ci).replace('–', ' and ')}")
    if interval_text(a.kappa_ci):
        parts.append(f"κ between {interval_text(a.kappa_ci, percent=False).replace('–', ' and ')}")
    if parts:
        st.caption(f"With 95 % confidence, on {plural(a.n, 'label')}: " + "; ".join(parts) + ".")
    left, right = flow_columns(2, width=440)  # side by side at 1440 px, one under the other at 900 px
    with left:
        st.markdown("**What you said, against what the judge said**")
        st.dataframe(confusion_frame(a.confusion, a.labels, mechanism), width="stretch")
    with right:
        st.markdown("**Base rates**")
        st.dataframe(base_rates_frame(a.base_rates, mechanism), hide_index=True, width="stretch")
    _render_wrong(list(a.confidently_wrong or []), mechanism)
    over = list(a.over_time or [])
    if len(over) > 1:
        st.plotly_chart(charts.agreement_over_time(over), key=KEY + "a.time")
    else:
        st.caption("Agreement over time appears once your labels span more than one day (or ten labels).")


def _render_corrected_runs(mechanism: str) -> None:
    """Each run you labelled: the judge's rate over it, your labels' and the two combined (PPI++) — the Runs page
    shows the same for one run."""
    found = corrected_by_run(state.get_store(), mechanism, current_user())
    if not found:
        return
    st.markdown("**The judge's rate over each run you labelled, corrected by your labels**")
    shares = sorted({rate.value for _, rate in found})
    st.caption(
        f"The share of {md(' / '.join(shares))} over each run. The judge's rate is what it said over all of a run's "
        "items; yours, what you said on the items you labelled; the corrected rate combines both (PPI++), its 95 % "
        "interval carrying both uncertainties. " + FAIR_SAMPLE
    )
    rows = [
        {"run": display_name(run), **{k: v for k, v in corrected_row(rate).items() if k != "share of"}}
        | {"open": f"/runs?run={run.id}"}
        for run, rate in found
    ]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        key=KEY + "a.corrected",
        column_config={"open": st.column_config.LinkColumn("open", display_text="open run")},
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def tiny_sample_words(a: Any) -> str:
    """Below FEW labels: the figures in grey, with why they are not a verdict."""
    kappa = "—" if a.kappa is None else f"{a.kappa:.2f}"
    return f":gray[Agreement {pct(a.accuracy)} · κ {kappa}] — too few to tell ({plural(a.n, 'label')})"


def wrong_title(wrong: list[dict[str, Any]]) -> str:
    """'Surest, and wrong' only when every miss shown was far from the judge's cut; else said as it is."""
    margins = [r.get("margin") for r in wrong]
    if not wrong or any(m is None for m in margins):
        return "Where the judge was wrong"
    if all(float(m) >= SURE for m in margins if m is not None):
        return "Where the judge was surest, and wrong"
    return "Where the judge was wrong, farthest from its cut first"


def _render_wrong(wrong: list[dict[str, Any]], mechanism: str) -> None:
    st.markdown(f"**{wrong_title(wrong)}**")
    if not wrong:
        st.caption("The judge matched every one of your labels.")
        return
    near = sum(1 for r in wrong if r.get("margin") is not None and float(r["margin"]) < SURE)
    if near:
        st.caption(f"{plural(near, 'item')} within {SURE:.2f} of the judge's cut: close calls, not confident mistakes.")
    st.dataframe(
        wrong_frame(wrong[:20], mechanism),
        hide_index=True,
        width="stretch",
        column_config={
            "run": st.column_config.LinkColumn("run", display_text=r"run=(.*)$", width=250),
            "text": st.column_config.TextColumn("item", width="medium"),
            "probability": st.column_config.NumberColumn(
                "judge's probability",
                format="%.2f",
                width=90,
                help=f"The judge's probability of “{positive_words(mechanism)}”: near 0 or 1, it was sure.",
            ),
            "from cut": st.column_config.NumberColumn(
                "distance from cut",
                format="%.2f",
                width=90,
                help="How far the probability was from the judge's cut: near 0, a close call.",
            ),
        },
    )


def _agreement_metrics(a: Any) -> None:
    metric_row(
        [
            ("Your labels", a.n),
            {
                "label": "Agreement",
                "value": pct(a.accuracy),
                "help": "The share of your labels the judge matched, with its 95 % (Wilson) interval below.",
            },
            {
                "label": "κ (beyond chance)",
                "value": "—" if a.kappa is None else f"{a.kappa:.2f}",
                "help": "Cohen's κ: agreement beyond what chance would give with these base rates (bootstrap "
                "interval below).",
            },
        ],
        key=KEY + "a.metrics",
    )


def positive_words(mechanism: str) -> str:
    """The value a judge's probability is for ('Should speak'), in words."""
    return value_words(mechanism, positive_value(mechanism))


def confusion_frame(confusion: dict[str, dict[str, int]], labels: list[str], mechanism: str) -> pd.DataFrame:
    """Rows: what you said; columns: what the judge said; cells: counts (every value both ways, zeros too)."""
    values = [str(v) for v in labels]
    words = {v: answer_words(mechanism, v) for v in values}
    rows = {
        f"You: {words[t]}": {f"Judge: {words[p]}": int((confusion.get(t) or {}).get(p, 0)) for p in values}
        for t in values
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def base_rates_frame(base_rates: dict[str, Any], mechanism: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"answer": answer_words(mechanism, v), "you": pct(pair[0]), "judge": pct(pair[1])}
            for v, pair in base_rates.items()
        ]
    )


def wrong_frame(rows: list[dict[str, Any]], mechanism: str) -> pd.DataFrame:
    """The judge's most confident misses: what you said, what it said, how sure it was, the item, its run."""
    return pd.DataFrame(
        [
            {
                "you said": answer_words(mechanism, r.get("label")),
                "judge said": answer_words(mechanism, r.get("predicted")),
                "probability": r.get("probability"),
                "from cut": r.get("margin"),
                "text": str(r.get("text") or r.get("key") or ""),
                "run": f"/runs?run={quote(str(r['run_id']), safe='')}" if r.get("run_id") else None,
            }
            for r in rows
        ]
    )


# -- refit --------------------------------------------------------------------------------------------------------


def _render_refit(mechanism: str) -> None:
    st.subheader("Refit the judge from your labels")
    st.caption(
        "Fits a new map on your labels, tests it on labels it did not see beside the map in use, and saves it as a "
        "new version. Nothing changes until you press “Use this map”; any earlier version can be restored."
    )
    row = st.container(horizontal=True, wrap=True, vertical_alignment="center")
    row.toggle(
        "Also learn from the shipped examples",
        key=KEY + "r.split",
        help="Off: your labels only. On: your labels plus the split the shipped map was fitted on.",
    )
    usable = usable_labels(mechanism)
    row.button(
        "Refit from my labels",
        type="primary",
        key=KEY + "r.go",
        on_click=handle_refit,
        args=(mechanism,),
        disabled=usable < labels_needed(mechanism),
    )
    row.caption(usable_words(mechanism, usable))
    show_notice(KEY + "r.notice")
    refit = st.session_state[KEY + "refit"]
    if refit is not None and refit.get("mechanism") == mechanism:
        render_candidate(refit, key=KEY + "r", notice_key=KEY + "r.notice", refit_key=KEY + "refit")
    render_versions(mechanism, key=KEY + "v")


def usable_labels(mechanism: str) -> int:
    """Your labels a refit can learn from, counted by the mechanism's own count (its `LabelSpec.usable`: the hand
    raise's counts the rows its fit reads)."""
    return usable_count(mechanism, list_labels(state.get_store(), mechanism=mechanism, user=current_user()))


def usable_words(mechanism: str, usable: int) -> str:
    """Beside the refit button: how many of your labels it can use, against the number it needs, in the
    mechanism's words (its `LabelWords.usable` and `usable_why`)."""
    needed = labels_needed(mechanism)
    words = label_words(mechanism) or LabelWords(mechanism)
    why = f" ({words.usable_why})" if words.usable_why else ""
    if usable < needed:
        return f"{usable} of {needed} {words.usable}{why}"
    why = f"; {words.usable_why}" if words.usable_why else ""
    return f"{usable} {words.usable} (at least {needed} needed{why})"


def handle_refit(mechanism: str) -> None:
    """Fit a candidate on your labels and save it as a version not in use; the page shows it beside the current."""
    with_split = bool(st.session_state.get(KEY + "r.split"))
    st.session_state[KEY + "refit"] = refit_candidate(mechanism, with_split)
    if "error" in st.session_state[KEY + "refit"]:
        st.session_state[KEY + "r.notice"] = ("error", st.session_state[KEY + "refit"]["error"])
        st.session_state[KEY + "refit"] = None


def render_versions(mechanism: str, *, key: str) -> None:
    """The judge's map versions, newest first, the one in use marked; one can be restored."""
    model_id = _refit_model(mechanism)
    if model_id is None:
        return
    try:
        versions = list(reversed(map_versions(mechanism, model_id)))  # newest first
    except ValueError as exc:  # a map id that is not one (LabelError, one line)
        st.error(md(str(exc)))
        return
    if not versions:
        return
    fallback = next((v.fallback for v in versions if v.fallback), "")
    if fallback:
        row = st.container(horizontal=True, wrap=True, vertical_alignment="center")
        row.warning(
            md(
                f"The map chosen for this judge cannot be read ({fallback}), so the judge reads the shipped map. "
                "Make that the choice, or restore a version below."
            ),
            width="stretch",
        )
        row.button(
            "Use the shipped map",
            key=key + ".shipped",
            on_click=handle_adopt,
            args=(mechanism, model_id, SHIPPED, KEY + "v.notice"),
            help="Rewrites the choice of map (in_use.json) so the judge reads the shipped map without a warning.",
        )
    damaged = sum(1 for v in versions if v.damaged)
    title = f"Map versions for {md(model_id)} ({len(versions)}" + (f", {damaged} damaged)" if damaged else ")")
    with st.expander(title, expanded=bool(damaged or fallback)):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "in use": bool(v.in_use),
                        "version": str(v.version),
                        "made": made(v),
                        "what it learnt from": f"damaged: {v.damaged}" if v.damaged else str(v.provenance or ""),
                    }
                    for v in versions
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        older = [str(v.version) for v in versions if not v.in_use and not v.damaged]  # a damaged one: never adopted
        if older:
            row = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
            chosen = row.selectbox("Version", older, key=key + ".pick", width=320)
            row.button(
                "Restore this version",
                key=key + ".restore",
                on_click=handle_adopt,
                args=(mechanism, model_id, chosen, KEY + "v.notice"),
            )
    show_notice(KEY + "v.notice")  # below the versions, open or closed


def made(version: Any) -> str:
    """When a map version was made, as people read it ('2026-11-26 03:40 UTC'); as stored when unreadable."""
    moment = created_at(version)
    if moment is None and version.damaged:  # a damaged file's time is its name's (20261127T101010Z[-2])
        moment = created_at(replace(version, created=str(version.version)[:16]))
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment is not None else str(version.created or "")


def _refit_model(mechanism: str) -> str | None:
    """The map a refit of `mechanism` replaces: the refit's own, else the map your latest label was judged
    through, else the mechanism's default (its `LabelSpec.default_map`: the hand raise's is the Conversation
    page's default judge, with its default partners)."""
    refit = st.session_state.get(KEY + "refit")
    if refit and refit.get("mechanism") == mechanism:
        return str(refit["model_id"])
    for label in reversed(list_labels(state.get_store(), mechanism=mechanism, user=current_user())):
        if is_name(label.context.get("map_id")):  # a label's map id that is not a name is never read as one
            return str(label.context["map_id"])
    return default_map_id(mechanism, state.get_catalog().ids)


# -- the list -----------------------------------------------------------------------------------------------------


def _render_list() -> None:
    store = state.get_store()
    titles = mechanism_titles()
    mechanism = st.selectbox(
        "Mechanism",
        ["", *titles],
        format_func=lambda m: titles.get(m, "All mechanisms"),
        key=KEY + "l.mechanism",
        width=320,
    )
    labels = list_labels(store, mechanism=mechanism or None)
    st.caption(
        f"{count_labels(store, mechanism=mechanism or None)} labels in all (the latest per item and person); "
        "the newest 500 below. Download them all, or add labels from a file (JSONL or CSV, as exported)."
    )
    _render_files(labels, mechanism)
    labels = labels[-500:][::-1]  # newest first
    if not labels:
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "when": lab.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                    "mechanism": mechanism_title(lab.mechanism).split(" (")[0],
                    "item": lab.item_key,
                    "label": answer_words(lab.mechanism, lab.label),
                    "note": lab.note,
                    "from": SOURCE_WORDS.get(lab.source, lab.source),
                    "who": lab.user,
                    "run": f"/runs?run={quote(lab.run_id, safe='')}" if lab.run_id else None,
                }
                for lab in labels
            ]
        ),
        hide_index=True,
        width="stretch",
        column_config={"run": st.column_config.LinkColumn("run", display_text=r"run=(.*)$")},
    )


def _render_files(labels: list[Any], mechanism: str) -> None:
    """Download every label shown (JSONL, CSV), and import a file: every row checked first, all or nothing."""
    row = st.container(horizontal=True, wrap=True, vertical_alignment="bottom")
    name = f"labels-{mechanism or 'all'}"
    formats: tuple[tuple[Literal["jsonl", "csv"], str], ...] = (("jsonl", "application/jsonl"), ("csv", "text/csv"))
    for fmt, mime in formats:
        row.download_button(
            f"⬇ {fmt.upper()}",
            partial(export_labels, labels, fmt),
            file_name=f"{name}.{fmt}",
            mime=mime,
            key=f"{KEY}l.export.{fmt}",
            on_click="ignore",
            disabled=not labels,
        )
    upload = st.file_uploader("Import labels (JSONL or CSV)", type=["jsonl", "csv"], key=KEY + "l.upload")
    live = is_live(st.session_state.get(IMPORT_RUN))
    if upload is not None and st.button(
        "Import",
        key=KEY + "l.import",
        disabled=live,
        help="An import is going: watch it below, or cancel it" if live else None,
    ):
        handle_import(upload.name, upload.getvalue())
    render_import()
