"""Collaborative jury: N jurors evaluate in parallel, discuss in parallel rounds until consensus, then a
final judgment.

Phase 1: every juror evaluates the case on its own, all at once. Phase 2: up to `max_discussion_rounds`
rounds in which every juror speaks at the same time, seeing all phase-1 evaluations and every earlier
statement, and may change its verdict and scores (the origin copied the old verdict into each update,
so positions never moved). A consensus check follows phase 1 and each round; the discussion stops early
on consensus or when no position has moved for `stagnation_rounds` rounds. Phase 3: majority vote,
confidence-weighted average or a final judge model that reads the whole discussion.

Every step is an event (the seed's `round_started` / `juror_statement` / `round_completed` payloads plus
phase-1 evaluations, consensus checks and the final judgment); `JuryView` folds events into what the
pages show, so a live run and its replay render from the same fold.

One concept a module:

- `decisions`: the results and the pure rules — consensus (threshold, quorum), the discussion's stop rules
  (`phase1_stop`, `round_stop`, `stagnant_rounds`), the final methods without a model call (majority vote and
  its tie policy, weighted average, `decide_final`) and a failed juror's fallback;
- `config`: the settings (`JuryConfig`, the JURY_* variables), the rubric, the cases and the seats;
- `prompts`: the jurors' and final judge's prompts and answer schemas;
- `runner`: the `Jury` itself, a case as a stored run, its progress;
- `view`: `JuryView`, the fold of a run's events both pages render;
- `evaluation`: the case-set report.

Everything is re-exported here, so `from engine.jury import X` keeps working.
"""

from engine.jury.config import (
    ENV_NAMES,
    CaseError,
    FinalMethod,
    JuryCase,
    JuryConfig,
    Rubric,
    load_cases,
    panel_seats,
    parse_cases,
)
from engine.jury.decisions import (
    DEFAULT_VERDICTS,
    EARLY_TERMINATIONS,
    IDENTICAL_SEATS_TEXT,
    NO_VERDICT,
    THRESHOLD_PRECISION,
    CollaborativeJuryResult,
    ConsensusResult,
    ConsensusStatus,
    DiscussionRound,
    FinalJudgment,
    FinalMethodName,
    JurorEvaluation,
    JurorSeat,
    JurorStatement,
    TerminationReason,
    TiePolicy,
    check_consensus,
    decide_final,
    early_termination,
    failed_fields,
    failed_seat_flags,
    fallback_evaluation,
    idle_discussion,
    majority_vote,
    panel_consensus,
    phase1_stop,
    positions_moved,
    quorum,
    round_stop,
    stagnant_rounds,
    verdict_for_score,
    weighted_average,
    working,
)
from engine.jury.evaluation import (
    evaluate_cases,
    evaluation_item,
    evaluation_totals,
)
from engine.jury.likelihood_seats import auto_judge
from engine.jury.prompts import (
    evaluation_messages,
    final_messages,
    output_schemas,
    statement_messages,
)
from engine.jury.redecide import redecide
from engine.jury.runner import (
    Jury,
    comparable,
    progress_emit,
    run_case,
)
from engine.jury.view import (
    JuryView,
)

__all__ = [
    "evaluate_cases",
    "redecide",
    "auto_judge",
    "CaseError",
    "CollaborativeJuryResult",
    "ConsensusResult",
    "ConsensusStatus",
    "DEFAULT_VERDICTS",
    "DiscussionRound",
    "EARLY_TERMINATIONS",
    "IDENTICAL_SEATS_TEXT",
    "ENV_NAMES",
    "FinalJudgment",
    "FinalMethod",
    "FinalMethodName",
    "JurorEvaluation",
    "JurorSeat",
    "JurorStatement",
    "Jury",
    "JuryCase",
    "JuryConfig",
    "JuryView",
    "NO_VERDICT",
    "Rubric",
    "THRESHOLD_PRECISION",
    "TerminationReason",
    "TiePolicy",
    "check_consensus",
    "comparable",
    "decide_final",
    "early_termination",
    "evaluation_item",
    "evaluation_messages",
    "evaluation_totals",
    "failed_fields",
    "failed_seat_flags",
    "fallback_evaluation",
    "idle_discussion",
    "final_messages",
    "load_cases",
    "majority_vote",
    "output_schemas",
    "panel_consensus",
    "panel_seats",
    "parse_cases",
    "phase1_stop",
    "positions_moved",
    "progress_emit",
    "quorum",
    "round_stop",
    "run_case",
    "stagnant_rounds",
    "statement_messages",
    "verdict_for_score",
    "weighted_average",
    "working",
]
