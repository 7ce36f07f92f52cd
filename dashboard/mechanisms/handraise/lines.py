"""What the Hand raise chat shows of a closed turn, in words: each approved answer, a skip line for each hand
not taken (why it stayed down, or who skipped it), and the notes of a cancelled or unreadable turn."""

from __future__ import annotations

from typing import Any

from engine.handraise.answers import cuts_note, plain_text
from engine.handraise.conversation import TurnState
from engine.handraise.decisions import Hand, HandStatus, Resolution, skip_line
from engine.handraise.reasons import reason_sentence


def turn_lines(turn: TurnState) -> list[dict[str, Any]]:
    """What the chat shows of a closed turn: each approved answer, and a skip line for each hand not taken
    (and a note when the turn was cancelled)."""
    lines: list[dict[str, Any]] = []
    if turn.cancelled == "judging":
        return [{"kind": "note", "text": f"⏹ Turn cancelled while judging the wills ({turn.cancel_reason})."}]
    if (note := unread_note(turn)) is not None:
        lines.append({"kind": "note", "text": note})
    for h in turn.hands:
        r = turn.resolved[h.model]
        if r.approved:
            text, error = turn.answers.get(h.model, ""), turn.answer_errors.get(h.model)
            notes = [cuts_note(turn.answer_cuts.get(h.model, [])), turn.answer_fallbacks.get(h.model, "")]
            lines.append(
                {
                    "kind": "answer",
                    "pid": h.model,
                    "text": plain_text(text),  # an answer stored before tidying read markdown out reads plainly too
                    "error": error,
                    "note": " ".join(n for n in notes if n),
                }
            )
        elif h.status != HandStatus.NOT_JUDGED:
            lines.append(
                {"kind": "skip", "pid": h.model, "text": _skip_words(h, r, turn.text), "machine": skip_line(h)}
            )
    if turn.cancelled:
        lines.append({"kind": "note", "text": f"⏹ Turn cancelled ({turn.cancel_reason}): what was said is kept."})
    return lines


def unread_note(turn: TurnState) -> str | None:
    """Said once per turn when the embedding judge could not read much of the message (its hands carry the
    `embedder_unread:<share>` flag): why its wills there say little, and which judge reads it."""
    shares = []
    for flag in (f for h in turn.hands for f in h.flags if f.startswith("embedder_unread:")):
        try:
            shares.append(float(flag.split(":", 1)[1]))
        except ValueError:  # a stored run's flag that is not a number: no note rather than no page
            continue
    if not shares:
        return None
    return (
        f"⚠ The embedder (all-MiniLM-L6-v2, an English model) could not read {max(shares):.0%} of this message: "
        "the embedding judge's wills on it carry little signal. The likelihood judge reads it, and so does the "
        "multilingual embedder (Embedder: use-m3)."
    )


def _skip_words(hand: Hand, r: Resolution, message: str) -> str:
    """A skip line in words: a hand that was up says why it wanted to speak (`reason_sentence`) and who skipped
    it; a lowered hand says only that it stayed down: its reason is in the telemetry."""
    note = _skip_note(hand, r)
    if hand.status == HandStatus.RAISED and (said := reason_sentence(hand.reason, message)):
        return f"{note} — it {said}" if said.startswith(("asks", "mentions")) else f"{note} — {said}"
    return note


def _skip_note(hand: Hand, r: Resolution) -> str:
    """Why a participant did not answer, in words: its hand stayed down (and the rule that says so), or it was
    up and someone — you, the card timeout, a cancel — skipped it."""
    if hand.status == HandStatus.RAISED:
        who = {"user": "you", "batch": "you", "timeout": "the card timeout", "cancel": "the cancel"}.get(r.by, r.by)
        note = f"hand up (will {hand.will:.2f}), skipped by {who}"
    else:
        note = "hand down"
    return note + (f" ({r.rule})" if r.rule else "")
