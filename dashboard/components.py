"""Small display helpers shared by pages."""

from __future__ import annotations


def money(value: float) -> str:
    """A cost as people read it: '$0' for local models, else four significant digits."""
    if not value:
        return "$0"
    return f"${value:.4g}" if value >= 0.0001 else f"${value:.2e}"
