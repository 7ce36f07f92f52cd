"""The hand raise in the mechanism registry (`engine.mechanism`)."""

from engine.mechanism import ExportTable, LabelSpec, MechanismSpec, ScorecardRole, register_mechanism

SPEC = register_mechanism(
    MechanismSpec(
        name="handraise",
        label="Hand raise",
        demo_page="conversation",
        experiment="engine.handraise.experiment:HandRaiseAdapter",
        experiment_cases="data/benchmarks/handraise.jsonl",
        experiment_space="threshold: {from: 0.4, to: 0.7, step: 0.1}\nmode: [focus, brainstorm]\n",
        tables=(
            ExportTable(
                "conversation_hands",
                "one row per hand per turn: will, components, decision",
                "engine.handraise.exports:hands",
            ),
            ExportTable(
                "conversation_messages",
                "the chat: messages, answers and skip lines",
                "engine.handraise.exports:messages",
            ),
            ExportTable("handraise_eval_items", "one line per benchmark item", events=("handraise_eval_item",)),
        ),
        scorecard=ScorecardRole(
            "f1",
            True,
            0.7,
            "README goal for the hand-raise judge",
            run="engine.handraise.scorecard:run_handraise",
            paired="engine.handraise.scorecard:paired_handraise",
            methods=("judge", "likelihood"),
        ),
        order={"experiments": 0, "scorecard": 0, "exports": 1, "labels": 0},
        labels=LabelSpec(
            ("speak", "skip"),  # should this participant speak now
            "engine.handraise.labels:item_key",
            positive="speak",
            readers={
                "handraise.conversation": "engine.handraise.labels:conversation_items",
                "handraise.eval": "engine.handraise.labels:eval_items",
            },
            map_name="handraise.likelihood",
            refit="engine.handraise.label_refit:refit_hand_raise",
            usable="engine.handraise.label_refit:usable_labels",
            min_labels=10,
            default_map="engine.handraise.label_refit:default_map",
        ),
    )
)
