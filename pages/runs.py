"""Runs: the history of everything the engine ran — search, filter and page through any number of runs;
tag, rename, export or delete one; compare two runs of one kind; see a run's events and each LLM call it
made (request, raw text, parsed, cost)."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import breakable, details_on, export_buttons, export_file, md, money
from dashboard.run_compare import render_compare
from dashboard.ui_registry import uis
from engine.exports import ExportError, load_run, tables
from engine.history import (
    EXPERIMENT_KIND,
    MEMBER_KINDS,
    count_turns,
    display_name,
    display_names,
    experiment_line,
    experiment_of,
    left_open,
    left_open_reason,
    status_words,
)
from engine.labels.corrected import FAIR_SAMPLE, corrected_rates, corrected_row
from engine.store import RUN_STATUSES, RunFilter, StoreError

KEY = "runs."
DETAILS = "runs"  # the table's "All columns" toggle (dashboard.components.details_on)
PAGE_SIZES = (25, 50, 100, 200)
FILTER_PX = 210  # a filter's width: two fit side by side in a 900 px window, four in a 1440 px one
ROW_PX = 35  # st.dataframe's row height: the table is as tall as its page, up to MAX_TABLE_PX
MAX_TABLE_PX = 1240
MEMBER_LIMIT = 100_000  # an experiment's cells and recordings listed under it


def _init_state() -> None:
    wanted = st.query_params.get("run")
    if wanted and st.session_state.get(KEY + "selected") is None:
        st.session_state[KEY + "selected"] = wanted
    st.session_state.setdefault(KEY + "selected", None)
    st.session_state.setdefault(KEY + "page_no", 1)
    st.session_state.setdefault(KEY + "confirm_delete", None)
    st.session_state.setdefault(KEY + "notice", None)


def render() -> None:
    _init_state()
    st.title("🗂️ Runs")
    st.caption(
        "Everything the engine ran, newest first. Search and filter, page through the history, pick a run "
        "to see its events and every LLM call, tag, rename, export or delete it, or compare it with another. "
        "An experiment is one row: pick it to see its cells. To say what the right answers were, label items of "
        "these runs on the [Labels](/labels) page."
    )
    notice = st.session_state[KEY + "notice"]
    if notice:
        (st.error if notice[0] == "error" else st.success)(md(notice[1]))
        st.session_state[KEY + "notice"] = None
    where = _render_filters()
    size = int(st.session_state.get(KEY + "page_size", 50))
    total, rows = state.search_runs(where, size, (_page_no() - 1) * size)
    pages = max(1, math.ceil(total / size))
    if _page_no() > pages:  # the filter shrank the history under the page we were on
        st.session_state[KEY + "page_no"] = pages
        total, rows = state.search_runs(where, size, (pages - 1) * size)
    if total == 0:
        if where in (RunFilter(), RunFilter(exclude_kinds=MEMBER_KINDS)):
            st.info(
                "No runs recorded yet. Send a prompt on the Models page, or run `judgelab models check gemma3-270m`."
            )
        else:
            st.info("No run matches these filters.")
    else:
        _render_table(rows)
        _render_pager(total, pages, size)
    selected = st.session_state[KEY + "selected"]
    if selected:
        st.divider()
        _render_run(selected)


# -- the history: filters, table, pages ----------------------------------------------------------------------


def _render_filters() -> RunFilter:
    choices = state.filter_choices()
    text = st.text_input(
        "Search",
        key=KEY + "search",
        placeholder="words in the name, kind, error or config",
        help="Every word must appear (case-insensitive) in the run's id, name, kind, error or config.",
    )
    # Each filter a fixed width in a row that wraps: four to a row in a wide window, two in a 900 px one, and
    # never a placeholder cut to "any statu".
    with st.container(horizontal=True, wrap=True):
        kinds = st.multiselect("Kinds", choices["kinds"], key=KEY + "kinds", placeholder="any kind", width=FILTER_PX)
        statuses = st.multiselect(
            "Status", list(RUN_STATUSES), key=KEY + "statuses", placeholder="any status", width=FILTER_PX
        )
        model = st.selectbox(
            "Model",
            choices["models"],
            index=None,
            key=KEY + "model",
            placeholder="any model",
            help="Runs that called this model, or name it in their config.",
            width=FILTER_PX,
        )
        tags = st.multiselect("Tags", choices["tags"], key=KEY + "tags", placeholder="any tag", width=FILTER_PX)
        config_hash = st.text_input("Config hash", key=KEY + "hash", placeholder="starts with…", width=FILTER_PX)
        # An empty range (no date chosen) is what Streamlit documents for a range input; its stubs lack the empty
        # tuple.
        dates = st.date_input(
            "Started between",
            value=(),  # type: ignore[arg-type]
            key=KEY + "dates",
            format="YYYY-MM-DD",
            help="Dates in UTC, both days included; pick one day twice for a single day.",
            width=FILTER_PX + 60,  # two dates and a dash
        )
    members = st.toggle(
        "Show experiment cells and recordings as rows",
        key=KEY + "members",
        help="An experiment's cells and recordings are listed under it (pick the experiment); "
        "this lists them in the history too.",
    )
    start, end = _date_bounds(dates)
    grouped = not members and not set(kinds) & set(MEMBER_KINDS)  # a kind asked for by name is listed
    where = RunFilter(
        text=text.strip(),
        kinds=tuple(kinds),
        exclude_kinds=MEMBER_KINDS if grouped else (),
        statuses=tuple(statuses),
        model=model or "",
        config_hash=config_hash.strip(),
        tags=tuple(tags),
        started_from=start,
        started_to=end,
    )
    if st.session_state.get(KEY + "last_filter") != where:  # a new search starts at its first page
        st.session_state[KEY + "last_filter"] = where
        st.session_state[KEY + "page_no"] = 1
    return where


def _date_bounds(dates: object) -> tuple[datetime | None, datetime | None]:
    picked = [d for d in (dates if isinstance(dates, list | tuple) else [dates]) if isinstance(d, date)]
    if not picked:
        return None, None
    first, last = picked[0], picked[-1]
    return (
        datetime.combine(first, time(), UTC),
        datetime.combine(last, time(), UTC) + timedelta(days=1, microseconds=-1),
    )


def _page_no() -> int:
    return max(1, int(st.session_state[KEY + "page_no"]))


def table_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The history as people read it: each run's name next to its id, an experiment's cells and best figure
    on its row (a cell says which experiment it belongs to), no "None" anywhere, costs as '$0' or four
    significant digits, what a replayed run would have cost beside what it spent."""
    return pd.DataFrame(
        [
            {
                "name": r["name"],
                "run": r["run"],
                "kind": r["kind"],
                "status": r["status"],
                "experiment": r.get("cells") or (f"in {r['experiment']}" if r.get("experiment") else ""),
                "tags": ", ".join(r["tags"]),
                "started": r["started"],
                "duration": "running"
                if r["duration_s"] is None and r["status"] == "running"
                else ""
                if r["duration_s"] is None
                else f"{r['duration_s']:.2f} s",
                "calls": r["calls"],
                "errors": r["errors"],
                "tokens": r["tokens"],
                "cost": money(r["cost_usd"]),
                "would have cost": "" if r["would_cost_usd"] is None else money(r["would_cost_usd"]),
                "error": r["error"] or "",
                "config hash": r["config_hash"],
            }
            for r in rows
        ]
    )


# What a reader needs first, so a 900 px window shows it without scrolling sideways; every column on Details.
TABLE_COLUMNS = ("name", "status", "started", "cost")


def _render_table(rows: list[dict[str, Any]]) -> None:
    frame = table_frame(rows)
    details = details_on(
        DETAILS,
        label="All columns",
        help="Show every column: run id, kind, experiment, tags, duration, calls, errors, tokens, what a replay "
        "would have cost, the error and the config hash.",
    )
    event = st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_order=list(frame.columns) if details else list(TABLE_COLUMNS),
        height=min(ROW_PX * (len(frame) + 1) + 3, MAX_TABLE_PX),
        key=KEY + "table",
        on_select="rerun",
        selection_mode="single-row",
        column_config={
            "started": st.column_config.DatetimeColumn("started (UTC)", format="MMM D, HH:mm", width="small"),
            "status": st.column_config.TextColumn("status", width="small"),
            "cost": st.column_config.TextColumn("cost", width="small"),
            "would have cost": st.column_config.TextColumn(
                "would have cost", help="Replayed runs spend nothing: what the recorded calls cost"
            ),
            "name": st.column_config.TextColumn("name", width="medium"),
            "experiment": st.column_config.TextColumn(
                "experiment", help="An experiment's cells and best figure; pick its row to see the cells"
            ),
            "error": st.column_config.TextColumn("error", width="large"),
        },
    )
    picked = getattr(getattr(event, "selection", None), "rows", None) or []
    clicked = frame.iloc[picked[0]]["run"] if picked and picked[0] < len(frame) else None
    if clicked != st.session_state.get(KEY + "clicked"):  # a new click, not the selection of an earlier one
        st.session_state[KEY + "clicked"] = clicked
        if clicked:
            handle_select(clicked)
    ids = frame["run"].tolist()
    names = dict(zip(ids, frame["name"].tolist(), strict=True))
    current = st.session_state[KEY + "selected"]
    st.selectbox(
        "Run",
        ids,
        format_func=lambda i: f"{names[i]} · {i}" if names.get(i) else i,
        index=ids.index(current) if current in ids else None,
        key=KEY + "pick",
        placeholder="choose a run…",
        on_change=handle_pick,
    )


def _render_pager(total: int, pages: int, size: int) -> None:
    page = _page_no()
    first = (page - 1) * size + 1
    with st.container(horizontal=True, wrap=True, vertical_alignment="center"):  # wraps, never cuts a label
        st.button("◀ Newer", key=KEY + "prev", disabled=page <= 1, on_click=handle_page, args=(page - 1,))
        st.button("Older ▶", key=KEY + "next", disabled=page >= pages, on_click=handle_page, args=(page + 1,))
        st.number_input("Page", 1, pages, key=KEY + "page_no", label_visibility="collapsed", width=110)
        st.selectbox(
            "Per page",
            PAGE_SIZES,
            index=PAGE_SIZES.index(50),
            key=KEY + "page_size",
            label_visibility="collapsed",
            on_change=handle_page,
            args=(1,),
            format_func=lambda n: f"{n} per page",
            width=150,
        )
        st.caption(
            f"Runs {first:,}–{min(first + size - 1, total):,} of {total:,} · page {page:,} of {pages:,}",
            width="content",
        )


# -- one run ------------------------------------------------------------------------------------------------


def _render_run(run_id: str) -> None:
    store = state.get_store()
    run = store.get_run(run_id)
    if run is None:
        st.warning(f"No run {md(run_id)}.")
        return
    totals = store.run_totals([run_id]).get(run_id, {})
    title = display_names(store, [run])[run.id]
    turns = count_turns(store, [run]).get(run.id, 0)
    st.subheader(md(title) if title else md(run.id))
    st.caption(f"{md(run.kind)} · {md(run.id)}")
    would = totals.get("would_cost")
    with st.container(horizontal=True, wrap=True):  # six figures that wrap in a narrow window, none cut off
        st.metric("Status", status_words(run, turns), width="content")
        st.metric("Duration", f"{run.duration_s:.2f} s" if run.duration_s is not None else "running", width="content")
        st.metric("LLM calls", int(totals.get("calls", 0)), width="content")
        st.metric("Errors", int(totals.get("errors", 0)), width="content")
        st.metric("Tokens", int(totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0)), width="content")
        st.metric(
            "Cost",
            money(totals.get("cost", 0.0)),
            None if would is None else f"replayed: would have cost {money(would)}",
            delta_color="off",
            width="content",
        )
    if left_open(run):
        st.info(
            f"This conversation was left open and closed when {md(left_open_reason(run))}: "
            f"{turns} turn{'s' if turns != 1 else ''}, each kept with its hands, answers and charts."
        )
    elif run.error:
        st.error(md(run.error, inline=False))
    if run.kind == EXPERIMENT_KIND:
        _render_members(run)
    elif experiment_of(run):
        _render_parent(str(experiment_of(run)))
    for page in uis():
        if run.kind in page.reopens:  # its page draws it back from `?run=<id>`
            st.markdown(
                f"[Reopen this run on the {md(page.title)} page](/{page.url_path}?run={run.id}) — "
                f"{md(page.reopens[run.kind])}, read back from the stored events."
            )
    _render_corrected(store, run)
    manage, export, compare = st.tabs(["Name, tags, delete", "Export", "Compare"])
    with manage:
        _render_manage(run.id, run.name, run.status)
    with export:
        _render_export(run.id)
    with compare:
        render_compare(run.id, run.kind)
    left, right = st.columns(2)
    with left:
        st.markdown("**Config**")
        st.json(run.config, expanded=False)
    with right:
        st.markdown("**Summary**")
        st.json(run.summary, expanded=False)
    _render_events(run_id)
    _render_calls(run_id)


def _render_members(run: Any) -> None:
    """An experiment's cells and recordings, listed under it: pick one to open it."""
    eid = experiment_of(run)
    if not eid:
        return
    _total, rows = state.search_runs(RunFilter(kinds=MEMBER_KINDS, text=eid), MEMBER_LIMIT, 0)
    rows = [r for r in rows if r.get("experiment") == eid]
    cells = sorted((r for r in rows if r["kind"] == "experiment.cell"), key=lambda r: _cell_no(r["name"]))
    recordings = [r for r in rows if r["kind"] == "experiment.record"]
    st.markdown(
        f"**{md(experiment_line(run))}** — {len(cells)} cell run(s) and {len(recordings)} recording(s). "
        f"[Open it on the Experiments page](/experiments?run={run.id}) for its charts."
    )
    if not rows:
        return
    frame = pd.DataFrame(
        [
            {
                "run": r["run"],
                "name": r["name"],
                "status": r["status"],
                "calls": r["calls"],
                "duration": "" if r["duration_s"] is None else f"{r['duration_s']:.2f} s",
            }
            for r in recordings + cells
        ]
    )
    event = st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        height=min(ROW_PX * (len(frame) + 1) + 3, 420),
        key=f"{KEY}members.{run.id}",
        on_select="rerun",
        selection_mode="single-row",
        # a cell's settings (its name), status and calls fit a 900 px window; ids and durations on "All columns"
        column_order=list(frame.columns) if st.session_state.get(f"details.{DETAILS}") else ["name", "status", "calls"],
        column_config={"name": st.column_config.TextColumn("name", width="large")},
    )
    picked = getattr(getattr(event, "selection", None), "rows", None) or []
    clicked = str(frame.iloc[picked[0]]["run"]) if picked and picked[0] < len(frame) else None
    if clicked != st.session_state.get(KEY + "member_clicked"):  # a new click: open that cell
        st.session_state[KEY + "member_clicked"] = clicked
        if clicked:
            handle_select(clicked)
            st.rerun()


def _cell_no(name: str) -> int:
    words = name.replace(":", " ").split()
    return int(words[1]) if len(words) > 1 and words[1].isdigit() else 0


def _render_parent(eid: str) -> None:
    parents = state.get_store().search_runs(RunFilter(kinds=(EXPERIMENT_KIND,), text=eid), limit=5)
    parent = next((p for p in parents if experiment_of(p) == eid), None)
    if parent is None:
        st.caption(f"Part of experiment {md(eid)} (its run is no longer stored).")
        return
    st.caption(f"Part of experiment {md(eid)} — {md(display_name(parent))}")
    st.button("Open the experiment", key=f"{KEY}parent.{parent.id}", on_click=handle_select, args=(parent.id,))


def _render_manage(run_id: str, name: str, status: str) -> None:
    tags = state.get_store().tags([run_id]).get(run_id, [])
    c1, c2 = st.columns(2)
    c1.text_input("Name", name, key=f"{KEY}name.{run_id}", max_chars=200)
    c1.button("Rename", key=f"{KEY}rename.{run_id}", on_click=handle_rename, args=(run_id,))
    choices = sorted(set(state.filter_choices()["tags"]) | set(tags))
    c2.multiselect(
        "Tags",
        choices,
        default=tags,
        key=f"{KEY}tag_list.{run_id}",
        accept_new_options=True,
        placeholder="type a tag and press Enter",
    )
    c2.button("Save tags", key=f"{KEY}save_tags.{run_id}", on_click=handle_tags, args=(run_id,))
    if st.session_state[KEY + "confirm_delete"] == run_id:
        events, calls = len(state.get_store().events(run_id)), len(state.get_store().calls(run_id, limit=None))
        with st.container(border=True):
            st.warning(
                f"Delete run {md(run_id)} with its {events} events and {calls} LLM calls? A replay can no "
                "longer answer from those calls. This cannot be undone."
            )
            y, n = st.columns([1, 4])
            y.button("Yes, delete it", type="primary", key=KEY + "delete_yes", on_click=handle_delete, args=(run_id,))
            n.button("Cancel", key=KEY + "delete_no", on_click=handle_cancel_delete)
    else:
        st.button(
            "🗑 Delete this run…",
            key=f"{KEY}delete.{run_id}",
            disabled=status == "running",
            on_click=handle_ask_delete,
            args=(run_id,),
            help="A running run cannot be deleted: cancel it first." if status == "running" else None,
        )


def _render_export(run_id: str) -> None:
    store = state.get_store()
    export_buttons(store, run_id, key=KEY + "export")
    try:
        found = tables(load_run(store, run_id))
    except ExportError as exc:
        st.error(md(exc))
        return
    c1, c2 = st.columns([2, 1])
    name = c1.selectbox(
        "One table as CSV",
        list(found),
        key=f"{KEY}table_pick.{run_id}",
        format_func=lambda n: f"{n} — {found[n].description} ({len(found[n].rows)} rows)",
    )
    if name:
        c2.download_button(
            "⬇ CSV",
            partial(export_file, store, run_id, f"csv:{name}"),
            file_name=f"{run_id}.{name}.csv",
            mime="text/csv",
            key=f"{KEY}table_csv.{run_id}.{name}",
            on_click="ignore",
        )
    st.caption(f"The same from the command line: `judgelab runs export {md(run_id)} --format csv|json|html`.")


def _render_corrected(store: Any, run: Any) -> None:
    """The judge's rate over this run beside your labels' rate and the two combined (PPI++), when you labelled
    some of its items (engine/labels/corrected.py)."""
    rates = corrected_rates(store, run)
    if not rates:
        return
    st.markdown("**The judge's rate, corrected by your labels**")
    st.caption(
        "The judge's rate is what the judge said over every item; its interval is about the judge, not the truth. "
        "Your labels say what is true on the items you labelled. The corrected rate uses both (PPI++): the judge on "
        "every item, adjusted by its errors on your labels; its 95 % interval carries both uncertainties. "
        + FAIR_SAMPLE
    )
    for rate in rates:
        if rate.why_outside():
            st.caption(md(rate.why_outside()))
    st.dataframe(
        pd.DataFrame([corrected_row(r) for r in rates]),
        hide_index=True,
        width="stretch",
        column_config={
            "judge's weight": st.column_config.TextColumn(
                "judge's weight",
                help="How much the corrected rate leans on the judge (0: your labels alone; 1: the judge's "
                "predictions, corrected by its errors on your labels). It is higher the better the judge tracks "
                "your labels.",
            ),
            "labels to halve it": st.column_config.TextColumn(
                "labels to halve it",
                help="How many labels of this run's items, in all, would make the corrected interval half as wide.",
            ),
        },
    )


def _render_events(run_id: str) -> None:
    events = state.get_store().events(run_id)
    st.markdown(f"**Events** ({len(events)})")
    if events:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "seq": e.seq,
                        "type": e.type,
                        "time": e.ts,
                        "payload": json.dumps(e.payload, ensure_ascii=False)[:200],
                    }
                    for e in events
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def _render_calls(run_id: str) -> None:
    calls = state.get_store().calls(run_id)
    st.markdown(f"**LLM calls** ({len(calls)})")
    for call in calls:
        status = f"❌ {md(call.error_type)}" if call.error else "✅"
        label = (
            f"#{call.id} · {md(call.model_id)} · {md(call.purpose)} · {status} · "
            f"{call.prompt_tokens}+{call.completion_tokens} tokens · {call.latency_s:.2f} s · {md(money(call.cost))}"
            + ("" if call.would_cost is None else f" (replayed: would have cost {md(money(call.would_cost))})")
        )
        with st.expander(label):
            request = json.loads(call.request_json)
            for message in request.get("messages", []):
                st.markdown(f"*{md(message.get('role'))}*")
                st.text(message.get("content"))
            if call.error:
                st.error(md(call.error, inline=False))
            st.markdown("*raw text*")
            st.code(call.raw_text or "", language="json" if request.get("json_schema") else None)
            if call.parsed_json:
                st.markdown("*parsed*")
                st.json(json.loads(call.parsed_json))
            flags = json.loads(call.flags_json or "[]")
            if flags:
                st.caption("flags: " + md(breakable(", ".join(map(str, flags)))))


# -- callbacks ------------------------------------------------------------------------------------------------


def handle_select(run_id: str) -> None:
    st.session_state[KEY + "selected"] = run_id
    st.query_params["run"] = run_id


def handle_pick() -> None:
    picked = st.session_state.get(KEY + "pick")
    if picked:
        handle_select(picked)


def handle_page(page: int) -> None:
    st.session_state[KEY + "page_no"] = max(1, page)


def handle_rename(run_id: str) -> None:
    try:
        state.get_store().rename_run(run_id, st.session_state.get(f"{KEY}name.{run_id}", ""))
    except StoreError as exc:
        st.session_state[KEY + "notice"] = ("error", f"Not renamed: {exc}")
        return
    state.clear_reads()
    st.session_state[KEY + "notice"] = ("success", f"Renamed run {run_id}.")


def handle_tags(run_id: str) -> None:
    try:
        saved = state.get_store().set_tags(run_id, st.session_state.get(f"{KEY}tag_list.{run_id}") or [])
    except StoreError as exc:
        st.session_state[KEY + "notice"] = ("error", f"Tags not saved: {exc}")
        return
    state.clear_reads()
    st.session_state[KEY + "notice"] = ("success", f"Tags of run {run_id}: {', '.join(saved) or 'none'}.")


def handle_ask_delete(run_id: str) -> None:
    st.session_state[KEY + "confirm_delete"] = run_id


def handle_cancel_delete() -> None:
    st.session_state[KEY + "confirm_delete"] = None


def handle_delete(run_id: str) -> None:
    st.session_state[KEY + "confirm_delete"] = None
    try:
        gone = state.get_store().delete_run(run_id)
    except StoreError as exc:
        st.session_state[KEY + "notice"] = ("error", f"Not deleted: {exc}")
        return
    st.session_state[KEY + "selected"] = None
    st.query_params.pop("run", None)
    state.clear_reads()
    st.session_state[KEY + "notice"] = (
        "success",
        f"Deleted run {run_id} with {gone['events']} events and {gone['calls']} LLM calls.",
    )
