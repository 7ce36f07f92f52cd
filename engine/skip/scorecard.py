"""The skip judge's row of the model scorecard (`engine.experiments.scorecard`): AUC of the recorded judgments
against the generated workload's labels and the calls the cache saves (an experiment cell over the recording made
with each model: data/recordings/skipcache-default.jsonl is the bundled Gemma's by likelihood, skipcache-<model>.jsonl
another's; a model without one says how to make it); compared with the role's best by a paired bootstrap of the AUC
over the conversation states both recordings judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import stats
from engine.config import DATA_DIR
from engine.experiments.adapters import mechanism
from engine.experiments.definition import Experiment
from engine.experiments.run import run_experiment
from engine.experiments.scorecard import ScorecardPlan
from engine.mechanism import RoleStep, ScorecardHooks, Step
from engine.skip.quality import generated_labels, judge_quality, judged_states
from engine.skip.recording import RecordedJudge
from engine.skip.simulation import calls_saved_interval, simulate
from engine.skip.workload import WorkloadSpec
from engine.store import Store

SKIP_RECORDING_MODEL = ("gemma3-270m", "likelihood")  # who recorded data/recordings/skipcache-default.jsonl
SKIP_RECORDINGS = {  # the shipped recordings of the default workload: model → (file, how it judged)
    SKIP_RECORDING_MODEL[0]: ("skipcache-default.jsonl", SKIP_RECORDING_MODEL[1]),
    "smollm2-135m": ("skipcache-smollm2-135m.jsonl", "likelihood"),  # `judgelab skip record`, the same states
}


def skip_recording(model_id: str) -> Path:
    """The skip judge's recording made with `model_id` on the default workload: a shipped one, else
    `skipcache-<model>.jsonl` beside them."""
    name = SKIP_RECORDINGS.get(model_id, (f"skipcache-{model_id}.jsonl", ""))[0]
    return DATA_DIR / "recordings" / name


def skip_method(model_id: str, can_score: bool) -> str:
    """How the model's recording judges: as it was shipped; another by likelihood where the model can score, by
    structured JSON otherwise (what `judgelab skip record --mode` is told to record it with)."""
    if model_id in SKIP_RECORDINGS:
        return SKIP_RECORDINGS[model_id][1]
    return "likelihood" if can_score else "structured"


def _shown_path(path: Path) -> str:
    """A path as a row keeps it: relative to the checkout when inside it (a shipped scorecard stays valid on
    another machine), absolute otherwise."""
    return str(path.relative_to(DATA_DIR.parent)) if path.is_relative_to(DATA_DIR.parent) else str(path)


def _skip_scored(path: Path) -> dict[str, tuple[float, bool]]:
    """Each judged state of the default workload in a recording: p(respond) and the generator's label."""

    definition = Experiment.model_validate({"name": "scorecard skip", "mechanism": "skip", "cases": str(path)})
    messages = mechanism("skip").load_cases(definition)[0][0]
    return judged_states(RecordedJudge.load(path), generated_labels(messages))


async def run_skip(step: RoleStep) -> dict[str, Any]:
    model_id, method = step.named()

    path = skip_recording(model_id)
    if not path.is_file():
        raise LookupError(
            f"no skip recording made with {model_id}: make one with `judgelab skip record --model {model_id} "
            f"--mode {method} --output {_shown_path(path)}`"
        )
    definition = Experiment.model_validate(
        {"name": f"scorecard skip {model_id}", "mechanism": "skip", "cases": str(path)}
    )
    result = await run_experiment(definition, step.store, executor=step.executor)
    row = result.rows[0]

    messages = mechanism("skip").load_cases(definition)[0][0]
    quality = judge_quality(RecordedJudge.load(path), generated_labels(messages))
    # the saving's interval over conversation scopes: both simulations again on the recording (no model)
    hours = WorkloadSpec().hours
    without, with_ = [
        await simulate(messages, RecordedJudge.load(path), with_cache=cached, hours=hours) for cached in (False, True)
    ]
    return {
        "metrics": {
            "auc": quality["auc"],
            "auc_ci": quality["auc_ci"],
            "accuracy": quality["accuracy"],
            "accuracy_ci": quality["accuracy_ci"],
            "calls_saved_pct": row.get("calls_saved_pct"),
            "calls_saved_pct_ci": calls_saved_interval(without, with_),
            "states": quality["judged_states"],
            "replay_misses": row.get("replay_misses"),  # states the recording lacks (a failed judgment each)
        },
        "runs": [row["recording_run"], row["run_id"]],
        # its calls were made when the recording was, not in this run
        "usage": {"calls": 0, "replayed": 0, "tokens": row.get("tokens"), "latency_s": None},
        "recording": _shown_path(path),
    }


def skip_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    return [(m, skip_method(m, plan.can_score(m))) for m in plan.models]


def paired_skip(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    paths = [DATA_DIR.parent / str(r.get("recording") or "") for r in (best, row)]
    if not all(path.is_file() for path in paths):
        return None
    judged_a, judged_b = (_skip_scored(path) for path in paths)
    shared = sorted(set(judged_a) & set(judged_b))
    labels = [judged_a[k][1] for k in shared]
    return stats.paired_bootstrap(
        stats.w_auc([judged_a[k][0] for k in shared], labels), stats.w_auc([judged_b[k][0] for k in shared], labels)
    )


HOOKS = ScorecardHooks(run_skip, steps=skip_steps, paired=paired_skip)
