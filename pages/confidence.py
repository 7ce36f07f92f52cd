"""Confidence lab: factors → score → level, and why; live evaluation; multi-step plans; calibration. The page's
code is the confidence mechanism's dashboard half (dashboard/mechanisms/confidence/page.py and its parts)."""

from __future__ import annotations

from dashboard.mechanisms.confidence.page import render

if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
