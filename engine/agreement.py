"""Agreement among raters on nominal labels: Fleiss' κ and Krippendorff's α.

Both take `units`: one list of labels per item (a juror's verdict each; `None` for a missing rating).
Both return `None` where the statistic is undefined (e.g. every rating is the same label: no variation
to agree beyond chance) rather than a made-up 1.0 or a division by zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import permutations


def fleiss_kappa(units: Sequence[Sequence[str | None]]) -> float | None:
    """Fleiss' κ. Every unit must have the same number (≥ 2) of ratings; missing ratings are not allowed."""
    rows = [list(u) for u in units]
    if not rows:
        return None
    n = len(rows[0])
    if n < 2 or any(len(r) != n or any(v is None for v in r) for r in rows):
        raise ValueError("Fleiss' kappa needs the same number (≥ 2) of complete ratings per unit")
    total = len(rows) * n
    counts = [Counter(r) for r in rows]
    categories = Counter(v for r in rows for v in r)
    p_e = sum((c / total) ** 2 for c in categories.values())
    p_bar = sum((sum(c * c for c in row.values()) - n) / (n * (n - 1)) for row in counts) / len(rows)
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(units: Sequence[Sequence[str | None]]) -> float | None:
    """Krippendorff's α for nominal data; units may have missing ratings (units with < 2 are skipped)."""
    coincidence: defaultdict[tuple[str, str], float] = defaultdict(float)  # weights 1/(m−1): not counts
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        for a, b in permutations(values, 2):
            coincidence[(a, b)] += 1 / (m - 1)
    n_c: defaultdict[str, float] = defaultdict(float)
    for (a, _), w in coincidence.items():
        n_c[a] += w
    n = sum(n_c.values())
    if n <= 1:
        return None
    d_o = sum(w for (a, b), w in coincidence.items() if a != b) / n
    d_e = sum(n_c[a] * n_c[b] for a in n_c for b in n_c if a != b) / (n * (n - 1))
    if d_e == 0:
        return None
    return 1 - d_o / d_e
