"""The confidence score in the mechanism registry (`engine.mechanism`)."""

from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole, register_mechanism

SPEC = register_mechanism(
    MechanismSpec(
        name="confidence",
        label="Confidence",
        demo_page="confidence",
        experiment="engine.confidence.experiment:ConfidenceAdapter",
        experiment_cases="data/benchmarks/confidence.jsonl",
        experiment_space="thresholds.notify: [0.6, 0.7, 0.8]\nweight_self_confidence: [0.1, 0.3]\n",
        tables=(
            ExportTable("confidence_factors", "each computed confidence factor", events=("confidence_factor",)),
            ExportTable("confidence_scores", "the score, breakdown and level", events=("confidence_scored",)),
            ExportTable(
                "confidence_eval_items",
                "one line per labelled answer of `confidence eval`",
                events=("confidence_eval_item",),
            ),
            ExportTable(
                "calibration_items",
                "each labelled item with its score and level",
                "engine.confidence.exports:calibration_items",
            ),
        ),
        scorecard=ScorecardRole(
            "ece",
            False,
            0.1,
            "seed 004: a calibrated score",
            steps="engine.confidence.scorecard:confidence_steps",
            run="engine.confidence.scorecard:run_confidence",
            paired="engine.confidence.scorecard:paired_confidence",
            per_model=False,
        ),
        order={"experiments": 2, "scorecard": 4, "exports": 3, "labels": 3},
        labels=LabelSpec(
            ("right", "wrong"),  # the answer was right / wrong
            "engine.confidence.labels:item_key",
            positive="right",
            readers={
                "confidence.evaluate": "engine.confidence.labels:evaluate_items",
                "confidence.calibrate": "engine.confidence.labels:calibrate_items",
            },
            map_name="confidence.likelihood",
        ),
    )
)
