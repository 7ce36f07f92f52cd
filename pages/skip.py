"""Skip cache: a channel workload in simulated time, with and without the judgment skip cache; a per-scope
timeline; and the calls-saved vs. delay trade-off across thresholds, recomputed from recorded judgments. The
page's code is the skip mechanism's dashboard half (dashboard/mechanisms/skip/page.py and its parts)."""

from __future__ import annotations

from dashboard.mechanisms.skip.page import render

__all__ = ["render"]

if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
