"""Your labels on the pages: the buttons that record what the right answer was for an item a page shows (a jury
case's verdict, a director line's OK / RETRY, a confidence answer right / wrong, a skip-cache message that should
have been replied to or not), and the one line that says what you said.

Each mechanism's values are the engine's (`LabelSpec`), their words its `MechanismUI.labels` (`LabelWords`). Every
label goes through `engine.labels.add_label` (the engine owns the table and the item keys); a label's text
and note are untrusted wherever they come back (another user's import, a CSV), so they are shown with `md` or
`st.text`, never as markdown of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from dashboard import state
from dashboard.components import breakable, md, metric_row
from dashboard.mechanism_ui import LabelWords
from dashboard.ui_registry import uis
from engine.diagnostics import Diagnosis
from engine.labels import (
    LabelError,
    add_label,
    adopt_map,
    default_user,
    label_mechanisms,
    label_values,
    labelable_items,
    list_labels,
    refit_from_labels,
    save_candidate,
)
from engine.labels import refittable as refittable_mechanisms
from engine.store import StoreError

SOURCE_WORDS = {
    "approval": "your Speak / Skip",
    "override": "a verdict you set",
    "manual": "a mark you gave",
    "import": "an import",
}
SIGNIFICANT = 0.05  # a paired comparison's p below this, in the new map's favour, is "clearly better"


def label_words(mechanism: str) -> LabelWords | None:
    """The words of `mechanism`'s labels (its `MechanismUI.labels`); None when it registers none."""
    found = next((u for u in uis() if u.name == mechanism), None)
    return None if found is None else found.labels


def mechanism_titles() -> dict[str, str]:
    """Every mechanism that takes labels (the engine's, in its order) by its name on the Labels page."""
    out = {}
    for name in label_mechanisms():
        words = label_words(name)
        out[name] = words.title if words is not None else name
    return out


def mechanism_title(mechanism: str) -> str:
    """'Jury (the right verdict)'; a mechanism without one by its name. Untrusted (an imported label's)."""
    words = label_words(mechanism)
    return words.title if words is not None else mechanism


def refittable(mechanism: str) -> bool:
    """Whether `mechanism`'s judge can be refitted from labels (the engine's `LabelSpec.refit`: the hand raise)."""
    return mechanism in refittable_mechanisms()


def value_words(mechanism: str, value: object) -> str:
    """A label value in words ('Should have replied'); a jury verdict as the Jury page says it; anything else as
    written, underscores as spaces. Untrusted: put it into markdown through `md`."""
    text = "" if value is None else str(value)
    words = label_words(mechanism)
    if words is not None and words.words:
        return str(words.words(text))
    return (words.buttons if words is not None else {}).get(text, text.replace("_", " "))


def answer_words(mechanism: str, value: object) -> str:
    """A label value as a short answer ('stay quiet', 'no reply'); a jury verdict in words. Untrusted text."""
    text = "" if value is None else str(value)
    words = label_words(mechanism)
    if words is not None and words.words:
        return value_words(mechanism, text)
    return (words.answers if words is not None else {}).get(text, text.replace("_", " "))


def choices_for(mechanism: str, verdicts: Sequence[str] | None = None) -> list[str]:
    """The values a label of `mechanism` may take, in button order: the engine's, or for an open vocabulary the
    item's own (a jury case's verdicts), else its default choices (`LabelWords.choices`)."""
    values = label_values(mechanism)
    if values is None:
        words = label_words(mechanism)
        return [str(v) for v in (verdicts or (words.choices if words is not None else ()))]
    return list(values)


def mine(mechanism: str, item_key: str, run_id: str | None) -> Any | None:
    """Your latest label of one item (None when you gave none)."""
    for label in list_labels(state.get_store(), mechanism=mechanism, run_id=run_id, user=current_user()):
        if label.item_key == item_key and label.run_id == run_id:  # run_id None lists every run's labels
            return label
    return None


def current_user() -> str:
    """Who labels: settings' local user name (JUDGELAB_USER, else the OS user), as the engine stores it."""
    return default_user()


def record(
    mechanism: str,
    item_key: str,
    value: str,
    *,
    run_id: str | None,
    source: str = "manual",
    note: str = "",
    context: Mapping[str, Any] | None = None,
) -> str | None:
    """Store one label; the error's words when the engine refused it (a bad value), else None."""
    try:
        add_label(
            state.get_store(),
            mechanism=mechanism,
            item_key=item_key,
            label=value,
            run_id=run_id,
            note=note,
            source=source,
            context=dict(context or {}),
        )
    except (LabelError, StoreError) as exc:  # a bad value; a database that refuses the write (file deleted)
        return str(exc)
    return None


def run_item(run_id: str | None, key: str | None = None) -> Any | None:
    """The labelable item of a stored run (`engine.labels.labelable_items`): the one with `key`, else its first.
    Its key and context (what the judge predicted) go with the label, so the agreement view counts it."""
    if not run_id:
        return None
    run = state.get_store().get_run(run_id)
    if run is None:
        return None
    items = labelable_items(state.get_store(), run)
    return next((i for i in items if key is None or i.key == key), None)


def said_line(mechanism: str, label: Any) -> str:
    """'You said: **Should have replied** — "note"' (trusted markdown, the value and note escaped)."""
    line = f"🏷️ You said: **{md(value_words(mechanism, label.label))}**"
    if label.note:
        line += f" — “{md(label.note)}”"
    return line


def kept_words(mechanism: str) -> str:
    """What a label is for, said truly: every label measures its judge; only a mechanism whose judge records its
    features (the hand raise) can also be refitted from it."""
    refit = " and can refit it" if refittable(mechanism) else ""
    return f"kept as your label (Labels page): it measures the judge{refit}."


def label_buttons(
    mechanism: str,
    item_key: str,
    *,
    run_id: str | None,
    key: str,
    choices: Sequence[str] | None = None,
    source: str = "manual",
    context: Mapping[str, Any] | None = None,
    note: bool = True,
    prompt: str = "Your label",
) -> None:
    """One row under a result: what you said of it (if anything), a note box and one button per value. A click
    stores the label at once (a later click supersedes it; both are kept) and the line above says so."""
    values = list(choices or choices_for(mechanism))
    done = mine(mechanism, item_key, run_id)
    with st.container(border=True, key=f"{key}.box"):
        if done is not None:
            st.markdown(said_line(mechanism, done))
        else:
            st.caption(md(prompt) + " — " + kept_words(mechanism))
        if note:  # read in the callback, from the session: the box's value at the click
            st.text_input("Note (optional)", key=f"{key}.note", width=420, placeholder="why, in a few words")
        row = st.container(horizontal=True, wrap=True)
        for value in values:
            row.button(
                value_words(mechanism, value),
                key=f"{key}.{value}",
                type="primary" if done is not None and done.label == value else "secondary",
                on_click=_handle_label,
                args=(mechanism, item_key, value, run_id, source, context, f"{key}.note", f"{key}.error"),
            )
        error = st.session_state.pop(f"{key}.error", None)
        if error:
            st.error(f"Not recorded: {md(error)}")


def _handle_label(
    mechanism: str,
    item_key: str,
    value: str,
    run_id: str | None,
    source: str,
    context: Mapping[str, Any] | None,
    note_key: str,
    error_key: str,
) -> None:
    """A label button's click: store the label with the note typed beside it (what the judge said is in
    `context`, from the run's labelable item), then clear the note box."""
    note = str(st.session_state.get(note_key) or "").strip()
    error = record(mechanism, item_key, value, run_id=run_id, source=source, note=note, context=context)
    if error:
        st.session_state[error_key] = error
    else:
        st.session_state[note_key] = ""
    state.clear_reads()


def jury_label(run: Any, *, key: str) -> None:
    """Under a finished jury run (Jury page, Replay): set the right verdict for its case, with a note. Stored as
    an override of the run's final verdict; the case's own rubric gives the choices."""
    config = run.config if isinstance(run.config, dict) else {}
    case = config.get("case") or {}
    item = run_item(run.id)
    if item is None or not isinstance(case, dict):
        return
    rubric = case.get("rubric") or {}
    verdicts = rubric.get("verdicts") if isinstance(rubric, dict) else None
    st.markdown("**Was the verdict right?** Set the right verdict for this case.")
    label_buttons(
        "jury",
        item.key,
        run_id=run.id,
        key=key,
        choices=choices_for("jury", verdicts if isinstance(verdicts, list) and verdicts else None),
        source="override",
        context=item.context,
        prompt="The right verdict",
    )


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def interval_text(ci: Any, percent: bool = True) -> str:
    """'62%–81%' (or '0.41–0.70') from an interval (`engine.stats.Interval`, or a (low, high) pair); '' without
    one."""
    if hasattr(ci, "low") and hasattr(ci, "high"):
        low, high = float(ci.low), float(ci.high)
    elif isinstance(ci, list | tuple) and len(ci) == 2 and ci[0] is not None:
        low, high = float(ci[0]), float(ci[1])
    else:
        return ""
    return f"{low:.0%}–{high:.0%}" if percent else f"{low:.2f}–{high:.2f}"


# -- refit from your labels: shared by the Labels page and the Hand raise page ---------------------------------


def refit_candidate(mechanism: str, with_split: bool = False) -> dict[str, Any]:
    """`refit_from_labels` then `save_candidate`, as a plain dict the page keeps in the session:
    {mechanism, model_id, version, provenance, n_labels, folds, candidate/current score and interval, comparison}
    or {"error": why} (too few labels, one class only…)."""
    try:
        refit = refit_from_labels(state.get_store(), mechanism=mechanism, user=current_user(), with_split=with_split)
        save_candidate(refit)
    except ValueError as exc:  # LabelError and the fit's own refusals
        return {"error": f"No refit: {exc}"}
    comparison = refit.comparison
    return {
        "mechanism": mechanism,
        "model_id": refit.model_id,  # the map id: the judge model, or its ensemble's id
        "version": refit.candidate.version,
        "provenance": refit.provenance,
        "n_labels": refit.n_labels,
        "folds": refit.folds,
        "candidate": refit.candidate_score,
        "candidate_ci": refit.candidate_score_ci.as_list() if refit.candidate_score_ci else [],
        "current": refit.current_score,
        "current_ci": refit.current_score_ci.as_list() if refit.current_score_ci else [],
        "has_current": refit.current is not None,
        "comparison": comparison.to_dict() if comparison is not None else None,
        "kappa": refit.kappas(),  # κ with your labels, held out: the map in use (before) and the new map (after)
        "diagnosis": refit.candidate.metrics.get("diagnosis"),  # what the refit measured, shown before adopting
        "calibration": refit.candidate,  # for the Hand raise page's what-if (the map object, not in use)
    }


def comparison_words(c: dict[str, Any] | None) -> str:
    """The paired comparison in one sentence a stakeholder reads: better / worse / no clear difference."""
    if not c or c.get("difference") is None:
        return "No paired comparison: there is no map in use to compare with."
    diff, p = float(c["difference"]), c.get("p_value")
    n = c.get("n")
    verdict = (
        "no clear difference"
        if p is None or p >= 0.05
        else ("the new map is better" if diff > 0 else "the new map is worse")
    )
    pp = f"{diff * 100:+.0f} points"
    tail = f" (p = {p:.3g}, {c.get('test')}, {n} labels)" if p is not None else ""
    return f"On the same held-out labels: {pp}, {verdict}{tail}."


def clearly_better(refit: dict[str, Any]) -> bool:
    """Whether the new map beats the map in use on the same held-out labels, significantly (p < 0.05 and a
    positive difference); True when there is no map in use to beat."""
    c = refit.get("comparison")
    if not refit.get("has_current") or not c or c.get("difference") is None:
        return True
    p = c.get("p_value")
    return p is not None and float(p) < SIGNIFICANT and float(c["difference"]) > 0


def diagnosis_line(data: object) -> str:
    """The new map's diagnosis in one line ('✅ Beats chance — …'), from its stored dict; '' without one."""
    if not isinstance(data, dict):
        return ""
    diagnosis = Diagnosis.from_dict(data)
    return f"{diagnosis.label} — {md(diagnosis.text)}" if diagnosis.text else diagnosis.label


def render_candidate(refit: dict[str, Any], *, key: str, notice_key: str, refit_key: str) -> None:
    """The refitted map beside the one in use (same held-out labels, the paired comparison in words) and the
    button that adopts it. `notice_key` receives what happened; `refit_key` (the page's kept refit) is cleared."""
    with st.container(border=True, key=key + ".box"):
        st.markdown(f"**New map: {md(refit['provenance'])}** — saved as version {md(breakable(refit['version']))}")
        metric_row(
            [
                ("New map", pct(refit["candidate"])),
                ("Map in use", pct(refit["current"]) if refit["has_current"] else "none"),
            ],
            key=key + ".metrics",
        )
        st.caption(
            f"Agreement with you on labels each map did not learn from ({refit['folds']}-fold cross-validation"
            + (
                f"; new {interval_text(refit['candidate_ci'])}, in use {interval_text(refit['current_ci'])}"
                if refit["candidate_ci"]
                else ""
            )
            + "). "
            + comparison_words(refit["comparison"])
        )
        kappa = kappa_words(refit.get("kappa"))
        if kappa:
            st.caption(kappa)
        diagnosis = diagnosis_line(refit.get("diagnosis"))
        if diagnosis:
            st.markdown(f"Diagnosis of the new map: {diagnosis}")
        better = clearly_better(refit)
        if not better:  # still allowed: the researcher chooses, but not with the page's primary button
            st.warning(
                "Not clearly better than the map in use: "
                + comparison_words(refit["comparison"]).removeprefix("On the same held-out labels: ")
            )
        st.button(
            "Use this map",
            type="primary" if better else "secondary",
            key=key + ".adopt",
            on_click=handle_adopt,
            args=(refit["mechanism"], refit["model_id"], refit["version"], notice_key, refit_key),
        )


def kappa_words(kappa: dict[str, Any] | None) -> str:
    """'Cohen's κ with your labels: 0.12 (−0.10–0.35) before the refit → 0.48 (0.25–0.68) after', on the same
    held-out labels ('' without figures)."""
    if not kappa or not kappa.get("after") or kappa["after"].get("kappa") is None:
        return ""

    def one(k: dict[str, Any] | None) -> str:
        if not k or k.get("kappa") is None:
            return "—"
        ci = k.get("kappa_ci")
        return f"{k['kappa']:.2f}" + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")

    before = one(kappa.get("before")) if kappa.get("before") else "no map in use"
    return (
        f"Cohen's κ with your labels (agreement beyond chance, held out): {before} before the refit → "
        f"{one(kappa['after'])} after."
    )


def show_notice(notice_key: str) -> None:
    """What a refit / adopt / restore button did, beside that button (and as a toast); shown once."""
    notice = st.session_state.pop(notice_key, None)
    if not notice:
        return
    kind, text = notice
    st.toast(md(text), icon="⚠️" if kind == "error" else "✅")
    (st.error if kind == "error" else st.success)(md(text))


def handle_adopt(mechanism: str, model_id: str, version: str, notice_key: str, refit_key: str | None = None) -> None:
    """Use this map, or restore a version: it becomes the map the judge reads."""
    try:
        adopt_map(state.get_store(), mechanism, model_id, version)
    except (ValueError, OSError) as exc:
        st.session_state[notice_key] = ("error", f"The map was not changed: {exc}")
        return
    chosen = "the shipped map" if version == "shipped" else f"version {version}"
    st.session_state[notice_key] = ("success", f"Now in use for {model_id}: {chosen}.")
    if refit_key:
        st.session_state[refit_key] = None
    state.clear_reads()
