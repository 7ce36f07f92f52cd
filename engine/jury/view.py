"""What the Jury and Replay pages show: a fold over a run's events, so a live run and its replay render
from the same fold."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from engine.jury.decisions import NO_VERDICT


class JuryView:
    """What the Jury page shows, built only from events. The live page applies events as they arrive;
    the Replay page folds the stored events up to a step. Same events, same fold, same picture."""

    def __init__(self) -> None:
        self.case: dict[str, Any] = {}
        self.jurors: list[dict[str, Any]] = []
        self.config: dict[str, Any] = {}
        self.rubric: dict[str, Any] = {}
        self.phase1: list[dict[str, Any]] = []
        self.phase1_consensus: dict[str, Any] | None = None
        self.rounds: list[dict[str, Any]] = []
        self.ended: dict[str, Any] | None = None
        self.identical_seats = False  # every seat the same judgment by construction (not agreement)
        self.skipped: dict[str, Any] | None = None  # no round was run: none could move anyone (`text` says why)
        self.final: dict[str, Any] | None = None
        self.finished: dict[str, Any] | None = None
        self.failed: str | None = None
        self.steps = 0

    @classmethod
    def fold(cls, events: Sequence[tuple[str, Mapping[str, Any]]]) -> JuryView:
        view = cls()
        for type_, payload in events:
            view.apply(type_, payload)
        return view

    def apply(self, type_: str, payload: Mapping[str, Any]) -> None:
        self.steps += 1
        p = dict(payload)
        if type_ == "jury_started":
            self.case, self.jurors = p.get("case", {}), p.get("jurors", [])
            self.config, self.rubric = p.get("config", {}), p.get("rubric", {})
            self.identical_seats = bool(p.get("identicalSeats", False))
        elif type_ == "juror_evaluation":
            self.phase1.append(p)
        elif type_ == "consensus_check":
            self.phase1_consensus = p
        elif type_ == "round_started":
            self.rounds.append(
                {"round": p["round"], "speakerOrder": p.get("speakerOrder", []), "statements": [], "completed": None}
            )
        elif type_ == "juror_statement" and self.rounds:
            self.rounds[-1]["statements"].append(p)
        elif type_ == "round_completed" and self.rounds:
            self.rounds[-1]["completed"] = p
        elif type_ == "discussion_skipped":
            self.skipped = p
        elif type_ == "discussion_ended":
            self.ended = p
        elif type_ == "final_judgment":
            self.final = p
        elif type_ == "jury_finished":
            self.finished = p
        elif type_ == "run_failed":
            self.failed = str(p.get("error", "failed"))

    @property
    def done(self) -> bool:
        return self.finished is not None or self.failed is not None

    def seat_order(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Phase-1 evaluations in seat order (the cards' order), not in the order they arrived: a chart's legend
        and bars list the jurors as the cards do."""
        seats = [j.get("juror_id") for j in self.jurors]
        return sorted(rows, key=lambda e: seats.index(e["juror"]) if e["juror"] in seats else len(seats))

    def role(self, juror_id: str) -> str:
        return next((j["role_name"] for j in self.jurors if j["juror_id"] == juror_id), juror_id)

    def statements(self) -> list[dict[str, Any]]:
        """The continuous discussion area: every statement in the order it was made."""
        return [{**st, "roleName": self.role(st["juror"])} for rnd in self.rounds for st in rnd["statements"]]

    def positions(self) -> list[dict[str, Any]]:
        """Every juror's position at every step, in order: phase 1's evaluations, then each round's statements.
        `evaluation` is what that step's evaluation recorded (its call's times, whether it failed)."""
        rows = [
            {
                "juror": e["juror"],
                "role": self.role(e["juror"]),
                "step": 0,
                "label": "phase 1",
                "score": e["score"],
                "verdict": e["verdict"],
                "evaluation": e,
            }
            for e in self.seat_order(self.phase1)
        ]
        for rnd in self.rounds:
            for st in rnd["statements"]:
                rows.append(
                    {
                        "juror": st["juror"],
                        "role": self.role(st["juror"]),
                        "step": rnd["round"],
                        "label": f"round {rnd['round']}",
                        "score": st["newScore"],
                        "verdict": st["newVerdict"],
                        "evaluation": st.get("evaluation", {}),
                    }
                )
        return rows

    def trajectory(self) -> list[dict[str, Any]]:
        """Score and verdict per juror per step (phase 1, then each round)."""
        keep = ("juror", "role", "step", "label", "score", "verdict")
        return [
            {k: r[k] for k in keep} | {"fallback": r["evaluation"].get("fallback", False)} for r in self.positions()
        ]

    def timeline(self) -> list[dict[str, Any]]:
        """Each juror call as a bar (seconds since the run started): parallel calls overlap. A learned round's
        statement is computed, not a call (no model is asked): it has no bar."""
        rows = []
        for r in self.positions():
            ev = r["evaluation"]
            if r["step"] and str(ev.get("detail") or "").startswith("learned round"):
                continue
            start, end = ev.get("startedS"), ev.get("endedS")
            if start is not None and end is not None:
                rows.append(
                    {
                        "juror": r["juror"],
                        "role": r["role"],
                        "stage": r["label"],
                        "start": start,
                        "end": end,
                        "fallback": ev.get("fallback", False),
                    }
                )
        return rows

    def verdicts(self) -> dict[str, dict[str, int]]:
        """Verdict counts at phase 1 and, once a discussion round has run, after the discussion; a failed juror
        counts as `failed`, not as the fallback's label. Without a round (skipped, or consensus in phase 1) there
        is no "after discussion": a second bar equal to the first would show a discussion that never happened."""
        latest = {e["juror"]: "failed" if e.get("fallback") else e["verdict"] for e in self.phase1}
        first = Counter(latest.values())
        if not self.rounds:
            return {"phase 1": dict(first)}
        for st in self.statements():
            latest[st["juror"]] = "failed" if st.get("evaluation", {}).get("fallback") else st["newVerdict"]
        return {"phase 1": dict(first), "after discussion": dict(Counter(latest.values()))}

    @property
    def no_verdict(self) -> bool:
        return self.final is not None and self.final.get("verdict") == NO_VERDICT
