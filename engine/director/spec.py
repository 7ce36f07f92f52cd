"""The director in the mechanism registry (`engine.mechanism`)."""

from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole, register_mechanism

SPEC = register_mechanism(
    MechanismSpec(
        name="director",
        label="Director rubric",
        demo_page="director",
        experiment="engine.director.experiment:DirectorAdapter",
        experiment_cases="data/scripts/beach.jsonl",
        experiment_space="format_warn_lines: [2, 4]\ntone_pass: [1, 2]\n",
        tables=(
            ExportTable(
                "director_lines",
                "each reviewed line or draft with every rule's status",
                "engine.director.exports:lines",
            ),
            ExportTable("director_turns", "each turn of a dialogue", events=("director_turn",)),
            ExportTable("director_batch", "a script's lines scored by the rubric", "engine.director.exports:batch"),
            ExportTable(
                "director_eval_items",
                "one line per labelled line of `director eval`",
                events=("director_eval_item",),
            ),
            ExportTable(
                "director_hit_rates",
                "a script's rule hit rates with 95 % Wilson intervals",
                "engine.director.exports:hit_rates",
            ),
        ),
        scorecard=ScorecardRole(
            "agreement",
            True,
            0.6,
            "README goal for the director rubric",
            run="engine.director.scorecard:run_director",
            steps="engine.director.scorecard:director_steps",
            paired="engine.director.scorecard:paired_director",
            methods=("signals", "generate", "likelihood"),  # DirectorConfig.rubric_judge
            diagnoses="engine.director.scorecard:judge_diagnoses",
        ),
        order={"experiments": 4, "scorecard": 3, "exports": 2, "labels": 2},
        labels=LabelSpec(
            ("ok", "retry"),
            "engine.director.labels:item_key",
            positive="retry",
            readers={
                "director.check": "engine.director.labels:check_items",
                "director.batch": "engine.director.labels:batch_items",
            },
        ),
    )
)
