"""The Runs page's Compare tab: a run beside another of its kind — their figures side by side (B − A with its
interval and paired test) and the items whose outcome changed."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import md, money
from engine.comparison import ROUNDING, compact_rows, comparison_row
from engine.history import (
    NotComparable,
    cell,
    compare_runs,
    display_names,
    figure_rows,
)
from engine.outcomes import NoItems, diff_runs
from engine.store import RunFilter

KEY = "runs."  # the Runs page's keys (pages/runs.py): this tab is part of that page
COMPARE_CHOICES = 200


def render_compare(run_id: str, kind: str) -> None:
    store = state.get_store()
    others = [r for r in store.search_runs(RunFilter(kinds=(kind,)), limit=COMPARE_CHOICES + 1) if r.id != run_id]
    wanted = st.query_params.get("compare")
    options = [r.id for r in others][:COMPARE_CHOICES]
    if wanted and wanted not in options and wanted != run_id:
        options.insert(0, wanted)
    if not options:
        st.info(f"No other {md(kind)} run to compare with.")
        return
    c1, c2 = st.columns(2)
    named = display_names(store, [r for r in (store.get_run(i) for i in options) if r is not None])
    picked = c1.selectbox(
        f"Compare with (the newest {COMPARE_CHOICES} {md(kind)} runs)",
        options,
        index=options.index(wanted) if wanted in options else 0,
        key=f"{KEY}compare.{run_id}",
        format_func=lambda i: f"{named[i]} · {i}" if named.get(i) and named[i] != i else i,
    )
    typed = c2.text_input("…or a run id", key=f"{KEY}compare_id.{run_id}").strip()
    other_id = typed or picked
    a, b = store.get_run(run_id), store.get_run(other_id)
    if a is None or b is None:
        st.warning(f"No run {md(other_id)}.")
        return
    try:
        result = compare_runs(a, b, store.run_totals([a.id, b.id]))
    except NotComparable as exc:
        st.warning(md(exc))
        return
    names = display_names(store, [a, b])
    st.caption(f"A: {md(names[a.id])} ({md(a.id)}) · B: {md(names[b.id])} ({md(b.id)})")
    st.markdown(f"**Config** — {len(result.changes)} difference(s)")
    if result.changes:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "setting": c.path,
                        "change": c.change,
                        "A": "" if c.change == "added" else cell(c.a),
                        "B": "" if c.change == "removed" else cell(c.b),
                    }
                    for c in result.changes
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption("Same config (hash " + md(a.config_hash) + ").")
    try:
        diff = diff_runs(store, a, b)
    except NoItems as exc:
        diff = None
        st.caption(md(exc))
    if diff is not None:
        _render_metric_comparison(diff, a, b)
    rows = figure_rows(result, frozenset(diff.comparisons) if diff is not None else frozenset())
    st.markdown("**Other figures**" if diff is not None and diff.comparisons else "**Headline figures**")
    st.caption("One value per run (no items behind it): no interval or test; money in dollars.")
    for row in rows:
        if row["figure"] in ("cost", "would_cost"):
            row.update(A=_figure(row["figure"], _number(row["A"])), B=_figure(row["figure"], _number(row["B"])))
    st.dataframe(
        pd.DataFrame([{"figure": r["figure"], "A": r["A"], "B": r["B"], "B − A": r["B − A"]} for r in rows]),
        hide_index=True,
        width="stretch",
    )
    if diff is not None:
        _render_item_diff(diff, a, b)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _render_metric_comparison(diff: Any, a: Any, b: Any) -> None:
    """Every metric both runs share: A, B, B − A with its interval and p (Holm-adjusted across them), the test —
    engine/comparison.py, the same rows as `judgelab runs compare`."""
    st.markdown("**Compared on the items**")
    rows, shared = compact_rows([comparison_row(name, comp) for name, comp in diff.comparisons.items()])
    st.caption(
        f"A is the run open above ({md(a.id)}), B the one picked ({md(b.id)}) — {md(diff.basis)}"
        + (f"; every metric by {md(shared)}" if shared else "")
        + ". "
        + ROUNDING
    )
    if not diff.comparisons:
        st.caption("No metric both runs share on these items.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _render_item_diff(diff: Any, a: Any, b: Any) -> None:
    """Which items really changed between the two runs (right→wrong, wrong→right, another label), each with both
    outputs and the gold label where the run has one (engine/outcomes.py)."""
    counts = diff.counts
    st.markdown(
        f"**Items that changed** — {diff.shared} in both runs: {counts['right→wrong']} right→wrong, "
        f"{counts['wrong→right']} wrong→right, {counts['label changed']} label change(s)"
    )
    if diff.only_a or diff.only_b:
        st.caption(f"Only in A ({md(a.id)}): {len(diff.only_a)} item(s); only in B ({md(b.id)}): {len(diff.only_b)}.")
    if not diff.changes:
        return
    with_gold = any(c.a.gold for c in diff.changes)
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "item": c.key,
                    "change": c.change,
                    **({"gold": c.a.gold or ""} if with_gold else {}),
                    "A": c.a.label,
                    "A said": c.a.text,
                    "B": c.b.label,
                    "B said": c.b.text,
                    "open A": f"/runs?run={c.a.link or a.id}",
                    "open B": f"/runs?run={c.b.link or b.id}",
                }
                for c in diff.changes
            ]
        ),
        hide_index=True,
        width="stretch",
        key=f"{KEY}itemdiff.{a.id}.{b.id}",
        column_config={
            "open A": st.column_config.LinkColumn("open A", display_text="open"),
            "open B": st.column_config.LinkColumn("open B", display_text="open"),
        },
    )


def _figure(name: str, value: object) -> str:
    if value is None:
        return ""
    if name in ("cost", "would_cost") and isinstance(value, int | float):
        return money(value)
    return cell(value)
