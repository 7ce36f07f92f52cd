"""Director: hard rules, then an LLM rubric, decide PASS / WARN / RETRY (/ MODIFY) for a character's line.

One concept a module:

- `status`: the four statuses, ordered by severity;
- `config`: the settings (`DirectorConfig`, every cut-off of the spec) and the character files
  (`CharacterProfile`: markers, vocabulary, style rule, setting phrases);
- `japanese`: the Japanese text analysis — normalisation (§2), sentences and topics (§6), double negations,
  content words;
- `rules`: the nine hard rules and special cases, `evaluate_rules`, the conversation state (`apply_state`) and
  `retune`, which re-decides stored rule facts under new cut-offs. Pure;
- `rubric`: the LLM rubric (§7), its prompts (generated JSON or the likelihood of the digits) and its failure
  policy;
- `review`: `Director.review` (rules, then the rubric), the reasons and suggestions, and the `director.check`
  run kind (`review_line`);
- `generator`: how a model writes a character's next line (`ModelLineGenerator`, `script_prompt`);
- `dialogue`: the retry loop (`run_turn`), two characters talking (`duo_dialogue`) and the `director.duo` run
  kind (`run_duo`);
- `scripts`: the batch's input files (`parse_script`, `load_script`);
- `batch`: a script through the rules and the rubric, its hit rates and retune, and the `director.batch` run kind
  (`run_script`).

The package re-exports nothing: import from the module that defines a name, so importing the package (its
`spec`, which the registry loads to list the mechanisms) loads nothing else.
"""
