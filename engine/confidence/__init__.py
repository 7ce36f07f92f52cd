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

The package's public API is re-exported here, so `from engine.confidence import X` works.
"""

from engine.confidence.aggregation import (
    AggregationMethod,
    ConfidenceAggregator,
)
from engine.confidence.calibration import (
    CalibrationConfig,
    CalibrationResult,
    LabelError,
    LabelledItem,
    calibrate_labels,
    calibration_report,
    parse_labels,
    score_quality,
)
from engine.confidence.evaluation import (
    ANSWER_JUDGES,
    EvaluationConfig,
    LiveEvaluation,
    answer_judged,
    evaluate,
    evaluate_answer,
    generate_answer,
)
from engine.confidence.factors import (
    COUNT_FACTORS,
    FACTOR_FIELDS,
    UNIT_FACTORS,
    ConfidenceFactors,
    FactorError,
    check_columns,
    parse_factors,
)
from engine.confidence.judges import (
    COVERAGE_PROMPT,
    SELF_EVAL_PROMPT,
    CoverageOutput,
    FactorResult,
    LikelihoodSelfEvaluator,
    LLMSelfEvaluator,
    QueryCoverageCalculator,
    SamplingConsistency,
    SelfEvalOutput,
    SignalSelfEvaluator,
    SourceAgreementCalculator,
)
from engine.confidence.levels import (
    LEVEL_NAMES,
    SUGGESTED_ACTIONS,
    ActionDecision,
    InterventionLevel,
    decide_action,
    decide_level,
    level_bounds,
    level_floors,
    levels_of,
)
from engine.confidence.likelihood import (
    CONFIDENCE,
    VERDICT_WORDS,
    answer_prompt,
    confidence_features,
)
from engine.confidence.score import (
    ConfidenceScore,
    FactorContribution,
    Penalty,
    calculate,
    search_quality,
    tool_success,
)
from engine.confidence.settings import (
    DEFAULT_SETTINGS,
    ConfidenceSettings,
    LevelThresholds,
)
from engine.confidence.tables import (
    score_arrays,
)

__all__ = [
    "ActionDecision",
    "AggregationMethod",
    "answer_judged",
    "ANSWER_JUDGES",
    "answer_prompt",
    "calculate",
    "calibrate_labels",
    "calibration_report",
    "CalibrationConfig",
    "CalibrationResult",
    "check_columns",
    "CONFIDENCE",
    "confidence_features",
    "ConfidenceAggregator",
    "ConfidenceFactors",
    "ConfidenceScore",
    "ConfidenceSettings",
    "COUNT_FACTORS",
    "COVERAGE_PROMPT",
    "CoverageOutput",
    "decide_action",
    "decide_level",
    "DEFAULT_SETTINGS",
    "evaluate",
    "evaluate_answer",
    "EvaluationConfig",
    "FACTOR_FIELDS",
    "FactorContribution",
    "FactorError",
    "FactorResult",
    "generate_answer",
    "InterventionLevel",
    "LabelError",
    "LabelledItem",
    "level_bounds",
    "level_floors",
    "LEVEL_NAMES",
    "levels_of",
    "LevelThresholds",
    "LikelihoodSelfEvaluator",
    "LiveEvaluation",
    "LLMSelfEvaluator",
    "parse_factors",
    "parse_labels",
    "Penalty",
    "QueryCoverageCalculator",
    "SamplingConsistency",
    "score_arrays",
    "score_quality",
    "search_quality",
    "SELF_EVAL_PROMPT",
    "SelfEvalOutput",
    "SignalSelfEvaluator",
    "SourceAgreementCalculator",
    "SUGGESTED_ACTIONS",
    "tool_success",
    "UNIT_FACTORS",
    "VERDICT_WORDS",
]
