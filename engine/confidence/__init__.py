"""Confidence (GRACE): factors → score with breakdown and penalties → intervention level.

Three layers, as every mechanism here: the settings (every weight, inclusion condition, penalty factor, rounding
and level threshold is a setting; the defaults reproduce the origin's calculation exactly and, unlike the origin,
the configured weights are really used), pure decisions, and the runs that call models.

One concept a module:

- `factors`: the raw evidence of one step (`ConfidenceFactors`) and its checks, for a row and for a table;
- `settings`: `ConfidenceSettings` and the level thresholds;
- `score`: the score of one step, with its breakdown, its penalties and the reason (`calculate`). Pure;
- `levels`: the intervention levels and their one threshold table (`level_floors`), read by the decision for one
  score (`decide_level`, `decide_action`) and for an array (`levels_of`). Pure;
- `aggregation`: the score of a plan of steps (`ConfidenceAggregator`). Pure;
- `tables`: `calculate` over tables of rows at once (`score_arrays`), for calibration, the what-if views and the
  benchmark;
- `likelihood`: the self-evaluation prompt by likelihood and its PMI feature;
- `signals`: the default self-evaluation's white-box signals and their fitted maps;
- `judges`: the LLM and embedding factors (`SignalSelfEvaluator`, `LLMSelfEvaluator`, `LikelihoodSelfEvaluator`,
  `QueryCoverageCalculator`, `SourceAgreementCalculator`, `SamplingConsistency`);
- `evaluation`: the `confidence.evaluate` run kind (`evaluate`, `evaluate_answer`);
- `batch`: the `confidence.eval` run kind (a labelled file of answers, `evaluate_cases`);
- `calibration`: labelled items, the calibration report and the `confidence.calibrate` run kind
  (`calibrate_labels`).

The package re-exports nothing: import from the module that defines a name, so importing the package (its
`spec`, which the registry loads to list the mechanisms) loads nothing else.
"""
