"""The jury in the mechanism registry (`engine.mechanism`)."""

from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole, register_mechanism

SPEC = register_mechanism(
    MechanismSpec(
        name="jury",
        label="Jury",
        demo_page="jury",
        experiment="engine.jury.experiment:JuryAdapter",
        experiment_cases="data/benchmarks/jury.jsonl",
        experiment_space="consensus_threshold: [0.5, 0.67, 1.0]\nstagnation_rounds: [1, 2]\n",
        tables=(
            ExportTable(
                "jury_positions",
                "each juror's verdict and score at phase 1 and after each round",
                "engine.jury.exports:positions",
            ),
            ExportTable("jury_eval_items", "one line per case of a case-set evaluation", events=("jury_eval_item",)),
        ),
        scorecard=ScorecardRole(
            "accuracy",
            True,
            0.6,
            "README goal for the jury",
            run="engine.jury.scorecard:run_jury",
            paired="engine.jury.scorecard:paired_jury",
            methods=("generate", "likelihood"),
        ),
        order={"experiments": 1, "scorecard": 2, "exports": 0, "labels": 1},
        labels=LabelSpec(
            None,  # any verdict of the case's own set
            "engine.jury.labels:item_key",
            readers={
                "jury.run": "engine.jury.labels:case_items",
                "jury.eval.case": "engine.jury.labels:case_items",
                "jury.eval": "engine.jury.labels:eval_items",
            },
            map_name="jury.likelihood",
        ),
    )
)
