"""A stored jury result re-decided under other settings with no model call: the consensus checks and stop rules
replayed on a prefix of its recorded rounds, then the final judgment (majority vote, weighted average, or the stack
over the seats' recorded phase-1 distributions with the selective cut and veto of `config`; the final judge needs a
call, so it cannot be re-decided)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.jury import decisions
from engine.jury.decisions import DiscussionRound, JurorSeat, panel_consensus
from engine.jury.stacked import StackedPanel


def redecide(result: Any, config: Any, rubric: Any, usage: Mapping[int, tuple[int, int, float]] | None = None) -> Any:
    """The result a jury with `config` reaches on the calls of `result` (recorded at the widest setting), with
    no model call — what the Jury page's and Replay's "what if" and every experiment cell decide:
    the consensus checks and stop rules replayed on a prefix of its rounds, then the final judgment. Raises
    ValueError when `config` needs more rounds than were recorded, or a final-judge call."""
    if config.final_judgment_method == "final_judge":
        raise ValueError("final_judge needs a model call: not derivable from a recording")
    recorded = result.discussion_rounds
    collaborative = getattr(config, "use_collaborative", True)  # false: phase 1 and the final judgment only
    if collaborative and config.max_discussion_rounds > len(recorded):
        if result.termination_reason not in ("max_rounds", "no_discussion"):
            raise ValueError("the recording stopped early: record at threshold 2.0 with no stagnation stop")
        raise ValueError(f"{config.max_discussion_rounds} rounds asked, {len(recorded)} recorded")
    phase1 = result.phase1_evaluations
    order = [e.juror_id for e in phase1]
    phase1_consensus = panel_consensus(phase1, config.consensus_threshold)
    latest = {e.juror_id: e for e in phase1}
    rounds: list[Any] = []
    reason = decisions.phase1_stop(phase1_consensus, config.max_discussion_rounds, collaborative) or "max_rounds"
    if reason == "max_rounds":
        still = 0
        for number in range(1, config.max_discussion_rounds + 1):
            statements = recorded[number - 1].statements
            for st in statements:
                latest[st.juror_id] = st.updated_evaluation
            consensus = panel_consensus([latest[j] for j in order], config.consensus_threshold)
            rounds.append(
                DiscussionRound(
                    round_number=number, statements=statements, consensus_check=consensus, speaker_order=order
                )
            )
            still = decisions.stagnant_rounds(still, decisions.positions_moved(statements))
            stop = decisions.round_stop(
                consensus,
                still,
                number,
                max_discussion_rounds=config.max_discussion_rounds,
                stagnation_rounds=config.stagnation_rounds,
            )
            if stop:
                reason = stop
                break
    if config.final_judgment_method in ("auto", "stack"):
        judgment = _stacked(phase1, [latest[j] for j in order], config, rubric)
    else:
        judgment = decisions.decide_final(
            [latest[j] for j in order],
            config.final_judgment_method,
            tie_policy=config.tie_policy,
            pass_at=rubric.pass_at,
            review_at=rubric.review_at,
            verdicts=rubric.verdicts,
        )
    prompt = completion = 0
    cost = 0.0
    for call_id in call_ids(phase1, rounds):
        p, c, d = (usage or {}).get(call_id, (0, 0, 0.0))
        prompt, completion, cost = prompt + p, completion + c, cost + d
    return decisions.jury_result(
        phase1,
        phase1_consensus,
        rounds,
        judgment,
        reason,
        case_id=result.case_id,
        jurors=result.jurors,
        usage=(prompt, completion, cost),
        wall_s=result.wall_s,
        identical_seats=result.identical_seats,
    )


def call_ids(phase1: Sequence[Any], rounds: Sequence[Any]) -> list[int]:
    """The recorded calls a (re-decided) result rests on: phase 1's and each kept round's."""
    ids = [e.call_id for e in phase1 if e.call_id is not None]
    for rnd in rounds:
        for st in rnd.statements:
            ev = st.updated_evaluation
            if ev is not None and ev.call_id is not None:
                ids.append(ev.call_id)
    return ids


class _Recorded(StackedPanel):
    """A stacked panel made of a recording's seats: every seat that recorded a distribution reads by one."""

    def __init__(self, seats: list[JurorSeat], config: Any) -> None:
        self.seats, self.config = seats, config

    def by_distribution(self, seat: JurorSeat) -> bool:
        return True


def _stacked(phase1: Sequence[Any], latest: list[Any], config: Any, rubric: Any) -> Any:
    """The stacked final judgment of a recording (its phase-1 distributions through the stack fitted for its
    seats' models); ValueError when its seats recorded no distributions or no stack is fitted for them."""
    if not phase1 or not all(e.distribution for e in phase1):
        raise ValueError("the stack reads each seat's distribution, which this run's seats did not record")
    seats = [JurorSeat(juror_id=e.juror_id, model_id=str(e.model_id), role_name=e.role_name or "") for e in phase1]
    panel = _Recorded(seats, config)
    stack = panel.stack_map(rubric)
    if stack is None:
        raise ValueError(panel.stack_trouble(rubric) or "no stack is fitted for this run's seats")
    return panel._stack_final(list(phase1), latest, rubric, stack)
