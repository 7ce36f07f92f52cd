"""Jury: choose jurors (model + role), the final method, rounds and threshold; pick or paste a case; watch
phase 1, the continuous discussion and the final verdict arrive live. The page's code is the jury mechanism's
dashboard half (dashboard/mechanisms/jury/page.py and its parts)."""

from __future__ import annotations

from dashboard.mechanisms.jury.page import render

__all__ = ["render"]

if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
