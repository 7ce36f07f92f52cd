"""Hand raise: before anyone answers, each model's will to speak is judged; hands at or above the threshold
are shown as cards the user approves or skips.

One concept a module:

- `decisions`: the configuration with the seed's defaults and the pure decisions (will, cooldown, over-raise
  damping, modes, @mentions, approvals, timeouts, the loop guard, the what-if `redecide`);
- `cast`: the participants and the turns the judges see;
- `judge`: the will judge, its prompts and the parsing of its answers;
- `conversation`: one conversation, message by message, as events;
- `benchmark`: the labelled judge benchmark, stored as a run;
- `calibration`: the maps of the likelihood and embedding judges, fitted through the will formula.

The package re-exports nothing: import from the module that defines a name, so importing the package (its
`spec`, which the registry loads to list the mechanisms) loads nothing else.
"""
