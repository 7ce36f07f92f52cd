"""The LLM-free juror: a case's multilingual embedding → a classifier fitted on the labelled split.

The seat embeds the whole transcript and the agent's last line with the multilingual Universal Sentence Encoder
(`use-m3`, engine.embeddings: Japanese included), and a multinomial logistic regression over both vectors, fitted on
the labelled split, gives the distribution over the verdicts. It says in words which labelled cases the transcript
is closest to (cosine over the whole transcript), so a reader can see what it is leaning on. It fails differently
from the likelihood seats: it reads what the case is *about* and how the agent's reply is worded, not how likely
the transcript is under a heading. Measured against all-MiniLM-L6-v2 (English only) on the split: `docs/jury.md`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.embeddings import USE_DIMENSION, USE_ID
from engine.judgemaps import Calibration, fit_multinomial

JURY_NEIGHBOURS = "jury.neighbours"  # data/calibration/jury.neighbours.use-m3.json
NEIGHBOURS_C = 0.1  # L2 strength on standardised features: the best of 0.003–0.1 by cross-validation (docs/jury.md)
NEIGHBOURS_SHOWN = 2  # labelled cases named in the seat's sentence
_AGENT = re.compile(r"^\s*(agent|assistant|エージェント|アシスタント)\s*[:：]", re.IGNORECASE)


def agent_line(content: str) -> str:
    """The agent's last line (a line starting "Agent:" or "エージェント:" that is not the agent card), else the last
    non-empty line: what the agent finally did, which the whole transcript's vector blurs with the card."""
    lines = [ln for ln in content.splitlines() if ln.strip()]
    said = [ln for ln in lines if _AGENT.match(ln)]
    if len(said) > 1 or (said and said[-1] != lines[0]):
        return said[-1]
    return lines[-1] if lines else content


def neighbour_texts(content: str) -> list[str]:
    """The two texts the seat embeds: the whole transcript and the agent's last line."""
    return [content, agent_line(content)]


def feature_names(dimension: int = USE_DIMENSION) -> list[str]:
    return [f"full_{i}" for i in range(dimension)] + [f"last_{i}" for i in range(dimension)]


def features_of(full: np.ndarray, last: np.ndarray) -> dict[str, float]:
    values = np.concatenate([np.asarray(full, dtype=np.float64), np.asarray(last, dtype=np.float64)])
    return dict(zip(feature_names(len(full)), (float(v) for v in values), strict=True))


def _pack(vector: np.ndarray) -> str:
    """A unit vector, stored small (float16, base64): only used to name the nearest labelled cases."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype="<f2").astype(np.float64)


def fit_neighbours(
    cases: Sequence[dict[str, Any]],
    full: np.ndarray,
    last: np.ndarray,
    classes: Sequence[str],
    source: Path | str,
    c: float = NEIGHBOURS_C,
    metrics: dict[str, Any] | None = None,
) -> Calibration:
    """The seat's map: multinomial logistic over both vectors (`cases`: id, title, gold), with each labelled case's
    transcript vector kept (small) so the seat can name the cases it is closest to."""
    rows = [features_of(f, v) for f, v in zip(full, last, strict=True)]
    labels = [str(case["gold"]) for case in cases]
    maps = fit_multinomial(rows, labels, classes, feature_names(full.shape[1]), c)
    kept = [
        {"id": str(case["id"]), "title": str(case.get("title") or case["id"]), "gold": str(case["gold"]), "v": _pack(f)}
        for case, f in zip(cases, full, strict=True)
    ]
    return Calibration.fitted(
        JURY_NEIGHBOURS,
        USE_ID,
        maps,
        source=source,
        n_items=len(rows),
        metrics={**(metrics or {}), "c": c, "labelled_cases": kept},
        notes="p(label) = softmax of a multinomial logistic regression over the multilingual Universal Sentence "
        f"Encoder's vectors of the whole transcript and of the agent's last line (C={c}, standardised); "
        "labelled_cases: each labelled case's transcript vector (float16), to name the nearest ones",
    )


def neighbours_problem(cal: Calibration) -> str:
    """'' when a neighbours map can be used; else why, in one line (engine.judgemaps.load_calibration's `check`):
    logistic maps over the embedder's features, and its labelled cases a list."""
    known = set(feature_names())
    if any(m.kind != "logistic" or not set(m.features) <= known for m in cal.maps.values()):
        return "a verdict's map does not read the transcript's and the last line's embeddings"
    if not isinstance(cal.metrics.get("labelled_cases", []), list):
        return "labelled_cases is not a list of labelled cases"
    return ""


def nearest_cases(cal: Calibration, full: np.ndarray, n: int = NEIGHBOURS_SHOWN) -> list[tuple[str, str, str, float]]:
    """(id, title, gold, cosine) of the labelled cases whose transcripts are closest to this one."""
    kept = cal.metrics.get("labelled_cases") or []
    kept = kept if isinstance(kept, list) else []
    query = np.asarray(full, dtype=np.float64)
    query = query / max(float(np.sqrt((query * query).sum())), 1e-12)
    scored = []
    for item in kept:
        if not isinstance(item, dict):
            continue
        try:
            vector = _unpack(str(item["v"]))
        except (KeyError, ValueError, TypeError):
            continue
        if vector.shape != query.shape or not np.isfinite(vector).all():
            continue
        norm = max(float(np.sqrt((vector * vector).sum())), 1e-12)
        scored.append(
            (
                str(item.get("id", "")),
                str(item.get("title", "")),
                str(item.get("gold", "")),
                float((vector * query).sum() / norm),
            )
        )
    return sorted(scored, key=lambda t: -t[3])[:n]
