"""Hand raise: a multi-party chat where every participant's will to speak is judged before anyone answers. Hands
at or above the threshold appear as cards (icon, name, will, one-line reason) to approve or skip, one by one or in
batches, with a countdown when a timeout is set; approved participants answer in parallel, streamed; skips show as
a compact line. Charts, a what-if that re-decides the whole conversation from the recorded components without
calling a model, and tokens against the "everyone answers" baseline.

The page's code is the mechanism's dashboard half, dashboard/mechanisms/handraise/ (page.py and the modules it
draws with); this file is its entry."""

from __future__ import annotations

from dashboard.mechanisms.handraise.page import render

if __name__ == "__main__":  # Streamlit runs this file as the page (dashboard/app.py)
    render()
