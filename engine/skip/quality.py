"""How good is a judge: labels for a generated workload, and how recorded judgments rank and decide against them
(AUC, accuracy, with intervals)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import stats
from engine.reliability import rank_auc
from engine.skip.messages import Message
from engine.skip.recording import RecordedJudge
from engine.skip.workload import TEXTS

SHOULD_ANSWER = frozenset({"question", "help"})


def generated_labels(messages: Sequence[Message]) -> dict[str, bool]:
    """For a generated workload: message id → whether its conversation burst should get an answer
    (the burst was opened by a question or a help request; chatter and monologues should not)."""
    kind_of = {text: kind for kind, texts in TEXTS.items() for text in texts}
    by_id = {m.id: m for m in messages}
    labels = {}
    for m in messages:
        opener = by_id.get(m.id.rsplit("-", 1)[0] + "-0")
        if opener is not None and opener.text in kind_of:
            labels[m.id] = kind_of[opener.text] in SHOULD_ANSWER
    return labels


def judged_states(judge: RecordedJudge, labels: dict[str, bool]) -> dict[str, tuple[float, bool]]:
    """Each recorded state whose message has a label: p(respond) (= confidence when it responds, 1 − confidence
    when it declines) and the label; what two judges are compared on, state by state."""
    out = {}
    for key, outcome in judge.records.items():
        mid = key.rsplit("|", 1)[-1]
        if outcome.result is None or mid not in labels:
            continue
        r = outcome.result
        out[key] = (r.confidence if r.should_respond else 1 - r.confidence, labels[mid])
    return out


def judge_quality(judge: RecordedJudge, labels: dict[str, bool]) -> dict[str, Any]:
    """How recorded judgments rank and decide against labels: AUC of p(respond) (= confidence when it
    responds, 1 − confidence when it declines), accuracy, and the share of judgments with confidence
    ≥ 0.7 (the seed's first threshold below which every decline gets the default window)."""
    scored = []
    for key, outcome in judge.records.items():
        mid = key.rsplit("|", 1)[-1]
        if outcome.result is None or mid not in labels:
            continue
        r = outcome.result
        p = r.confidence if r.should_respond else 1 - r.confidence
        scored.append((p, labels[mid], r.should_respond, r.confidence))
    pos = [p for p, y, *_ in scored if y]
    neg = [p for p, y, *_ in scored if not y]
    auc = rank_auc(pos, neg)
    n = len(scored)
    right = sum(d == y for _, y, d, _ in scored)
    auc_ci = stats.bootstrap(stats.w_auc([p for p, *_ in scored], [y for _, y, *_ in scored]))[1] if n else None
    accuracy_ci = stats.wilson(right, n)
    return {
        "judged_states": n,
        "auc": None if auc is None else round(auc, 3),
        "auc_ci": auc_ci.as_list(3) if auc_ci else None,
        "accuracy": round(right / n, 3) if n else None,
        "accuracy_ci": accuracy_ci.as_list(3) if accuracy_ci else None,
        "share_confidence_ge_0_7": round(sum(c >= 0.7 for *_, c in scored) / n, 3) if n else None,
    }
