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

The package re-exports nothing: import from the module that defines a name, so importing the package (its
`spec`, which the registry loads to list the mechanisms) loads nothing else.
"""
