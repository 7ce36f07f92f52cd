"""Judgment skip cache: a should-I-respond judgment's confidence sets how long its conversation scope is not judged
again; a new message in the scope invalidates it. And its simulator: a channel workload in simulated time, the
periodic checker with and without the cache, and what the cache saves against what it costs.

One concept a module:

- `config`: the seed's `response:` settings (`ResponseConfig`), its skip windows and the failure policy;
- `decisions`: the skip window of a confidence (`calculate_skip_seconds`) and the seed's parsing table made
  fail-safe (`parse_judgment`). Pure;
- `messages`: scopes, unreplied and eligible messages, the message source (`ListSource` in memory);
- `cache`: the cache entry (`JudgmentCache.is_valid`) and its repositories: its own `judgment_caches` table on any
  SQLAlchemy engine (kept outside the run store), or in memory;
- `likelihood`: the skip cues a base model scores and their PMI features;
- `judges`: `ModelJudge` (the seed's prompt, structured output), `ProbabilityJudge`, `LikelihoodJudge`;
- `checker`: `PeriodicChecker`, one check over every scope;
- `workload`: generated and loaded workloads in simulated time (`EPOCH`);
- `simulation`: `simulate` with and without the cache, `compare`, the first-judgment delay bound;
- `recording`: judgments recorded per conversation state (`RecordedJudge`), and a second judge recorded on the
  same states (`record_alongside`);
- `sweep`: the trade-off grid of skip windows over recorded judgments and its Pareto front;
- `quality`: a judge's AUC and accuracy against a generated workload's labels;
- `run`: the `skip.simulate` run kind (`run_simulation`), called alike by the page and the CLI.

Differences from the origin, on purpose:

- A judgment whose confidence did not parse cleanly (missing, out of range, NaN, not a number, the answer cut off
  at max_tokens, or no JSON at all) is never cached. The seed counts a missing confidence as 1.0 and clamps 7 to
  1.0: either gave a 12-hour skip on a broken answer. Here such a confidence is a failed field (0.0, flagged) and
  the scope is judged again at the next check.
- A backend error (model unreachable, timeout, rate limit) is never cached. The origin turned such an error into
  "don't respond" with confidence 0 and cached it. Here the failure policy is explicit: nothing is cached and the
  scope is judged again at the next check (or after a back-off).
- `delete_expired` is scheduled by the checker (the origin never called it).
- The checker judges a scope once per check, on its latest eligible message (unreplied, waited min_wait, younger
  than max age), instead of once per unreplied message: with several unreplied messages in one scope,
  per-message judging made each message invalidate the cache the previous one had just written, so nothing was
  ever skipped.

The package re-exports nothing: import from the module that defines a name, so importing the package (its
`spec`, which the registry loads to list the mechanisms) loads nothing else.
"""
