"""The hand raise's feature helpers shared by its judges: the fixed cosine scale, novelty against the answers
already given, and the raw features a hand keeps for a refit from labels."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.embeddings import dot, get_embedder, unit_rows
from engine.handraise.decisions import clamp01

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.embeddings import TextEmbedder
    from engine.handraise.cast import Participant, Turn
    from engine.judgemaps import Calibration


def recorded_features(likelihood: Mapping[str, float], embedding: Mapping[str, Any]) -> dict[str, float]:
    """The raw features a hand keeps (`Components.features`): every finite number of the likelihood and
    embedding features, rounded to 6 places — what a refit from labels reads instead of calling the model."""
    out: dict[str, float] = {}
    for source in (likelihood, embedding):
        for k, v in source.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v)):
                out[k] = round(float(v), 6)
    return out


def cos_scale(cos: float) -> float:
    """The fixed cosine map: unrelated MiniLM texts sit near 0.1, close paraphrases above 0.6."""
    return clamp01((cos - 0.1) / 0.5)


def novelty_of(cal: Calibration | None, features: Mapping[str, Any]) -> float:
    """Novelty against the answers already given (the seed: 既出回答に対する新規性): the calibration's fitted
    `novelty` map of `answer_cos` (others' answers) and `own_cos` (the participant's own — what it already
    said is not new either); a calibration without one (or none) keeps the fixed 1 − (cos − 0.1) / 0.5 of
    the closest answer by another participant."""
    if cal is not None and "novelty" in cal.maps:
        return cal.apply("novelty", {k: float(v) for k, v in features.items() if k in cal.maps["novelty"].features})
    return 1 - cos_scale(float(features["answer_cos"]))


def embedding_features(
    who: Sequence[Participant], turns: Sequence[Turn], context_turns: int, embedder: TextEmbedder | None = None
) -> list[dict[str, Any]]:
    """Per participant (cosines of the embedder's vectors; without one, MiniLM's):
    - `rel_cos` = the recent context to the profile; `conf_cos` = the best expertise item to the context;
    - `last_cos` = the last message (the user's, the one to answer) to the profile, `last_exp_cos` = the
      best expertise item to it (named in `expertise`); `last_rel` / `last_exp_rel` = those minus the
      roster's average (roster-relative: how much more the message is this participant's than the others');
    - `answer_cos` = the highest cosine of the profile to an answer already given by another participant in
      the context, `own_cos` = the same for the participant's own earlier answers (−1 when there is none);
    - `unread` = the share of the last message the embedder cannot read (`Embedder.unknown_share`; not a
      map feature: the judge flags it).
    The fitted maps (data/calibration/) read the last-message features for relevance and confidence and
    the answer features for novelty (cross-validated on the calibration split)."""

    embedder = embedder or get_embedder()
    recent = list(turns)[-context_turns:]
    context = " ".join(t.text for t in recent) or "(empty)"
    last = next((t.text for t in reversed(recent) if t.speaker == "user"), recent[-1].text if recent else "(empty)")
    answers = [t for t in recent if t.speaker != "user"]
    texts = [context, last] + [p.profile_text() for p in who] + [a.text for a in answers]
    expertise = [(p.id, e) for p in who for e in (p.expertise or [p.role or p.name])]
    vectors = embedder.embed(texts + [e for _, e in expertise])
    vectors = unit_rows(vectors)  # float64, and `dot` below: the same figures on any CPU
    ctx, last_vec = vectors[0], vectors[1]
    unread = round(embedder.unknown_share(last), 4)
    profiles = vectors[2 : 2 + len(who)]
    answer_vecs = vectors[2 + len(who) : 2 + len(who) + len(answers)]
    exp_vecs = vectors[2 + len(who) + len(answers) :]
    out: list[dict[str, Any]] = []
    for i, p in enumerate(who):
        mine = [k for k, (pid, _) in enumerate(expertise) if pid == p.id]
        best = max(mine, key=lambda k: dot(exp_vecs[k], last_vec))
        out.append(
            {
                "rel_cos": dot(profiles[i], ctx),
                "conf_cos": max(dot(exp_vecs[k], ctx) for k in mine),
                "last_cos": dot(profiles[i], last_vec),
                "last_exp_cos": dot(exp_vecs[best], last_vec),
                "answer_cos": max(
                    (dot(profiles[i], answer_vecs[j]) for j, a in enumerate(answers) if a.speaker != p.id),
                    default=-1.0,
                ),
                "own_cos": max(
                    (dot(profiles[i], answer_vecs[j]) for j, a in enumerate(answers) if a.speaker == p.id),
                    default=-1.0,
                ),
                "expertise": expertise[best][1],
                "unread": unread,
            }
        )
    for key in ("last_cos", "last_exp_cos"):
        average = sum(float(f[key]) for f in out) / max(1, len(out))
        for f in out:
            f[key.replace("_cos", "_rel")] = float(f[key]) - average
    return out
