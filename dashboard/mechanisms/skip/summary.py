"""The Skip cache page's summary of a finished simulation: the run's line, what a check and a judge call are, the
warnings (failed judgments, failed confidences), and two rows of figures — judge calls with and without the cache,
calls, tokens and money saved, judge errors; the first-judgment delay against its bound, and the staleness."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import state
from dashboard.components import duration, md, metric_row, money
from engine.skip.config import ResponseConfig
from engine.skip.simulation import bound_text, delay_bound


def saved_interval_text(comparison: dict[str, Any]) -> str:
    """The calls saved with its 95 % interval over conversations (they are resampled: a conversation's calls
    hang together through its cache window), or why it has none."""
    ci = comparison.get("calls_saved_pct_ci")
    if "calls_saved_pct_ci" not in comparison:
        return f"{comparison['calls_saved_pct']}% of the judge calls saved (a run stored before intervals were kept)"
    if not isinstance(ci, list):
        return f"{comparison['calls_saved_pct']}% of the judge calls saved (one conversation: no interval)"
    conversations = comparison.get("conversations")
    over = f"{conversations} conversations" if isinstance(conversations, int) else "the conversations"
    wide = (
        " — few conversations, so a wide interval: simulate more channels or hours to narrow it"
        if (ci[1] - ci[0] > 20)
        else ""
    )
    return (
        f"{comparison['calls_saved_pct']:.0f}% of the judge calls saved ({ci[0]:.0f}–{ci[1]:.0f}% with 95 % "
        f"confidence, resampling the {over}){wide}"
    )


def render_summary(result: dict[str, Any]) -> None:
    comparison = result["comparison"]
    a, b = comparison["without_cache"], comparison["with_cache"]
    bound, met = delay_bound(b, result["config"])
    st.caption(f"recorded as run `{result['run_id']}` · {a['messages']} messages")
    st.caption(md(checks_words(a, b, result["config"])))
    if result["misses"]:
        st.warning(
            f"{result['misses']} judgments failed (states not in the recording, or model errors); "
            "nothing was cached for them. Choose a model as judge to judge new states."
        )
    if b.get("flagged_judgments"):
        st.warning(
            f"{b['flagged_judgments']} judgments had a failed confidence (missing, out of range, cut off "
            "or unparseable): they decided with confidence 0.0 and were never cached."
        )
    metric_row(
        [
            ("Judge calls without cache", f"{a['judge_calls']:,}"),
            {
                "label": "With cache",
                "value": f"{b['judge_calls']:,}",
                "help": saved_interval_text(comparison),
            },
            ("Calls saved", f"{comparison['calls_saved_pct']:.0f}%"),
            ("Tokens saved", f"{comparison['tokens_saved']:,}"),
            *cost_metrics(comparison),
            {
                "label": "Judge errors (never cached)",
                "value": b["failures"],
                "help": f"policy: {result['config'].failure_policy.value}",
            },
        ]
    )
    st.caption(md(saved_interval_text(comparison)) + ".")
    metric_row(
        [
            ("First judgment: median", duration(b["delay_median_s"])),
            ("p95", duration(b["delay_p95_s"])),
            {
                "label": "max",
                "value": duration(b["delay_max_s"]),
                "delta": bound_text(met),
                "delta_color": "off",
            },
            ("Bound (min wait + interval)", duration(bound)),
            {
                "label": "Staleness p95",
                "value": duration(b["staleness_p95_s"]),
                "help": "how old the cached judgment was whenever a check skipped a waiting conversation",
            },
        ]
    )


def checks_words(without: dict[str, Any], with_cache: dict[str, Any], config: ResponseConfig) -> str:
    """Checks and judge calls are counted apart, and look alike ('121 checks' next to '119 calls'): say what
    each is. A check is one pass of the checker over every conversation, every interval; it calls the judge once
    for each conversation with a message waiting (none when all are answered, several when several wait)."""
    every = duration(config.check_interval_seconds)
    return (
        f"The checker looked at every conversation every {every}: {without['checks']:,} checks. Each check calls "
        "the judge once per conversation with a message waiting for an answer (none when nothing waits, several "
        f"when several do): {without['judge_calls']:,} judge calls without the cache, {with_cache['judge_calls']:,} "
        "with it, where a recent confident judgment is trusted instead."
    )


def api_prices() -> list[tuple[str, float]]:
    """The catalog's priced (API) models and their price per 1k input tokens, cheapest first."""
    catalog = state.get_catalog()
    return sorted(((s.id, s.price_in_per_1k) for s in catalog.models if s.price_in_per_1k > 0), key=lambda p: p[1])


def cost_metrics(comparison: dict[str, Any], prices: list[tuple[str, float]] | None = None) -> list[dict[str, Any]]:
    """What the cache saved in money: the run's own figure, and — when its judge was free (a local model or a
    recording) — what the saved tokens would have cost on the catalog's API models, so "$0" is not the story."""
    saved = float(comparison.get("cost_saved") or 0.0)
    tokens = int(comparison.get("tokens_saved") or 0)
    out: list[dict[str, Any]] = [
        {
            "label": "Cost saved",
            "value": money(saved) if saved else "$0 (free judge)",
            "help": "What the judge calls the cache avoided cost. A local model or a recording costs nothing.",
        }
    ]
    prices = api_prices() if prices is None else prices
    if not saved and tokens and prices:
        (cheap, low), (dear, high) = prices[0], prices[-1]
        out.append(
            {
                "label": "…on an API judge",
                "value": f"{rough_money(tokens * low / 1000)} – {rough_money(tokens * high / 1000)}",
                "help": f"The {tokens:,} tokens saved at input prices: {cheap} (cheapest in the catalog) to "
                f"{dear} (dearest).",
            }
        )
    return out


def rough_money(value: float) -> str:
    """An estimate's end in two significant digits ('$0.060', '$0.50'): the range is a guess at prices, and four
    digits on one end and three on the other read as precision it does not have."""
    if not value or value < 0.0001:
        return money(value)
    return f"${value:,.0f}" if value >= 10 else f"${value:#.2g}"
