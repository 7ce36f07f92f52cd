"""The jury as experiments see it: each case is recorded once at the widest setting — consensus threshold 2.0
(never consensus), no stagnation stop, the most rounds any cell asks for, the majority vote (no final-judge
call). A discussion round depends only on phase 1 and the rounds before it, never on the stopping rule, so every
stricter stop is a prefix of that recording: `derive_jury` replays the consensus checks and the stop rules on
the prefix and decides the final judgment, giving the same result a live run at that setting gives on the same
calls (tests/engine/test_experiments.py proves it against live runs)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.experiments.adapters.base import ExperimentAdapter, Loc, Models, axis_values
from engine.experiments.definition import Experiment
from engine.experiments.evidence import OUTCOMES, correct_outcomes
from engine.jury.config import JuryConfig, Rubric, load_cases, panel_seats
from engine.jury.evaluation import evaluation_item, evaluation_totals
from engine.jury.redecide import call_ids
from engine.jury.redecide import redecide as derive_jury  # the name experiments know it by
from engine.jury.runner import Jury
from engine.runctx import checkpoint, progress
from models.catalog import cached_catalog

JURY_WIDEST_THRESHOLD = 2.0  # never consensus: the discussion runs to its last round
JURY_NO_STAGNATION = 20  # the largest stagnation_rounds: never stops a recording before its last round


@dataclass
class JuryRecord:
    case: Any
    result: Any
    usage: dict[int, tuple[int, int, float]]


@dataclass
class JuryRecording:
    cases: list[JuryRecord] = field(default_factory=list)
    judge: str = "generate"


class JuryAdapter(ExperimentAdapter):
    name: str = "jury"
    decision: frozenset[str] = frozenset(
        {"consensus_threshold", "stagnation_rounds", "max_discussion_rounds", "final_judgment_method", "tie_policy"}
    )
    calls: frozenset[str] = frozenset({"panel", "model", "judge", "temperature", "max_tokens"})
    metrics: tuple[str, ...] = (
        "accuracy",
        "phase1_accuracy",
        "kappa_phase1",
        "kappa_final",
        "alpha_phase1",
        "alpha_final",
        "outcome_changed_rate",
        "rounds_mean",
        "no_verdict",
        "calls",
        "tokens",
        "cost",
    )
    default_metric: str = "accuracy"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        merged = {
            "final_judgment_method": "majority_vote",
            **{k: v for k, v in {**base, **params}.items() if k not in ("panel", "model")},
        }
        return JuryConfig.model_validate(merged)

    def widest_rounds(self, definition: Experiment) -> int:
        values = [int(v) for v in axis_values(definition, "max_discussion_rounds")]
        return max(values) if values else int(definition.base.get("max_discussion_rounds", 3))

    def seats(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[Any]:

        panel = call_params.get("panel", definition.base.get("panel", _default_panel()))
        seats = panel_seats(panel if isinstance(panel, str) else list(panel))
        model = call_params.get("model", definition.base.get("model"))
        if model:
            seats = [s.model_copy(update={"model_id": str(model)}) for s in seats]
        return seats

    def build(self, definition: Experiment, extra: dict[str, Any]) -> Any:
        config = self.config(definition.base, extra)
        if "panel" in extra or "model" in extra or not extra:
            self.seats(definition, extra)
        return config

    def checks(self, definition: Experiment, source: str) -> list[tuple[Loc, str]]:
        problems = super().checks(definition, source)
        for i, value in enumerate(axis_values(definition, "final_judgment_method")):
            if value == "final_judge":
                problems.append(
                    (
                        ("space", "final_judgment_method", i),
                        "final_judge needs a model call per cell: "
                        "sweep majority_vote and weighted_average, which are re-decided with no call",
                    )
                )
        if definition.base.get("final_judgment_method") == "final_judge":
            problems.append(
                (
                    ("base", "final_judgment_method"),
                    "final_judge needs a model call per cell: use majority_vote or weighted_average",
                )
            )
        return problems

    def load_cases(self, definition: Experiment) -> list[Any]:

        cases = load_cases(definition.case_path())
        return cases[: definition.limit] if definition.limit else cases

    def models_of(self, definition: Experiment, call_params: Mapping[str, Any]) -> list[str]:
        return sorted({s.model_id for s in self.seats(definition, call_params)})

    def recording_config(self, definition: Experiment, call_params: Mapping[str, Any]) -> Any:
        return self.config(definition.base, call_params).model_copy(
            update={
                "consensus_threshold": JURY_WIDEST_THRESHOLD,
                "stagnation_rounds": JURY_NO_STAGNATION,
                "max_discussion_rounds": self.widest_rounds(definition),
                "final_judgment_method": "majority_vote",
                "skip_idle_rounds": False,  # every round recorded, so each cell can stop where it would
            }
        )

    async def record(
        self,
        definition: Experiment,
        cases: Sequence[Any],
        call_params: Mapping[str, Any],
        models: Models,
        store: Any,
        run_id: str,
    ) -> JuryRecording:

        config = self.recording_config(definition, call_params)
        jury = Jury(self.seats(definition, call_params), models, config)
        out = JuryRecording(judge=config.judge)
        seen = 0  # calls recorded so far, for the progress
        for case in cases:
            checkpoint()
            result = await jury.run(case)
            out.cases.append(JuryRecord(case=case, result=result, usage={}))
            calls = store.call_count(run_id)
            progress(step=f"recorded {case.id}", items=1, calls=calls - seen)
            seen = calls
        usage = call_usage(store, run_id, likelihood=config.judge == "likelihood")  # `auto`: by each call
        for rec in out.cases:
            rec.usage = usage
        return out

    def decide(
        self, definition: Experiment, recording: JuryRecording, decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        items = []
        calls = 0
        for rec in recording.cases:
            rubric = rec.case.rubric or Rubric.model_validate({})
            derived = derive_jury(rec.result, config, rubric, rec.usage)
            calls += len(call_ids(derived.phase1_evaluations, derived.discussion_rounds))
            items.append(evaluation_item(rec.case, derived, tie_policy=config.tie_policy))
        totals = evaluation_totals(items, intervals=False)  # per cell: intervals come with the comparison
        return {
            "accuracy": totals["accuracy"],
            "phase1_accuracy": totals["phase1_accuracy"],
            "kappa_phase1": totals["agreement_phase1"]["fleiss_kappa"],
            "kappa_final": totals["agreement_final"]["fleiss_kappa"],
            "alpha_phase1": totals["agreement_phase1"]["krippendorff_alpha"],
            "alpha_final": totals["agreement_final"]["krippendorff_alpha"],
            "agreement_note": totals["agreement_phase1"]["note"],
            "outcome_changed_rate": totals["outcome_changed_rate"],
            "rounds_mean": totals["rounds_mean"],
            "no_verdict": totals["no_verdict"],
            "calls": calls,
            "tokens": totals["prompt_tokens"] + totals["completion_tokens"],
            "cost": totals["cost"],
            OUTCOMES: correct_outcomes([i["correct"] for i in items], [str(i["id"]) for i in items]),
        }

    def recording_json(self, recording: JuryRecording) -> dict[str, Any]:
        return {
            "judge": recording.judge,
            "cases": [
                {"case": r.case.model_dump(mode="json"), "result": r.result.model_dump(mode="json")}
                for r in recording.cases
            ],
        }


def call_usage(store: Any, run_id: str, *, likelihood: bool = False) -> dict[int, tuple[int, int, float]]:
    """Tokens and dollars of each call of a run, as the jury counts them (a likelihood juror's scoring call,
    a request with options: prompt tokens only)."""

    out: dict[int, tuple[int, int, float]] = {}
    for row in store.calls(run_id=run_id, limit=1_000_000):
        if row.id is None:
            continue
        scored = likelihood or json.loads(row.request_json or "{}").get("options") is not None
        out[row.id] = (row.prompt_tokens, 0, 0.0) if scored else (row.prompt_tokens, row.completion_tokens, row.cost)
    return out


def _default_panel() -> str:
    """The panel an experiment runs when its definition names none: `local-gemma` (three seats on the one bundled
    model, whose recorded answers every cell re-decides), or `local` in a catalog without it."""
    return "local-gemma" if "local-gemma" in cached_catalog().panels else "local"
