"""The Batch tab: a script (uploaded or shipped) judged line by line by the rules, retuned at once by the thresholds,
optionally with the rubric scored once by a model; its counts, table, hit rates and your marks of its rows."""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from dashboard import formstate as form
from dashboard import state
from dashboard.components import md, metric_row
from dashboard.labelling import label_buttons, run_item
from dashboard.mechanisms.director import charts
from dashboard.mechanisms.director.fields import BATCH_PARAM, BATCH_RUN, KEY
from dashboard.mechanisms.director.pickers import model_picker, rubric_judge_picker
from dashboard.mechanisms.director.runs import start_run
from dashboard.mechanisms.director.words import STATUS_COLORS
from dashboard.watch import Collected, is_live, start_error, watch_run, watched_run
from engine.config import get_settings
from engine.director.batch import (
    ScriptConfig,
    ScriptVerdict,
    hit_rates,
    retune_script,
    run_script,
    script_verdicts,
    share_text,
)
from engine.director.config import DirectorConfig
from engine.director.scripts import ScriptError, ScriptLine, parse_script
from engine.inputs import InputError, read_text, read_upload, shown_problems
from engine.labels import item_key


def _retune_controls() -> DirectorConfig:
    d = DirectorConfig()
    with st.expander("Retune thresholds (statuses update instantly, no model calls)", expanded=True):
        c1, c2, c3 = st.columns(3)
        number = c1.number_input
        warn_lines = form.field(
            number, "Format: WARN from lines", KEY + "warn_lines", 1, 50, initial=d.format_warn_lines
        )
        retry_lines = form.field(
            number, "Format: RETRY from lines", KEY + "retry_lines", 1, 50, initial=d.format_retry_lines
        )
        number = c2.number_input
        tone_pass = form.field(number, "Tone: PASS from score", KEY + "tone_pass", 0, 3, initial=d.tone_pass)
        tone_warn = form.field(number, "Tone: WARN from score", KEY + "tone_warn", 0, 3, initial=d.tone_warn)
        number = c3.number_input
        rubric_pass = form.field(
            number, "Rubric: PASS from average", KEY + "r_pass", 1.0, 5.0, initial=d.rubric_pass, step=0.1
        )
        rubric_warn = form.field(
            number, "Rubric: WARN from average", KEY + "r_warn", 1.0, 5.0, initial=d.rubric_warn, step=0.1
        )
        mend = form.field(
            st.toggle,
            "Mend what the director can (MODIFY)",
            KEY + "mend",
            initial=d.mend,
            help="On: a line that passes but for being too long, a praise word said alone or a doubled ！ is shown "
            "mended (MODIFY, the mended line in its own column). Off: shown as written, PASS or WARN.",
        )
    try:
        return DirectorConfig(
            format_warn_lines=int(warn_lines),
            format_retry_lines=int(retry_lines),
            tone_pass=int(tone_pass),
            tone_warn=int(tone_warn),
            rubric_pass=float(rubric_pass),
            rubric_warn=float(rubric_warn),
            mend=bool(mend),
        )
    except ValueError as exc:
        st.error(f"Invalid thresholds, using the defaults: {str(exc).splitlines()[-1]}")
        return d


# The lines a page judges and tables at once: a 10 MB script of short lines (655 360) took 5.7 GB in the page's
# cached verdicts and table; the whole script is judged by the batch run (`run_script`), which stays under 1 GB.
PAGE_LINES = 20_000


def render_batch(profiles: dict[str, Any]) -> None:
    """The Batch tab: a script and the character of its rows that name none; its first `PAGE_LINES` lines judged
    by the rules, retuned by the thresholds and the rubric's averages — their counts and table, the rules' hit
    rates, and your marks of its rows."""
    upload = st.file_uploader(
        "Script (CSV with a `text` column, or JSONL of {text, id?, character?})",
        type=["csv", "jsonl"],
        key=KEY + "upload",
    )
    default = form.choice(
        st.selectbox,
        "Character for rows that name none",
        list(profiles),
        KEY + "batch_character",
        format_func=lambda c: profiles[c].name,
    )
    script = _read_script(upload, profiles)
    if script is None:
        return
    lines, source = script
    shown = lines[:PAGE_LINES]
    if len(lines) > PAGE_LINES:
        st.info(
            f"This script has {len(lines):,} lines: the table, the counts and the retuning below cover its first "
            f"{PAGE_LINES:,} (a browser table of every line would take gigabytes). Record the whole script with "
            "**Record the rules only** below — a stored run with every line's verdict, its counts and hit rates, "
            "exportable — or `judgelab director batch --file …`."
        )
    verdicts = _batch_verdicts(tuple(shown), default)
    cfg = _retune_controls()
    averages = _render_batch_rubric(lines, default, source)
    frame = _render_batch_table(verdicts, averages, cfg)
    _render_hit_rates(verdicts)
    _render_row_marks(frame)


def _read_script(upload: UploadedFile | None, profiles: dict[str, Any]) -> tuple[list[ScriptLine], str] | None:
    """The script's lines and its name: the upload, else the shipped beach.jsonl. None, with the error shown, when
    nothing can be imported (unreadable, bad rows, or a character the page does not know)."""
    kind: Literal["csv", "jsonl"]
    if upload is not None:
        try:
            content = read_upload(upload.name, upload.getvalue())
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return None
        kind, source = ("csv" if upload.name.lower().endswith(".csv") else "jsonl"), upload.name
    else:
        path = get_settings().data_dir / "scripts" / "beach.jsonl"
        try:
            content, kind, source = read_text(path), "jsonl", path.name
        except InputError as exc:
            st.error(f"Nothing imported: {exc}")
            return None
    try:
        lines = parse_script(content, kind, source)
    except ScriptError as exc:
        st.error(
            "Nothing imported — fix these rows:\n\n" + "\n".join(f"- {md(p)}" for p in shown_problems(exc.problems))
        )
        return None
    unknown = sorted({ln.character for ln in lines if ln.character and ln.character not in profiles})
    if unknown:
        st.error(f"Unknown characters: {md(', '.join(unknown))} — add data/characters/<id>.yaml. Nothing imported.")
        return None
    return lines, source


def _render_batch_table(
    verdicts: list[ScriptVerdict], averages: dict[str, float | None], cfg: DirectorConfig
) -> pd.DataFrame:
    """The lines retuned by `cfg` and the rubric's `averages`: the counts of each status, then the table (the
    mended line in a column only when one is shown mended, why beside each status). The table's frame, for the
    row marks under it."""
    frame = pd.DataFrame(retune_script(verdicts, averages, cfg))
    if "mended" in frame and frame["mended"].isna().all():
        frame = frame.drop(columns="mended")  # a column only when a line is shown mended (MODIFY)
        if cfg.mend:
            st.caption(
                "No line of this script can be mended by the director (MODIFY): each flagged line also has a WARN "
                "it does not mend, such as the tone. Upload a script to see the switch at work."
            )
    elif "mended" in frame:
        frame["mended"] = frame["mended"].fillna("")  # blank, not "None", for the lines shown as written
    frame.columns = [str(c).replace("_", " ") for c in frame.columns]  # the rules' names in words
    frame.insert(int(frame.columns.get_loc("status")) + 1, "why", flagged_rules(frame))
    counts = frame["status"].value_counts()
    metric_row(
        [
            ("Lines", len(frame)),
            *((status, int(counts.get(status, 0))) for status in ("PASS", "WARN", "MODIFY", "RETRY")),
            ("Changed by retuning", int((frame["status"] != frame["default status"]).sum())),
        ]
    )
    # Many columns (a line's every rule): wider than a 900 px window. The line's id, its status and why stay
    # pinned at the left while the rules scroll past; the text is cut to its column (the whole line on hover).
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        key=KEY + "batch_table",
        column_config={
            "id": st.column_config.TextColumn("id", pinned=True, width=70),
            "status": st.column_config.TextColumn("status", pinned=True, width=70),
            "text": st.column_config.TextColumn("text", width=260),
            "why": st.column_config.TextColumn("why", pinned=True, width=120, help="the rules at WARN or RETRY"),
        },
    )
    return frame


def _render_hit_rates(verdicts: list[ScriptVerdict]) -> None:
    """How often each rule said WARN or RETRY over these lines: the bars, and their figures with intervals."""
    rates = hit_rates([v.verdict for v in verdicts])
    st.plotly_chart(charts.rule_hit_rates(rates))
    fired = [
        f"{rule.replace('_', ' ')}: warn {share_text(rate, 'warn')}, retry {share_text(rate, 'retry')}"
        for rule, rate in rates.items()
        if rate["warn"] or rate["retry"]
    ]
    if fired:  # the figures the bars show, with their 95 % Wilson intervals over this script's lines
        st.caption("Hit rates (95 % interval over these lines) — " + " · ".join(md(f) for f in fired))


DIRECTOR_LABEL = {"PASS": "ok", "WARN": "ok", "RETRY": "retry"}  # what a status predicts, as a label value


def _render_row_marks(frame: pd.DataFrame) -> None:
    """OK / RETRY marks on the batch's rows: pick a row, mark it. Kept with the recorded batch run when there is
    one (so the Labels page links it), else as labels of this script's rows."""
    run_id = watched_run(BATCH_PARAM, BATCH_RUN)
    if frame.empty:
        return
    with st.expander("Mark rows OK or RETRY (your labels)", expanded=False):
        if not run_id:
            st.caption(
                "Record the batch (“Record the rules only” under “LLM rubric for every line”, above) to keep your "
                "marks with its run; until then they are kept with no run."
            )
        index = st.selectbox(
            "Row",
            range(len(frame)),
            key=KEY + "mark_row",
            format_func=lambda i: (
                f"{frame.iloc[i]['id']} · {frame.iloc[i]['status']} · {str(frame.iloc[i]['text'])[:70]}"
            ),
        )
        row = frame.iloc[index]
        st.text(str(row["text"]))
        key = item_key("director", row=row["id"])
        recorded = run_id if run_id and not is_live(run_id) else None
        item = run_item(recorded, key) if recorded else None
        status = str(row["status"])
        label_buttons(
            "director",
            key,
            run_id=item.run_id if item is not None else None,
            key=KEY + "row_label",
            context=item.context
            if item is not None
            else {"predicted": DIRECTOR_LABEL.get(status), "status": status, "judge": "director.rules"},
            prompt=f"Your mark of line {row['id']}",
        )


def flagged_rules(frame: pd.DataFrame) -> pd.Series:
    """Per line, the rules at WARN or RETRY, named ('tone, praise'): a status in the table says why at once,
    without reading across a dozen rule columns. Vectorised: a script has up to `PAGE_LINES` lines."""
    rules = [
        c
        for c in frame.columns
        if c not in ("status", "default status") and len(frame) and frame[c].isin(list(STATUS_COLORS)).all()
    ]
    if not rules or frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    hits = frame[rules].isin(["WARN", "RETRY"])
    return hits.dot(pd.Index(rules) + ", ").str.rstrip(", ")


def _render_batch_rubric(lines: list[ScriptLine], default: str, source: str) -> dict[str, float | None]:
    """Record the batch as a `director.batch` run — rules only, or with the rubric scored once by a model —
    whose averages the cut-offs above then re-decide without new calls. The run goes in the registry; the
    page watches it (progress, Cancel) and takes its averages from the stored result once it has finished."""
    run_id = watched_run(BATCH_PARAM, BATCH_RUN)
    live = is_live(run_id)
    averages: dict[str, float | None] = {}
    with st.expander("LLM rubric for every line (optional)", expanded=bool(run_id)):
        model_id = model_picker(KEY + "batch_model")
        rubric_judge_picker(KEY + "batch_rubric_judge", model_id)
        st.caption("Lines the rules already mark RETRY are not scored, as in a live review.")
        score, record = st.columns(2)
        busy = "A batch is going: watch it below, or cancel it" if live else None
        if score.button("Score the rubric", key=KEY + "batch_score", disabled=model_id is None or live, help=busy):
            if handle_batch(lines, default, source, model_id):
                st.rerun()  # drawn again with the buttons off while the run goes
        if record.button("Record the rules only", key=KEY + "batch_record", disabled=live, help=busy):
            if handle_batch(lines, default, source, None):
                st.rerun()
        start_error(BATCH_RUN)
        if run_id:
            view = watch_run(run_id, Collected, _render_batch_view, key=KEY + "batch_watch")
            run = state.get_store().get_run(run_id)
            result = view.result if view is not None else None
            if run is not None and result is not None:
                if run.config.get("source") != source or _stored_lines(run.config) != len(lines):
                    st.caption(f"run {md(run_id)} scored another script: its averages are not applied here")
                else:
                    averages = {str(k): v for k, v in (result.get("averages") or {}).items()}
                    model = run.config.get("model_id")
                    if model is None:
                        st.caption(f"rules recorded in run {md(run_id)}")
                    else:
                        st.caption(
                            f"rubric scored in run {md(run_id)} with {md(model)}; "
                            f"{sum(v is None for v in averages.values())} failed (left to the rules)"
                        )
    return averages


def _render_batch_view(view: Collected, live: bool) -> None:
    if live:
        judged = view.of("director_line")
        st.caption(f"{len(judged)} line(s) judged so far" + (f"; last: {md(judged[-1]['id'])}" if judged else ""))


def handle_batch(lines: list[ScriptLine], default: str, source: str, model_id: str | None) -> str | None:
    """`director.run_script` (the entry point `judgelab director batch` calls too) started in the registry."""
    config = ScriptConfig(
        lines=lines,
        character=default,
        source=source,
        model_id=model_id,
        director=DirectorConfig(rubric_judge=st.session_state.get(KEY + "batch_rubric_judge", "generate")),
    )
    return start_run("director.batch", config, run_script, BATCH_PARAM, BATCH_RUN, settle=model_id is None)


@st.cache_data(show_spinner=False, max_entries=16)
def _batch_verdicts(lines: tuple[ScriptLine, ...], default: str) -> list[ScriptVerdict]:
    """The rules for every line, each character keeping its conversation state (`script_verdicts`)."""
    return script_verdicts(lines, default)


def _stored_lines(config: dict[str, Any]) -> int:
    """How many lines a stored batch judged: a count (`lines`), or the list itself in runs stored before."""
    lines = config.get("lines")
    return lines if isinstance(lines, int) else len(lines or [])
