"""Director lab: one line through every rule (matches highlighted), a batch you can retune instantly, and a
duo simulator where two characters talk and every line goes through the director. The page's code is the director
mechanism's dashboard half (dashboard/mechanisms/director/page.py and its parts)."""

from __future__ import annotations

from dashboard.mechanisms.director.page import render

if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
