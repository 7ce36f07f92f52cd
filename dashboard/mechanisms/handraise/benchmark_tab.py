"""The Hand raise page's Judge benchmark tab: the labelled dialogues of data/benchmarks/handraise.jsonl judged
with the page's method and settings once per context size (the context ablation), each context a registry run,
and the stored runs' figures side by side (also those of `judgelab handraise eval`). Its widgets keep the page's
`conv.` keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components import md
from dashboard.live_runs import RegistryError
from dashboard.mechanisms.handraise.charts import context_ablation
from dashboard.mechanisms.handraise.session import KEY  # the Hand raise page's keys: the tab is part of that page
from dashboard.watch import set_url_run, url_run, watch_run
from engine import runctx
from engine.config import get_settings
from engine.handraise.benchmark import ContextMode, parse_benchmark, run_benchmark
from engine.handraise.cast import Participant
from engine.handraise.decisions import HandRaiseConfig
from engine.inputs import read_text


def benchmark_path() -> Any:

    return get_settings().data_dir / "benchmarks" / "handraise.jsonl"


def stored_evals() -> pd.DataFrame:
    """Every stored benchmark run with its totals (as computed from its per-item lines)."""
    store = state.get_store()
    rows = []
    for r in store.list_runs(kind="handraise.eval", limit=200):
        if r.status != "finished":
            continue
        cfg, totals = r.config, r.summary
        rows.append(
            {
                "run": r.id,
                "method": cfg.get("method"),
                "context": cfg.get("context"),
                "repeat": cfg.get("repeat"),
                "items": cfg.get("items"),
                **{
                    k: with_interval(totals.get(k), totals.get(f"{k}_ci"))
                    for k in ("accuracy", "precision", "recall", "f1", "top1", "consistency")
                },
                **{
                    k: totals.get(k)
                    for k in (
                        "median_latency_s",
                        "tokens_per_decision",
                        "cost_per_decision",
                        "cost_total",
                    )
                },
                "f1 by language": _by_language(totals.get("by_language")),
            }
        )
    return pd.DataFrame(rows)


def with_interval(value: Any, interval: Any) -> str:
    """'0.74 (0.61–0.85)': a rate with its 95 % interval (dialogues resampled), as every page shows one."""
    if not isinstance(value, int | float):
        return "–"
    if isinstance(interval, list) and len(interval) == 2:
        return f"{value:.2f} ({interval[0]:.2f}–{interval[1]:.2f})"
    return f"{value:.2f}"


def _by_language(split: Any) -> str:
    """A run's F1 per language in one cell ("en 0.77 · ja 0.24"); whatever a stored summary holds instead
    (an older run, a hand-edited database) shows as a dash rather than stopping the page."""
    if not isinstance(split, Mapping):
        return ""
    cells = []
    for language, figures in split.items():
        f1 = figures.get("f1") if isinstance(figures, Mapping) else None
        cells.append(f"{language} {f1:.2f}" if isinstance(f1, int | float) else f"{language} –")
    return " · ".join(cells)


BENCH_PARAM = "bench"


class BenchView:
    """A benchmark run as its events show it: the context, and the items judged so far."""

    def __init__(self) -> None:
        self.context: str | None = None
        self.items = 0
        self.totals: dict[str, Any] | None = None

    def apply(self, type_: str, payload: Mapping[str, Any]) -> None:
        if type_ == "run_started":
            self.context = str((payload.get("config") or {}).get("context"))
        elif type_ == "handraise_eval_item":
            self.items += 1
        elif type_ == "run_finished":
            self.totals = payload.get("summary")


def _render_bench_progress(view: BenchView, live: bool) -> None:
    st.caption(f"Context {md(view.context)}: {view.items} item(s) judged" + ("" if live else " — done"))


def _watched_benchmarks() -> list[str]:
    """The ablation runs in the URL (so a reload or another tab sees them); only while one is still running."""
    ids = [i for i in (url_run(BENCH_PARAM) or "").split(",") if i]
    store = state.get_store()
    if ids and all((r := store.get_run(i)) is None or r.status != "running" for i in ids):
        set_url_run(None, BENCH_PARAM)
        return []
    return ids


def start_benchmark(
    items: list[Any], config: HandRaiseConfig, context: str, repeat: int, model_ids: list[str]
) -> str | None:
    """One context of the ablation as a registry run (an identical one still running is attached to)."""

    store, hub = state.get_store(), state.get_hub()
    settings = {
        "method": config.judge_method,
        "context": context,
        "repeat": repeat,
        "models": model_ids,
        "items": len(items),
        "config": config.model_dump(mode="json"),
    }

    async def entry() -> Any:
        runctx.progress(total=len(items), step=f"context {context}")
        # the cast's models re-seat each item, as `handraise eval --models`
        return await run_benchmark(
            store,
            items,
            hub.get,
            config,
            context,  # type: ignore[arg-type]
            repeat,
            model_ids=model_ids,
            on_item=lambda line: runctx.progress(advance=1, step=f"item {line['id']}"),
        )

    try:
        return state.get_registry().start("handraise.eval", settings, entry)
    except RegistryError as exc:
        st.error(md(exc, inline=False))
        return None


def render(cast: list[Participant], config: HandRaiseConfig) -> None:
    """The tab, judging with the cast and settings the page's settings hold."""
    st.caption(
        "The labelled dialogues of data/benchmarks/handraise.jsonl, judged with the method and settings "
        "above, once per context size: the last 1, 3 or 5 turns, or a summary plus the last turn."
    )
    c1, c2, c3 = st.columns(3)
    options: list[ContextMode] = ["1", "3", "5", "summary"]
    contexts = c1.multiselect("Contexts", options, default=options, key=KEY + "b_contexts")
    repeat = c2.number_input("Repeats", 1, 10, 1, key=KEY + "b_repeat")
    limit = c3.number_input("Items (0 = all)", 0, 500, 0, key=KEY + "b_limit")
    running = _watched_benchmarks()
    if st.button("Run the ablation", key=KEY + "b_run", disabled=not contexts or bool(running)):
        try:
            items = parse_benchmark(read_text(benchmark_path()), str(benchmark_path()))
        except (OSError, ValueError) as exc:
            st.error(md(exc, inline=False))
            return
        items = items[: int(limit)] if limit else items
        ids = [start_benchmark(items, config, context, int(repeat), [p.model_id for p in cast]) for context in contexts]
        set_url_run(",".join(i for i in ids if i), BENCH_PARAM)
        st.rerun()
    for run_id in running:
        watch_run(run_id, BenchView, _render_bench_progress, key=f"{KEY}bench.{run_id}")
    table = stored_evals()
    if table.empty:
        st.info("No benchmark runs stored yet (here or with `judgelab handraise eval`).")
        return
    latest = table.drop_duplicates(subset=["method", "context"], keep="first")
    st.markdown("**Latest run per method and context** (each figure from its run's per-item lines)")
    st.dataframe(
        latest,
        hide_index=True,
        width="stretch",
        column_config={
            "cost_per_decision": st.column_config.NumberColumn("$ per decision", format="$%.6f"),
            "cost_total": st.column_config.NumberColumn("$ total", format="$%.6f"),
        },
    )
    st.plotly_chart(context_ablation(latest.to_dict("records")), key=KEY + "ablation")
