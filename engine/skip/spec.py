"""The judgment skip cache in the mechanism registry (`engine.mechanism`)."""

from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole, register_mechanism

SPEC = register_mechanism(
    MechanismSpec(
        name="skip",
        label="Skip judge",
        demo_page="skip-cache",
        experiment="engine.skip.experiment:SkipAdapter",
        experiment_cases="data/recordings/skipcache-default.jsonl",
        experiment_space="high_confidence: [0.8, 0.9]\ndefault_skip_seconds: [300, 600]\n",
        tables=(
            ExportTable("simulation", "a skip simulation with and without the cache", "engine.skip.exports:simulation"),
            ExportTable(
                "simulation_events",
                "judgments, cache hits and replies of a simulation",
                events=("judgment", "judgment_failed", "cache_hit", "reply"),
            ),
        ),
        scorecard=ScorecardRole(
            "auc",
            True,
            0.75,
            "README goal for the skip judge",
            steps="engine.skip.scorecard:skip_steps",
            run="engine.skip.scorecard:run_skip",
            paired="engine.skip.scorecard:paired_skip",
            per_model=False,
        ),
        order={"experiments": 3, "scorecard": 1, "exports": 4, "labels": 4},
        labels=LabelSpec(
            ("reply", "no_reply"),  # should have replied / should not
            "engine.skip.labels:item_key",
            positive="reply",
            map_name="skip.likelihood",
        ),
    )
)
