"""The default self-evaluation: white-box signals of the bundled models, each a number a tiny model can carry,
turned into p(supported) and query coverage by maps fitted on the labelled split
(`data/calibration/confidence.signals.smollm2-135m+use-m3.json`).

A 135M model cannot write a judgment of an answer, but it can be read (LM-Polygraph's white-box scores):

- with sources, the answer is judged against them: how close it comes to the nearest source (multilingual USE
  cosine), the share of its words and numbers found in the sources, and how much the sources raise the answer's
  likelihood under SmolLM2 (an answer the sources hold is copied; one they contradict is not);
- without sources, against what the model knows: the answer's PMI as SmolLM2's reply to the question (against the
  same reply to a content-free question), P(True) ("Is the proposed answer correct?" scored Yes against No), and how
  close SmolLM2's own greedy answer comes to it;
- query coverage reads how close the answer comes to the question.

Every model call and embedding is a recorded call of the run; a failed call is a flagged fallback, never a
judgment. The maps were chosen by cross-validation on the split (`docs/likelihood-judges.md`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.figures import PROCEED, eval_totals
from engine.confidence.levels import decide_action
from engine.confidence.score import calculate
from engine.confidence.settings import DEFAULT_SETTINGS
from engine.diagnostics import logistic_maps_problem
from engine.judgemaps import Calibration, FittedMap, fit_logistic
from engine.likelihood import CONTENT_FREE, per_token
from engine.quoting import quote

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from models.base import ChatModel

SIGNALS = "confidence.signals"
READER = "smollm2-135m"  # the model read by likelihood (an instruct model: its chat layout)
EMBEDDER = "use-m3"  # the multilingual embedder (Japanese included)
SIGNALS_ID = f"{READER}+{EMBEDDER}"  # the maps' file: confidence.signals.smollm2-135m+use-m3.json

SOURCED = "supported_with_sources"  # the maps in that file
UNSOURCED = "supported_without_sources"
COVERAGE = "covers_question"
SOURCED_FEATURES = ("source_match", "source_words", "source_gain")
UNSOURCED_FEATURES = ("answer_pmi", "p_true", "own_agreement")
COVERAGE_FEATURES = ("question_match",)
MAPS = {SOURCED: SOURCED_FEATURES, UNSOURCED: UNSOURCED_FEATURES, COVERAGE: COVERAGE_FEATURES}

OWN_ANSWER_TOKENS = 40
_SPECIAL = re.compile(r"<\|")  # a chat template's control-token opening (<|im_start|>): never from untrusted text


def plain(text: str) -> str:
    """Untrusted text for a chat message: it cannot open a control token of the chat layout."""
    return _SPECIAL.sub("< |", text)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": plain(text)}]


def sourced_prompt(query: str, sources: Sequence[str]) -> str:
    """The answer's prompt with the sources above the question (without them: `sourced_prompt(query, ())`)."""
    block = "".join(f"Source (quoted): {quote(s)}\n" for s in sources)
    return f"{block}Question (quoted): {quote(query)}\nAnswer (quoted):"


def true_prompt(query: str, answer: str) -> list[dict[str, str]]:
    return chat(f"Question: {query}\nProposed answer: {answer}\nIs the proposed answer correct? Answer Yes or No.")


def own_prompt(query: str) -> list[dict[str, str]]:
    return chat(f"{query}\nAnswer in one short sentence.")


_WORD = re.compile(r"[a-z]{3,}|\d+(?:[.,]\d+)*")
_CJK = re.compile(r"[^\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff0-9]")


def words(text: str) -> set[str]:
    """Latin words of 3+ letters, numbers, and bigrams of Japanese characters and digits (Japanese has no spaces)."""
    low = text.lower()
    cjk = _CJK.sub("", low)
    return set(_WORD.findall(low)) | {cjk[i : i + 2] for i in range(len(cjk) - 1)}


@dataclass
class Signals:
    """The raw signals of one answer, the recorded calls they came from, and SmolLM2's own answer (if asked)."""

    features: dict[str, float] = field(default_factory=dict)
    call_ids: list[int] = field(default_factory=list)
    own_answer: str | None = None
    nearest_source: int | None = None  # 0-based index of the source closest to the answer

    def finite(self) -> bool:
        return all(math.isfinite(v) for v in self.features.values())


async def read_signals(
    reader: ChatModel, embedder: TextEmbedder, query: str, answer: str, sources: Sequence[str] = ()
) -> Signals:
    """The branch's signals (with sources: SOURCED_FEATURES; without: UNSOURCED_FEATURES) and query coverage's.
    ModelError propagates (the caller's flagged fallback)."""
    out = Signals()
    vectors = embedder.embed([query, answer, *sources])
    out.features["question_match"] = float(vectors[0] @ vectors[1])
    option = [" " + quote(answer)]
    if sources:
        cosines = [float(vectors[1] @ v) for v in vectors[2:]]
        out.nearest_source = max(range(len(cosines)), key=cosines.__getitem__)
        out.features["source_match"] = cosines[out.nearest_source]
        mine, theirs = words(answer), set().union(*(words(s) for s in sources))
        out.features["source_words"] = len(mine & theirs) / len(mine) if mine else 0.0
        with_sources = await reader.score_options(sourced_prompt(query, sources), option)
        without = await reader.score_options(sourced_prompt(query, ()), option)
        out.call_ids += [c for c in (with_sources.call_id, without.call_id) if c is not None]
        out.features["source_gain"] = per_token(with_sources.logprobs[0], with_sources.token_counts[0]) - per_token(
            without.logprobs[0], without.token_counts[0]
        )
        return out
    reply = await reader.score_options(chat(query), [answer])
    free = await reader.score_options(chat(CONTENT_FREE), [answer])
    verdict = await reader.score_options(true_prompt(query, answer), ["Yes", "No"])
    own = await reader.complete(own_prompt(query), temperature=0.0, max_tokens=OWN_ANSWER_TOKENS)
    out.call_ids += [c for c in (reply.call_id, free.call_id, verdict.call_id, own.call_id) if c is not None]
    out.features["answer_pmi"] = per_token(reply.logprobs[0], reply.token_counts[0]) - per_token(
        free.logprobs[0], free.token_counts[0]
    )
    out.features["p_true"] = verdict.logprobs[0] - verdict.logprobs[1]
    out.own_answer = own.text.strip()
    pair = embedder.embed([out.own_answer or CONTENT_FREE, answer])
    out.features["own_agreement"] = float(pair[0] @ pair[1])
    return out


def on_seed_scale(p: float, floor: float) -> float:
    """p(supported) placed on the seed's self-evaluation scale: floor + (1 − floor) × p.

    The seed counts a self-evaluation only above `include_self_confidence_above` (0.6) and reads 0.8 and up as
    confident enough to go without sources: its scale is a rating's, where a doubtful answer still rates 0.6–0.8.
    A calibrated probability fed as it is would be dropped from the mean whenever it says "likely wrong" (p ≤ 0.6),
    and the score would then rise — a wrong answer with one source scored SILENT. On this scale every reading
    counts, the score rises with p, and p = 0.5 (as likely right as wrong) sits at the seed's 0.8."""
    return round(min(1.0, max(floor + 1e-4, floor + (1.0 - floor) * p)), 4)


# -- the maps: fitted on the labelled split, cross-validated -----------------------------------------------------

FOLDS, SHUFFLES = 5, 3


def _plain_maps(rows: Sequence[dict[str, float]], labels: Sequence[bool]) -> dict[str, FittedMap]:
    """The three class-balanced logistic maps: p(supported) with sources, without, and query coverage."""
    sourced = [i for i, r in enumerate(rows) if r.get("has_sources")]
    unsourced = [i for i, r in enumerate(rows) if not r.get("has_sources")]
    out = {}
    for name, idx in ((SOURCED, sourced), (UNSOURCED, unsourced), (COVERAGE, range(len(rows)))):
        idx = list(idx)
        if len({bool(labels[i]) for i in idx}) < 2:
            raise ValueError(f"{name}: the split needs right and wrong answers here (has {len(idx)} items)")
        out[name] = fit_logistic([rows[i] for i in idx], [labels[i] for i in idx], MAPS[name], balanced=True)
    return out


def proceed_point(p: Sequence[float], labels: Sequence[bool]) -> float:
    """The operating point of the answers without sources: the highest threshold t at which right answers still
    proceed (p ≥ t) at least as often as wrong ones are stopped (p < t) — the equal-error point, ties to proceeding.

    Without sources the seed's calculation stops an answer exactly when its self-evaluation is under 0.8 (the
    no-sources penalty), that is p < 0.5 on the seed's scale; a class-balanced map's 0.5 is not that point on new
    answers, so the map is moved there (`_branch_maps`)."""
    right = sorted(x for x, y in zip(p, labels, strict=True) if y)
    wrong = sorted(x for x, y in zip(p, labels, strict=True) if not y)
    if not right or not wrong:
        return 0.5
    cuts = sorted(set(p))
    best = cuts[0]
    for t in cuts:  # proceed rate falls and stop rate rises with t: keep the last t where proceed ≥ stop
        proceed = sum(x >= t for x in right) / len(right)
        stopped = sum(x < t for x in wrong) / len(wrong)
        if proceed >= stopped:
            best = t
    below = max((x for x in p if x < best), default=best)
    return min(1 - 1e-6, max(1e-6, (best + below) / 2))


def _inner_p(rows: Sequence[dict[str, float]], labels: Sequence[bool]) -> list[float]:
    """p(supported) of each answer without sources from maps fitted without it (5 folds, one shuffle)."""
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn, ~1 s (fitting only)

    out = [0.0] * len(rows)
    strata = [f"{int(y)}{int(bool(r.get('has_sources')))}" for y, r in zip(labels, rows, strict=True)]
    for train, test in StratifiedKFold(FOLDS, shuffle=True, random_state=0).split(rows, strata):
        maps = _plain_maps([rows[i] for i in train], [labels[i] for i in train])
        for i in test:
            out[i] = supported_probability(maps, rows[i])
    return out


def _branch_maps(rows: Sequence[dict[str, float]], labels: Sequence[bool]) -> dict[str, FittedMap]:
    """The three maps, the one without sources moved to its operating point (`proceed_point`), which is chosen on
    p read out of fold within these rows only: the cross-validation's held-out answers never choose it."""
    maps = _plain_maps(rows, labels)
    p = _inner_p(rows, labels)
    keep = [not r.get("has_sources") for r in rows]
    t = proceed_point(
        [x for x, k in zip(p, keep, strict=True) if k], [y for y, k in zip(labels, keep, strict=True) if k]
    )
    shift = -math.log(t / (1 - t))
    unsourced = maps[UNSOURCED]
    maps[UNSOURCED] = unsourced.model_copy(update={"intercept": unsourced.intercept + shift})
    return maps


def supported_probability(maps: Mapping[str, FittedMap], row: Mapping[str, float]) -> float:
    return maps[SOURCED if row.get("has_sources") else UNSOURCED](dict(row))


def held_out(rows: Sequence[dict[str, float]], labels: Sequence[bool]) -> tuple[list[float], list[float]]:
    """Each item's p(supported) and query coverage from maps fitted without it: stratified 5-fold, averaged over 3
    shuffles."""
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn, ~1 s (fitting only)

    y = [bool(v) for v in labels]
    out = [0.0] * len(rows)
    coverage = [0.0] * len(rows)
    strata = [f"{int(v)}{int(bool(r.get('has_sources')))}" for v, r in zip(y, rows, strict=True)]
    for seed in range(SHUFFLES):
        for train, test in StratifiedKFold(FOLDS, shuffle=True, random_state=seed).split(rows, strata):
            maps = _branch_maps([rows[i] for i in train], [y[i] for i in train])
            for i in test:
                out[i] += supported_probability(maps, rows[i]) / SHUFFLES
                coverage[i] += maps[COVERAGE](dict(rows[i])) / SHUFFLES
    return out, coverage


def fit_signals(rows: Sequence[dict[str, float]], labels: Sequence[bool], source: Path) -> Calibration:
    """The signals' maps fitted on the whole split, with the pooled cross-validated AUC of p(supported) (and by
    language and by branch, each with its Hanley–McNeil interval) as its metrics."""
    p, coverage = held_out(rows, labels)

    def figure(keep: Sequence[bool]) -> dict[str, Any] | None:
        return stats.auc_summary(
            [x for x, k in zip(p, keep, strict=True) if k], [bool(v) for v, k in zip(labels, keep, strict=True) if k]
        )

    japanese = [bool(r.get("japanese")) for r in rows]
    sourced = [bool(r.get("has_sources")) for r in rows]
    pooled = figure([True] * len(rows)) or {}
    metrics = {
        "cv_auc": pooled.get("auc"),
        "cv_auc_ci": pooled.get("auc_ci"),
        "cv_folds": f"{FOLDS} stratified (label × sources) × {SHUFFLES} shuffles",
        "by_language": {"en": figure([not j for j in japanese]), "ja": figure(japanese)},
        "by_branch": {"with_sources": figure(sourced), "without_sources": figure([not s for s in sourced])},
        "final_score": final_score_figures(rows, labels, p, coverage),
    }
    return Calibration.fitted(
        SIGNALS,
        SIGNALS_ID,
        _branch_maps(rows, labels),
        source=source,
        n_items=len(rows),
        metrics=metrics,
        notes="p(supported) = logistic("
        + ", ".join(SOURCED_FEATURES)
        + ") with sources, logistic("
        + ", ".join(UNSOURCED_FEATURES)
        + ") without; query coverage = logistic(question_match); class-balanced",
    )


def final_score_figures(
    rows: Sequence[dict[str, float]], labels: Sequence[bool], p: Sequence[float], coverage: Sequence[float]
) -> dict[str, Any]:
    """What the held-out readings do to the seed's final score under the default settings (`confidence eval`'s
    totals): each answer scored as `confidence evaluate` scores it, p on the seed's scale."""
    from_settings = DEFAULT_SETTINGS.include_self_confidence_above
    lines: list[dict[str, Any]] = []
    for row, y, pi, ci in zip(rows, labels, p, coverage, strict=True):
        count = int(row.get("source_count", row.get("has_sources", 0)))
        factors = ConfidenceFactors(
            llm_self_confidence=on_seed_scale(pi, from_settings),
            query_coverage=round(ci, 4),
            source_count=count,
            source_agreement=float(row.get("source_agreement", 0.0)),
        )
        score = calculate(factors)
        level = decide_action(score).level.value
        lines.append(
            {
                "language": "ja" if row.get("japanese") else "en",
                "sources": count,
                "supported": bool(y),
                "score": score.score,
                "level": level,
                "proceeds": level in PROCEED,
                "p_supported": pi,
                "flagged": [],
            }
        )
    return eval_totals(lines)


def signals_problem(cal: Calibration) -> str:
    """'' when the file holds the logistic maps over the signals this code reads, else why."""
    return logistic_maps_problem(cal, MAPS)


@dataclass
class SignalReading:
    """What the signal judge says of one answer: p(supported), query coverage, the words behind them."""

    supported: float
    coverage: float
    detail: str
    coverage_detail: str
    signals: Signals
    flags: list[str]


def describe(signals: Signals, p: float, sources: Sequence[str]) -> str:
    f = signals.features
    if sources:
        near = (signals.nearest_source or 0) + 1
        return (
            f"p(supported) {p:.2f}: closest to source {near} (cosine {f['source_match']:.2f}), "
            f"{f['source_words']:.0%} of its words are in the sources, the sources change its likelihood by "
            f"{f['source_gain']:+.2f} nats a token (SmolLM2)"
        )
    own = (signals.own_answer or "").replace("\n", " ")
    own = own if len(own) <= 80 else own[:79] + "…"
    return (
        f"p(supported) {p:.2f} without sources, from SmolLM2: PMI {f['answer_pmi']:+.2f} as its reply, "
        f"Yes−No {f['p_true']:+.2f} on 'is it correct?', its own answer {own!r} at cosine {f['own_agreement']:.2f}"
    )


def read_answer(cal: Calibration, signals: Signals, sources: Sequence[str]) -> SignalReading:
    """The maps applied: ValueError for a non-finite signal or map output."""
    row = dict(signals.features) | {"has_sources": float(bool(sources))}
    p = supported_probability(cal.maps, row)
    coverage = cal.apply(COVERAGE, row)
    if not (math.isfinite(p) and math.isfinite(coverage)):
        raise ValueError("a map gave no finite probability")
    return SignalReading(
        supported=p,
        coverage=coverage,
        detail=describe(signals, p, sources),
        coverage_detail=f"p(covers the question) {coverage:.2f}: answer–question cosine "
        f"{signals.features['question_match']:.2f} (use-m3)",
        signals=signals,
        flags=["signals", f"calibration:{cal.version}"],
    )
