"""The rubric by signals: each of the five criteria (§7) read from a signal the bundled models can carry, placed on
the rubric's 1–5 scale by a map fitted on the labelled lines (`data/calibration/director-calib.jsonl`, the maps in
`data/calibration/director.signals.gemma3-270m+use-m3.json`).

- naturalness: the line's likelihood under Gemma after the topic and the partner's line (per token), how varied its
  character pairs are (mechanical repetition repeats them), and how far its length is from a usual line's;
- roleplay: the character's voice — how much more likely the line is after her own example lines than after her
  sister's (Gemma), and how much closer it comes to hers than to her sister's (multilingual USE);
- connectivity: how much the partner's line raises the line's likelihood (PMI, Gemma) and how close it comes to it;
- frame: how much the topic raises its likelihood, and how close it comes to the topic;
- density: its length (and the square of its distance from a usual length) and how many numbers it holds.

Each criterion's map is fitted on the acceptable lines against the lines that fail that criterion (the split's
`kind`: garbled lines for naturalness, lines in the sister's voice or breaking the fourth wall for roleplay, …);
a criterion's score is 1 + 4 × p(acceptable). The rubric's mean then meets the seed's cut-offs (< 3.5 RETRY,
< 4.0 WARN) as before. Every model call and embedding is a recorded call of the run."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.diagnostics import logistic_maps_problem
from engine.judgemaps import Calibration, FittedMap, fit_logistic
from engine.likelihood import per_token
from engine.quoting import quote

if TYPE_CHECKING:
    from engine.director.config import CharacterProfile
    from engine.embeddings import TextEmbedder
    from models.base import ChatModel

DIRECTOR_SIGNALS = "director.signals"
READER = "gemma3-270m"  # Japanese lines: Gemma reads them far better than SmolLM2
EMBEDDER = "use-m3"
SIGNALS_ID = f"{READER}+{EMBEDDER}"

CRITERION_FEATURES: dict[str, tuple[str, ...]] = {
    "frame": ("topic_pmi", "topic_match"),
    "roleplay": ("voice_pmi", "voice_match"),
    "connectivity": ("previous_pmi", "previous_match"),
    "density": ("log_length", "length_gap", "numbers"),
    "naturalness": ("fluency", "variety", "length_gap"),
}
# The lines that fail each criterion, among the split's kinds (the others: acceptable lines, kind "good").
CRITERION_KINDS: dict[str, tuple[str, ...]] = {
    "frame": ("off_topic", "fourth_wall"),
    "roleplay": ("out_of_voice", "fourth_wall"),
    "connectivity": ("ignores_previous",),
    "density": ("bland", "overloaded"),
    "naturalness": ("garbled",),
}
USUAL_LOG_LENGTH = 3.3  # log of a usual line's length in characters (~27): where length_gap is 0
_NUMBER = re.compile(r"\d+|[〇一二三四五六七八九十百千万]+")


def default_rubric_judge(model_id: str | None, backend: str | None) -> str:
    """The rubric judge that carries signal on a model: the signals for the bundled Gemma run by llama.cpp (their
    maps read its log-probabilities), the model writing its scores otherwise (`--rubric-judge auto`, the pages'
    default)."""
    return "signals" if model_id == READER and backend == "llamacpp" else "generate"


def _cue(name: str) -> str:
    return f"{name}: "


def _said(name: str, text: str) -> str:
    return f"{name}: {quote(text)}\n"


def _continuation(line: str) -> str:
    """The line as the option scored after `name: `: its quoted form, closing quote included."""
    return quote(line)


@dataclass
class LineSignals:
    features: dict[str, float] = field(default_factory=dict)
    call_ids: list[int] = field(default_factory=list)


def text_features(line: str) -> dict[str, float]:
    """The signals read from the text alone: length, its distance from a usual length, numbers, variety."""
    n = max(len(line), 1)
    pairs = [line[i : i + 2] for i in range(len(line) - 1)]
    log_length = math.log(n)
    return {
        "log_length": log_length,
        "length_gap": (log_length - USUAL_LOG_LENGTH) ** 2,
        "numbers": float(len(_NUMBER.findall(line))),
        "variety": len(set(pairs)) / len(pairs) if pairs else 1.0,
    }


async def read_line(
    reader: ChatModel,
    embedder: TextEmbedder,
    line: str,
    profile: CharacterProfile,
    sister: CharacterProfile,
    *,
    topic: str = "",
    previous: str = "",
) -> LineSignals:
    """Every criterion's signals for one line (five scoring calls of `reader`, one embedding call a text).
    ModelError propagates (the rubric's failure policy)."""
    out = LineSignals(features=text_features(line))
    option = [_continuation(line)]
    scene = f"Topic: {quote(topic or '(none)')}\n"
    before = _said(sister.name, previous or "(none)")
    calls = [
        await reader.score_options(scene + before + _cue(profile.name), option),
        await reader.score_options(scene + _cue(profile.name), option),
        await reader.score_options(_cue(profile.name), option),
        await reader.score_options("".join(_said("A", x) for x in profile.examples) + _cue("A"), option),
        await reader.score_options("".join(_said("A", x) for x in sister.examples) + _cue("A"), option),
    ]
    out.call_ids = [c.call_id for c in calls if c.call_id is not None]
    with_previous, with_topic, bare, own, theirs = (per_token(c.logprobs[0], c.token_counts[0]) for c in calls)
    vectors = embedder.embed([line, topic or "(none)", previous or "(none)", *profile.examples, *sister.examples])
    n = len(profile.examples)
    mine, hers = vectors[3 : 3 + n] @ vectors[0], vectors[3 + n :] @ vectors[0]
    out.features |= {
        "fluency": with_previous,
        "previous_pmi": with_previous - with_topic,
        "topic_pmi": with_topic - bare,
        "voice_pmi": own - theirs,
        "topic_match": float(vectors[0] @ vectors[1]),
        "previous_match": float(vectors[0] @ vectors[2]),
        "voice_match": float(mine.mean() - hers.mean()) if n and len(hers) else 0.0,
    }
    return out


def criterion_scores(cal: Calibration, features: Mapping[str, float]) -> dict[str, float]:
    """Each criterion on the 1–5 scale: 1 + 4 × p(acceptable) from its map. ValueError for a non-finite value."""
    scores = {}
    for name in CRITERION_FEATURES:
        p = cal.apply(name, dict(features))
        if not math.isfinite(p):
            raise ValueError(f"{name}: no finite probability")
        scores[name] = round(1.0 + 4.0 * p, 2)
    return scores


def signals_problem(cal: Calibration) -> str:
    """'' when the file holds the logistic maps over the signals this code reads, else why."""
    return logistic_maps_problem(cal, CRITERION_FEATURES)


def describe(features: Mapping[str, float], scores: Mapping[str, float]) -> str:
    worst = min(scores, key=lambda k: scores[k])
    return (
        f"signals: lowest {worst} {scores[worst]:.1f}; voice {features['voice_pmi']:+.2f} nats a token towards her "
        f"own lines, partner's line {features['previous_pmi']:+.2f}, topic {features['topic_pmi']:+.2f} (Gemma)"
    )


# -- fitting -----------------------------------------------------------------------------------------------------

FOLDS, SHUFFLES = 5, 3


def _fit(rows: Sequence[Mapping[str, Any]]) -> dict[str, FittedMap]:
    maps = {}
    for name, kinds in CRITERION_KINDS.items():
        chosen = [r for r in rows if r["kind"] == "good" or r["kind"] in kinds]
        labels = [r["kind"] == "good" for r in chosen]
        if len(set(labels)) < 2:
            raise ValueError(f"{name}: the split needs acceptable lines and lines of kind {', '.join(kinds)}")
        maps[name] = fit_logistic([r["features"] for r in chosen], labels, CRITERION_FEATURES[name], balanced=True)
    return maps


def _mean(maps: Mapping[str, FittedMap], features: Mapping[str, float]) -> float:
    return sum(1.0 + 4.0 * maps[c](dict(features)) for c in CRITERION_FEATURES) / len(CRITERION_FEATURES)


def held_out(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each line's rubric mean from maps fitted without it: 5 folds stratified by kind, averaged over 3 shuffles."""
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn, ~1 s (fitting only)

    out = [0.0] * len(rows)
    kinds = [r["kind"] for r in rows]
    for seed in range(SHUFFLES):
        for train, test in StratifiedKFold(FOLDS, shuffle=True, random_state=seed).split(rows, kinds):
            maps = _fit([rows[i] for i in train])
            for i in test:
                out[i] += _mean(maps, rows[i]["features"]) / SHUFFLES
    return out


def fit_director_signals(rows: Sequence[Mapping[str, Any]], source: Path, warn: float, retry: float) -> Calibration:
    """The five criterion maps on the whole split, with the cross-validated AUC of the rubric mean against
    `acceptable` (by character), and how the held-out means meet the seed's cut-offs, as its metrics."""
    means = held_out(rows)
    labels = [bool(r["acceptable"]) for r in rows]

    def part(keep: Sequence[bool]) -> dict[str, Any] | None:
        return stats.auc_summary(
            [m for m, k in zip(means, keep, strict=True) if k], [y for y, k in zip(labels, keep, strict=True) if k]
        )

    def status(mean: float) -> str:
        return "PASS" if mean >= warn else "WARN" if mean >= retry else "RETRY"

    counts: dict[str, dict[str, int]] = {"acceptable": {}, "unacceptable": {}}
    for m, y in zip(means, labels, strict=True):
        side = counts["acceptable" if y else "unacceptable"]
        side[status(m)] = side.get(status(m), 0) + 1
    pooled = part([True] * len(rows)) or {}
    characters = sorted({str(r["character"]) for r in rows})
    metrics = {
        "cv_auc": pooled.get("auc"),
        "cv_auc_ci": pooled.get("auc_ci"),
        "cv_folds": f"{FOLDS} stratified by kind × {SHUFFLES} shuffles",
        "by_character": {c: part([r["character"] == c for r in rows]) for c in characters},
        "cv_status_counts": counts,
    }
    return Calibration.fitted(
        DIRECTOR_SIGNALS,
        SIGNALS_ID,
        _fit(rows),
        source=source,
        n_items=len(rows),
        metrics=metrics,
        notes="each criterion: 1 + 4 × logistic(its signals), fitted on acceptable lines against the lines that "
        "fail it (the split's kinds); class-balanced",
    )
