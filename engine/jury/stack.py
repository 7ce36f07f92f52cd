"""The panel's final judgment over seats that are different judges: a stack calibrated on labels, a minority veto,
a selective verdict, and the learned discussion update.

- **Stack** (`JURY_STACK`): a multinomial logistic regression whose inputs are each seat's log-probabilities of the
  verdicts, fitted on the seats' *out-of-fold* distributions on the labelled split (each seat's reading of a case
  comes from its map fitted without that case), so it learns how far to trust each seat, and where they fail
  together. Not a vote: a seat that is often wrong weighs little, and a seat that is sure weighs more than one
  that is not.
- **Selective verdict**: when the stack's most likely verdict is below the cut, the verdict is needs_review, "not
  sure: …". The cut is chosen on the split's cross-validated stacked distributions as the lowest that keeps the
  error among the cases it decides at or under the stated rate (default 20 %); the map keeps a cut per rate.
- **Minority veto** (optional): a seat reading unsafe_fail at `veto_at` or more keeps a safe_pass verdict from
  being published: the verdict becomes needs_review ("Beyond Consensus", 2025: validators pass too easily).
- **Rounds**: a seat that judges by a distribution hears the others as their distributions: its round position is
  its own phase-1 log-probabilities plus `w` times the mean of the others' current log-probabilities (renormalised).
  `w` is fitted by maximum likelihood on the split's out-of-fold distributions (bounded to [0, ROUND_MAX_WEIGHT]):
  a seat moves when it is unsure and the others are sure, never by construction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from engine.diagnostics import number
from engine.judgemaps import Calibration, fit_multinomial

JURY_STACK = "jury.stack"  # data/calibration/jury.stack.<seat model ids joined by +>.json
STACK_C = 0.1  # L2 strength on standardised log-probabilities: chosen by cross-validation (docs/jury.md)
SELECTIVE_RATES = (0.1, 0.15, 0.2, 0.25, 0.3)
DEFAULT_SELECTIVE_ERROR = 0.2
ROUND_MAX_WEIGHT = 2.0
FLOOR = 1e-6  # log-probabilities are taken of max(p, FLOOR): a seat certain of one verdict is not infinitely sure


def stack_id(model_ids: Sequence[str]) -> str:
    """The stack map's model id: the seats' models in seat order, joined by '+'."""
    return "+".join(model_ids)


def stack_features(
    seats: Sequence[str], dists: Mapping[str, Sequence[float]], verdicts: Sequence[str]
) -> dict[str, float]:
    """{"<seat>:<verdict>": log p}: what the stack reads (`seats`: the seats' keys, in the map's order)."""
    out: dict[str, float] = {}
    for seat in seats:
        for v, p in zip(verdicts, dists[seat], strict=True):
            out[f"{seat}:{v}"] = math.log(max(float(p), FLOOR))
    return out


def stack_seats(cal: Calibration, verdicts: Sequence[str]) -> list[str]:
    """The seat keys a stack map reads, in order."""
    features = cal.maps[verdicts[0]].features
    return list(dict.fromkeys(f.rsplit(":", 1)[0] for f in features))


def normalise(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    e = [math.exp(x - top) for x in logits]
    total = sum(e)
    return [x / total for x in e]


def round_update(own_phase1: Sequence[float], others: Sequence[Sequence[float]], w: float) -> list[float]:
    """A seat's round position: its phase-1 log-probabilities plus w × the mean of the others' current ones."""
    if not others or w == 0:
        return list(own_phase1)
    n = len(own_phase1)
    mean = [sum(math.log(max(o[k], FLOOR)) for o in others) / len(others) for k in range(n)]
    return normalise([math.log(max(own_phase1[k], FLOOR)) + w * mean[k] for k in range(n)])


def discuss(
    phase1: Mapping[str, Sequence[float]], w: float, max_rounds: int, stagnation: int = 1
) -> list[dict[str, list[float]]]:
    """The rounds a panel of distribution seats would run: each round every seat updates at once from the others'
    positions of the round before; stops when a round moves nobody's verdict (`stagnation` such rounds) or at
    `max_rounds`. Returns each round's positions (the last one may move nobody: it is the round that showed it)."""
    current = {k: list(v) for k, v in phase1.items()}
    rounds: list[dict[str, list[float]]] = []
    still = 0
    for _ in range(max_rounds):
        nxt = {k: round_update(phase1[k], [current[j] for j in current if j != k], w) for k in current}
        moved = sum(_argmax(nxt[k]) != _argmax(current[k]) for k in current)
        rounds.append(nxt)
        current = nxt
        still = still + 1 if moved == 0 else 0
        if still >= stagnation:
            break
    return rounds


def would_move(phase1: Mapping[str, Sequence[float]], w: float) -> list[str]:
    """The seats the first round would move (their verdict changes): none means a round cannot move anyone."""
    out = []
    for k in phase1:
        after = round_update(phase1[k], [phase1[j] for j in phase1 if j != k], w)
        if _argmax(after) != _argmax(phase1[k]):
            out.append(k)
    return out


def _argmax(p: Sequence[float]) -> int:
    return max(range(len(p)), key=lambda i: p[i])


def fit_round_weight(oof: Mapping[str, np.ndarray], labels: Sequence[int]) -> float:
    """The weight of the others' distributions in a round that makes the split's labels most likely under every
    seat's position after one round (maximum likelihood over [0, ROUND_MAX_WEIGHT])."""
    from scipy.optimize import minimize_scalar  # heavy: scipy

    seats = list(oof)

    def nll(w: float) -> float:
        total = 0.0
        for i, y in enumerate(labels):
            for k in seats:
                after = round_update(oof[k][i], [oof[j][i] for j in seats if j != k], w)
                total -= math.log(max(after[y], 1e-300))
        return total

    found = minimize_scalar(nll, bounds=(0.0, ROUND_MAX_WEIGHT), method="bounded", options={"xatol": 1e-3})
    return round(float(found.x), 4)


def selective_cuts(probs: np.ndarray, labels: Sequence[int]) -> dict[str, dict[str, float | None]]:
    """For each stated error rate: the lowest cut on the stacked verdict's probability that keeps the error among
    the cases it decides at or under the rate, with the coverage and error it gave on the split (cross-validated
    distributions). None when no cut reaches the rate."""
    conf = probs.max(axis=1)
    right = probs.argmax(axis=1) == np.asarray(labels)
    out: dict[str, dict[str, float | None]] = {}
    for rate in SELECTIVE_RATES:
        found: dict[str, float | None] = {"cut": None, "coverage": 0.0, "error": None, "decided": 0}
        for cut in sorted(set(conf.tolist())):
            decided = conf >= cut
            if decided.sum() and 1 - right[decided].mean() <= rate + 1e-12:
                found = {
                    "cut": round(float(cut), 4),
                    "coverage": round(float(decided.mean()), 4),
                    "error": round(float(1 - right[decided].mean()), 4),
                    "decided": int(decided.sum()),
                }
                break
        out[f"{rate:g}"] = found
    return out


def selective_cut(cal: Calibration, rate: float) -> float:
    """The map's cut for the stated error rate: the cut of the nearest rate it holds at or below it (stricter, never
    looser). math.inf (decide nothing) when it holds no rate that strict, or no cut reached that rate on the split."""
    cuts = cal.metrics.get("selective") or {}
    usable = sorted((float(r), v) for r, v in cuts.items() if _is_rate(r) and float(r) <= rate + 1e-12)
    if not usable:
        return math.inf
    cut = number(usable[-1][1].get("cut")) if isinstance(usable[-1][1], dict) else None
    return cut if cut is not None and 0 <= cut <= 1 else math.inf


def round_weight(cal: Calibration) -> float:
    """The others' weight in a learned round (0 when the map holds none: no round can move anyone)."""
    w = number(cal.metrics.get("round_weight"))
    return w if w is not None and 0 <= w <= ROUND_MAX_WEIGHT else 0.0


def stack_problem(cal: Calibration) -> str:
    """'' when a stack map can be used; else why, in one line (engine.judgemaps.load_calibration's `check`: an
    adopted version it refuses gives the shipped map, flagged). Its maps read the same seats' log-probabilities,
    its round weight is a number in [0, ROUND_MAX_WEIGHT], its selective cuts are rates with cuts in [0, 1]."""
    features = {tuple(m.features) for m in cal.maps.values()}
    if len(features) != 1 or any(m.kind != "logistic" for m in cal.maps.values()):
        return "its verdicts' maps do not read the same seats"
    if any(f.rpartition(":")[2] not in cal.maps for f in next(iter(features))):
        return "it reads a verdict it has no map for"
    given = cal.metrics.get("round_weight", 0.0)
    w = number(given)
    if w is None or not 0 <= w <= ROUND_MAX_WEIGHT:
        return f"round_weight {str(given)[:40]!r} is not a number in [0, {ROUND_MAX_WEIGHT:g}]"
    cuts = cal.metrics.get("selective")
    if cuts is None:
        return ""
    if not isinstance(cuts, dict):
        return "selective is not a table of error rates"
    read = []
    for rate, entry in cuts.items():
        given = entry.get("cut") if isinstance(entry, dict) else "?"
        cut = number(given)
        if not _is_rate(rate) or not (given is None or (cut is not None and 0 <= cut <= 1)):
            return f"selective {str(rate)[:20]!r}: not an error rate with a cut in [0, 1] (or none)"
        read.append((float(rate), math.inf if cut is None else cut))
    cut_by_rate = [c for _, c in sorted(read)]
    if any(looser > stricter for stricter, looser in pairwise(cut_by_rate)):
        # a cut that keeps the errors under a rate keeps them under any looser one: no fit writes this
        return "selective: a looser error rate has a higher cut than a stricter one"
    return ""


def _is_rate(text: str) -> bool:
    try:
        return 0 < float(text) < 1
    except ValueError:
        return False


def fit_stack(
    seats: Sequence[str],
    oof: Mapping[str, np.ndarray],
    labels: Sequence[str],
    classes: Sequence[str],
    model_id: str,
    source: Path | str,
    c: float = STACK_C,
    metrics: dict[str, Any] | None = None,
    cv_probs: np.ndarray | None = None,
) -> Calibration:
    """The stack map over the seats' out-of-fold distributions (`oof[seat]`: one row per labelled case), with the
    round weight and, from `cv_probs` (the stack's own cross-validated distributions), the selective cuts."""
    rows = [stack_features(seats, {s: oof[s][i] for s in seats}, classes) for i in range(len(labels))]
    features = [f"{s}:{v}" for s in seats for v in classes]
    maps = fit_multinomial(rows, labels, classes, features, c)
    index = [list(classes).index(y) for y in labels]
    out = dict(metrics or {})
    out["round_weight"] = fit_round_weight({s: oof[s] for s in seats}, index)
    out["c"] = c
    if cv_probs is not None:
        out["selective"] = selective_cuts(cv_probs, index)
    return Calibration.fitted(
        JURY_STACK,
        model_id,
        maps,
        source=source,
        n_items=len(labels),
        metrics=out,
        notes="the panel's final judgment: p(label) = softmax of a multinomial logistic regression over each seat's "
        f"log-probabilities of the verdicts ({', '.join(seats)}), fitted on their out-of-fold distributions on the "
        f"labelled split (C={c}); round_weight: the others' weight in a discussion round; selective: the cut per "
        "stated error rate among decided cases",
    )
