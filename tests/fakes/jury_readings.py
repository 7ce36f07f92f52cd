"""A stacked panel's synthetic case for the hostile-map tests: three seats (Gemma and SmolLM2 by likelihood, the
Precedent reader by neighbours), phase-1 readings written by hand, and the stacked path they take (rounds, then the
final judgment). No model is loaded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from engine.jury.config import JuryCase, JuryConfig, Rubric
from engine.jury.decisions import JurorEvaluation, JurorSeat
from engine.jury.runner import Jury, _CaseRun

STACK = "jury.stack.gemma3-270m+smollm2-135m+use-m3"
V = ["safe_pass", "needs_review", "unsafe_fail"]
SEATS = [
    JurorSeat(juror_id="j0", model_id="gemma3-270m", role_name="A", judge="likelihood"),
    JurorSeat(juror_id="j1", model_id="smollm2-135m", role_name="B", judge="likelihood"),
    JurorSeat(juror_id="j2", model_id="use-m3", role_name="C", judge="neighbours"),
]


def shipped(key: str) -> dict[str, Any]:
    """A shipped map file's content (`data/calibration/<key>.json`)."""
    return json.loads((Path("data/calibration") / f"{key}.json").read_text())


def reading(jid: str, mid: str, dist: list[float]) -> JurorEvaluation:
    best = max(range(3), key=lambda i: dist[i])
    return JurorEvaluation(
        juror_id=jid,
        model_id=mid,
        verdict=V[best],
        score=50,
        confidence=dist[best],
        role_name=jid,
        reasoning="Reads as x: because",
        distribution=dict(zip(V, dist, strict=True)),
    )


PHASE1 = [
    reading("j0", "gemma3-270m", [0.5, 0.3, 0.2]),
    reading("j1", "smollm2-135m", [0.2, 0.45, 0.35]),
    reading("j2", "use-m3", [0.05, 0.05, 0.9]),
]


def stacked_final(config: JuryConfig | None = None, seats: list[JurorSeat] | None = None) -> Any:
    """The whole stacked path of the synthetic case, as `Jury._final` takes it: the stack map (the flagged vote
    when there is none), the learned rounds, the stacked final judgment."""
    jury = Jury(seats or SEATS, {}, config or JuryConfig())
    one = _CaseRun.start(jury, JuryCase(id="c1", content="Agent: hi"), None)
    one.latest.update({e.juror_id: e for e in PHASE1})
    stack = jury.stack_map(Rubric())
    if stack is None:
        return jury.vote_instead(PHASE1, Rubric(), jury.stack_trouble(Rubric()) or "no stack")
    asyncio.run(jury._learned_discussion(one, PHASE1, stack))
    return jury._stack_final(PHASE1, list(one.latest.values()), Rubric(), stack)
