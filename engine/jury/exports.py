"""The jury mechanism's export tables (the jurors' positions),
named by its `MechanismSpec` (spec.py)."""

from __future__ import annotations

from typing import Any

from engine.exports.record import RunRecord
from engine.jury.view import JuryView
from engine.mechanism import ExportTable


def positions(record: RunRecord) -> list[dict[str, Any]]:
    """Each juror's position at phase 1 and after each round: verdict, score, whether it moved, and why (its
    text, and the machine detail behind it: a likelihood juror's features, map and what it heard; empty for a
    generating juror and in runs recorded before the field existed)."""

    view = JuryView.fold(record.pairs())
    models = {j.get("juror_id"): j.get("model_id") for j in view.jurors}
    consensus = view.phase1_consensus or {}
    # Seats identical by construction: their matching verdicts are one judgment, not a consensus reached
    after_phase1 = "identical by construction" if view.identical_seats else consensus.get("consensusStatus")
    rows = [
        {
            "round": 0,
            "stage": "phase 1",
            "juror": e.get("juror"),
            "role": view.role(e.get("juror", "")),
            "model_id": models.get(e.get("juror")),
            "verdict": e.get("verdict"),
            "score": e.get("score"),
            "confidence": e.get("confidence"),
            "previous_verdict": None,
            "previous_score": None,
            "position_changed": None,
            "fallback": e.get("fallback"),
            "fallback_reason": e.get("fallbackReason"),
            "consensus_after": after_phase1,
            "text": e.get("reasoning"),
            "detail": e.get("detail") or "",
            "flags": ", ".join(map(str, e.get("flags") or [])),
            "call_id": e.get("callId"),
        }
        for e in view.phase1
    ]
    for rnd in view.rounds:
        after = (rnd.get("completed") or {}).get("consensusStatus")
        for st in rnd["statements"]:
            ev = st.get("evaluation") or {}
            rows.append(
                {
                    "round": rnd["round"],
                    "stage": f"round {rnd['round']}",
                    "juror": st.get("juror"),
                    "role": view.role(st.get("juror", "")),
                    "model_id": models.get(st.get("juror")),
                    "verdict": st.get("newVerdict"),
                    "score": st.get("newScore"),
                    "confidence": ev.get("confidence"),
                    "previous_verdict": st.get("previousVerdict"),
                    "previous_score": st.get("previousScore"),
                    "position_changed": st.get("positionChanged"),
                    "fallback": ev.get("fallback"),
                    "fallback_reason": ev.get("fallbackReason"),
                    "consensus_after": after,
                    "text": st.get("statement"),
                    "detail": st.get("detail") or "",
                    "flags": ", ".join(map(str, ev.get("flags") or [])),
                    "call_id": ev.get("callId"),
                }
            )
    return rows


TABLES = (
    ExportTable("jury_positions", "each juror's verdict and score at phase 1 and after each round", positions),
    ExportTable("jury_eval_items", "one line per case of a case-set evaluation", events=("jury_eval_item",)),
)
