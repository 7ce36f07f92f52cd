"""The confidence score's row of the model scorecard (`engine.experiments.scorecard`): ECE on the labelled set, from
its recorded factors (no model) and with each model's own self-evaluation in place of the recorded one (likelihood
where the model can score, generated otherwise); compared with the role's best by a paired bootstrap of the ECE over
the labelled items (their calibration runs' scores)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine import stats
from engine.confidence.calibration import CalibrationConfig, LabelledItem, calibration_report
from engine.confidence.factors import parse_factors
from engine.confidence.judges import LikelihoodSelfEvaluator, LLMSelfEvaluator, SignalSelfEvaluator
from engine.confidence.signals import EMBEDDER, READER
from engine.config import DATA_DIR
from engine.embeddings import RecordedEmbedder
from engine.events import async_run_context
from engine.experiments.scorecard import ScorecardPlan, built_models, by_language
from engine.inputs import iter_lines, read_text
from engine.mechanism import RoleStep, ScorecardHooks, Step
from engine.runctx import progress
from engine.store import Store

if TYPE_CHECKING:
    from models.base import ChatModel


def _confidence_items(plan: ScorecardPlan) -> list[tuple[Any, str]]:
    """The labelled set as calibration items, each with its answer (what a self-evaluation reads)."""

    path = DATA_DIR / "benchmarks" / "confidence.jsonl"
    out = []
    for number, line in iter_lines(read_text(path)):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            item = LabelledItem(
                id=str(data["id"]),
                query=str(data.get("query", "")),
                correct=bool(data["correct"]),
                factors=parse_factors(data["factors"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
        out.append((item, str(data.get("answer", ""))))
    return out[: plan.limit] if plan.limit else out


async def run_confidence(step: RoleStep) -> dict[str, Any]:
    """ECE (and AUC, AURC, Brier) of the default score on the labelled set, as a stored `confidence.calibrate`
    run: with the recorded factors (`model_id` None), or with the model's own self-evaluation of each answer
    in place of the recorded `llm_self_confidence` — the one factor a model derives here."""
    model_id, method = step.model_id, step.method
    assert method is not None  # its steps name a method

    source = None if model_id is None else built_models(step.models, step.store)
    pairs = _confidence_items(step.plan)
    items = [item for item, _ in pairs]
    name = "confidence.jsonl" if model_id is None else f"confidence.jsonl · self-evaluation by {model_id} ({method})"
    flagged = 0
    # the input as `confidence.calibrate` stores it, and who derived the self-evaluation (each value an event)
    config = CalibrationConfig(labels=name, items=items).model_dump(mode="json")
    if model_id is not None:
        config["self_evaluation"] = {"model": model_id, "method": method}
    async with async_run_context(step.store, "confidence.calibrate", config, name=name) as run:
        if model_id is not None:
            assert source is not None
            progress(total=len(pairs), step=f"self-evaluation by {model_id}")
            derived = []
            judge = _judge(source(model_id), method)
            for item, answer in pairs:
                update, detail, failed = await judge(item.query, answer)
                flagged += failed
                run.emit(
                    "self_evaluated", id=item.id, value=update["llm_self_confidence"], flagged=failed, detail=detail
                )
                derived.append(item.model_copy(update={"factors": item.factors.model_copy(update=update)}))
                progress(advance=1)
            items = derived
        report = calibration_report(items)
        run.emit("confidence_calibrated", **{k: v for k, v in report.items() if k != "items"})
        run.summary = {"n": report["n"], "ece": report["ece"], "aurc": report["aurc"], "result": report}
    keys = ("ece", "ece_ci", "auc", "auc_ci", "aurc", "aurc_ci", "brier", "brier_ci")
    return {
        "metrics": {
            **{k: round(report[k], 4) if isinstance(report[k], float) else report[k] for k in keys},
            **by_language(_auc_by_language(report["items"], pairs), ("auc",)),
            "items": len(items),
            **({"self_evaluation_fallbacks": flagged} if model_id is not None else {}),
        },
        "runs": [run.run_id],
    }


_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")  # kana or kanji: the benchmark's items carry no language


def _auc_by_language(scored: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[Any, str]]) -> dict[str, Any]:
    """AUC of the score against correctness per language (Japanese where the query or answer has kana or kanji)."""
    language = {item.id: "ja" if _JAPANESE.search(item.query + answer) else "en" for item, answer in pairs}
    out = {}
    for code in ("en", "ja"):
        these = [i for i in scored if language.get(str(i["id"])) == code]
        out[code] = stats.auc_summary([float(i["score"]) for i in these], [bool(i["correct"]) for i in these])
    return out


SelfJudge = Callable[[str, str], Awaitable[tuple[dict[str, float], str, bool]]]


def _judge(model: ChatModel, method: str) -> SelfJudge:
    """What replaces the recorded factors of one labelled answer: the signals' self-confidence and query coverage
    (no sources: the labelled set holds none), or the model's own self-evaluation."""
    if method == "signals":
        signals = SignalSelfEvaluator(model, RecordedEmbedder.for_model(model, EMBEDDER))

        async def by_signals(query: str, answer: str) -> tuple[dict[str, float], str, bool]:
            own, coverage, _ = await signals.evaluate(query, answer)
            update = {"llm_self_confidence": own.value, "query_coverage": coverage.value}
            return update, own.detail, own.flagged or coverage.flagged

        return by_signals
    evaluator = LikelihoodSelfEvaluator(model) if method == "likelihood" else LLMSelfEvaluator(model)

    async def by_model(query: str, answer: str) -> tuple[dict[str, float], str, bool]:
        factor = await evaluator.evaluate(query, answer)
        return {"llm_self_confidence": factor.value}, factor.detail, factor.flagged

    return by_model


def confidence_steps(plan: ScorecardPlan, model_id: str | None) -> list[Step]:
    """The recorded factors; the default signals (SmolLM2 and the multilingual embedder, when SmolLM2 is among the
    plan's models and can score); each model's own self-evaluation (likelihood where it can score)."""
    return [
        (None, "factors"),
        *([(READER, "signals")] if READER in plan.models and plan.can_score(READER) else []),
        *((m, "likelihood" if plan.can_score(m) else "generate") for m in plan.models),
    ]


def paired_confidence(store: Store, best: dict[str, Any], row: dict[str, Any]) -> stats.Comparison | None:
    scored = [_calibration_scores(store, r["runs"][-1]) for r in (best, row)]
    if not all(scored):
        return None
    shared = sorted(set(scored[0]) & set(scored[1]))
    correct = [scored[0][k][1] for k in shared]
    return stats.paired_bootstrap(
        stats.w_ece([scored[0][k][0] for k in shared], correct),
        stats.w_ece([scored[1][k][0] for k in shared], correct),
    )


def _calibration_scores(store: Store, run_id: str) -> dict[str, tuple[float, bool]]:
    """Each labelled item's score and correctness, from a `confidence.calibrate` run's stored report."""
    run = store.get_run(run_id)
    items = ((run.summary.get("result") or {}).get("items") or []) if run else []
    return {str(i["id"]): (float(i["score"]), bool(i["correct"])) for i in items}


HOOKS = ScorecardHooks(run_confidence, steps=confidence_steps, paired=paired_confidence)
