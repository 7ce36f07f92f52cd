"""`judgelab handraise eval | judge`."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dashboard.commands import fail, require_models, say
from dashboard.mechanism_ui import DemoFlow, FigureBuilder, LabelWords, MechanismUI

if TYPE_CHECKING:
    from engine.refit import RefitJob

app = typer.Typer(help="Hand raise: will judgments, the judge benchmark.", no_args_is_help=True)
# This mechanism's page, sub-app, report figures and calibration job (`dashboard.mechanism_ui`).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
Method = Annotated[str, typer.Option("--judge", help="likelihood | judge | self | hybrid | embedding.")]
JudgeModel = Annotated[str, typer.Option("--judge-model", help="The judge model (judge and hybrid methods).")]
Threshold = Annotated[float, typer.Option("--threshold", min=0, max=1, help="Will threshold (seed: 0.6).")]
Ensemble = Annotated[
    str | None,
    typer.Option(
        "--ensemble",
        help="likelihood judge: comma-separated models whose likelihoods are averaged with the judge model's "
        "(default: smollm2-135m, used where a map was fitted for the combination); 'none': the judge model alone.",
    ),
]
Embedder = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        help="embedding judge: the sentence embedder whose cosines it reads, through its own fitted map — minilm "
        "(all-MiniLM-L6-v2, English) or use-m3 (multilingual Universal Sentence Encoder v3); default: "
        "$HANDRAISE_EMBEDDER, else the measured default (docs/hand-raise.md).",
    ),
]
Judges = Annotated[
    str,
    typer.Option(
        "--judge",
        help="Which judge's maps to refit: all (default) | likelihood | embedding | self (the self-judgment's "
        "RESPOND-bias map of --judge-model).",
    ),
]
Embedders = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        help="Comma-separated embedders whose embedding maps are refitted (default: every one, minilm and use-m3).",
    ),
]
# `handraise chat`'s own options
Messages = Annotated[list[str], typer.Option("--message", help="A user message (repeatable: one turn each).")]
ChatMode = Annotated[str, typer.Option("--mode", help="focus | brainstorm | mention_only.")]
Seats = Annotated[
    str | None,
    typer.Option(
        "--models", help="Comma-separated model ids re-seating the default cast (cycled); default: the cast's own."
    ),
]
AnswerModel = Annotated[
    str | None,
    typer.Option(
        "--answer-model",
        help="The model that writes every participant's answers; default: SmolLM2-135M-Instruct where the "
        "catalog has it, else each participant's own model.",
    ),
]
Decide = Annotated[str, typer.Option("--decide", help="What happens to the cards: approve_all | skip_all.")]


def _embedder(value: str | None) -> str:
    """The embedding judge's embedder: --embedder, else $HANDRAISE_EMBEDDER, else the default; an unknown id
    is a clear exit naming where it came from and the known ones."""
    from engine.handraise.decisions import DEFAULT_EMBEDDER, EMBEDDER_ENV, check_embedder  # CLI start-up

    env = os.environ.get(EMBEDDER_ENV, "").strip()
    chosen, where = (value, "--embedder") if value is not None else (env, EMBEDDER_ENV) if env else (None, "")
    if chosen is None:
        return DEFAULT_EMBEDDER
    try:
        return check_embedder(chosen.strip())
    except ValueError as exc:
        raise fail(f"{where} {chosen!r}: {exc}") from None


def _ensemble(value: str | None) -> list[str] | None:
    """None: the config's default; 'none' or empty: no partners; else the ids."""
    if value is None:
        return None
    return [] if value.strip().lower() in ("", "none") else [m.strip() for m in value.split(",") if m.strip()]


def _available(model_id: str) -> bool:
    # CLI start-up: loaded when the command runs
    from models.catalog import load_catalog
    from models.registry import check_availability

    try:
        return asyncio.run(check_availability(load_catalog().get(model_id))).available
    except KeyError:
        return False


def _setup(
    method: str,
    judge_model: str,
    threshold: float,
    model_ids: list[str],
    ensemble: list[str] | None = None,
    embedder: str | None = None,
) -> tuple[Any, Any, Any]:
    """(store, model resolver, config), every needed model checked, or a clear exit. An ensemble named on the
    command line must be available; the default one falls back to the judge model alone (flagged) when not."""
    from pydantic import ValidationError  # CLI start-up

    # CLI start-up: loaded when the command runs
    from engine.handraise.decisions import HandRaiseConfig, default_ensemble
    from engine.store import Store, StoreError
    from models.catalog import CatalogError, load_catalog
    from models.registry import ModelHub

    try:
        catalog = load_catalog()
        store = Store()
    except (CatalogError, StoreError) as exc:
        raise fail(str(exc)) from None
    try:
        config = HandRaiseConfig(
            judge_method=method,
            judge_model=judge_model,
            threshold=threshold,
            likelihood_ensemble=default_ensemble(catalog.ids, judge_model) if ensemble is None else ensemble,
            embedder=_embedder(embedder),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise fail(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
    needed = set()
    if method in ("judge", "hybrid", "likelihood"):
        needed.add(judge_model)
    if method == "likelihood" and ensemble:
        needed.update(ensemble)
    if method in ("self", "hybrid"):
        needed.update(model_ids)
    require_models(catalog, needed)
    hub = ModelHub(catalog, call_log=store)
    return store, hub.get, config


@app.command("eval")
def eval_cmd(
    benchmark: Annotated[Path, typer.Option("--benchmark", help="Labelled dialogues (JSONL).")],
    method: Method = "likelihood",
    models: Annotated[
        str, typer.Option("--models", help="Comma-separated model ids for the cast (cycled).")
    ] = "gemma3-270m",
    context: Annotated[str, typer.Option("--context", help="1 | 3 | 5 | summary: what the judge sees.")] = "3",
    repeat: Annotated[int, typer.Option("--repeat", min=1, max=50, help="Judge each item K times.")] = 1,
    judge_model: JudgeModel = "gemma3-270m",
    ensemble: Ensemble = None,
    embedder: Embedder = None,
    threshold: Threshold = 0.6,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items.")] = None,
    gate: Annotated[
        bool,
        typer.Option(
            "--gate/--no-gate",
            help="likelihood and embedding judges: relevance × p(the message asks for an answer) (default on).",
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """Per item: each participant's will and whether its hand went up, per repeat; then accuracy,
    precision, recall, F1, consistency across repeats, median latency, tokens and $ cost per decision —
    all computed from the per-item lines."""
    from engine.handraise.benchmark import ContextMode, parse_benchmark, run_benchmark  # CLI start-up

    contexts: tuple[ContextMode, ...] = ("1", "3", "5", "summary")
    mode = next((c for c in contexts if c == context), None)
    if mode is None:
        raise fail(f"--context must be 1, 3, 5 or summary, not {context!r}")
    from engine.inputs import read_text  # CLI start-up

    try:
        items = parse_benchmark(read_text(benchmark), str(benchmark))[:limit]
    except ValueError as exc:  # InputError (the file) or the rows
        raise fail(str(exc)) from None
    model_ids = [m.strip() for m in models.split(",") if m.strip()]
    store, resolver, config = _setup(method, judge_model, threshold, model_ids, _ensemble(ensemble), embedder)
    config = config.model_copy(update={"gate": gate})

    run_id, lines, totals = asyncio.run(
        run_benchmark(store, items, resolver, config, mode, repeat, model_ids=model_ids)
    )
    if as_json:
        say(
            json.dumps(
                {
                    "run_id": run_id,
                    "method": method,
                    "context": context,
                    "repeat": repeat,
                    "models": model_ids,
                    "calibration": _map_line(config, lines),
                    "items": lines,
                    "totals": totals,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    for line in lines:
        first = line["runs"][0]["predictions"]
        say(
            f"{line['id']:<8} "
            + "  ".join(
                f"{pid} {p['will']:.2f}{'↑' if p['speak'] else ' '}"
                f"{'✓' if line['labels'].get(pid) == p['speak'] else '✗'}"
                for pid, p in first.items()
            )
        )
    say(_map_line(config, lines))
    say(json.dumps(totals, indent=2))
    if totals.get("cost_total") is not None:
        say(f"cost: ${totals['cost_total']:.6f} total, ${totals['cost_per_decision'] or 0:.8f} per decision")
    say(f"run {run_id}")


def _map_line(config: Any, lines: list[dict[str, Any]]) -> str:
    """Which models scored and through which fitted map: the engine's own choice, in the page's words. Where a
    likelihood partner could not score (its judgments flagged `ensemble_unavailable:<id>`), the judge model
    scored alone through its own map, and the line says so and on how many judgments."""

    from engine.handraise.judge import map_choice  # CLI start-up

    judgments = [run for line in lines for run in line["runs"]]
    down = Counter(  # per partner, the judgments it was missing from
        flag.split(":", 1)[1]
        for run in judgments
        for flag in {f for p in run["predictions"].values() for f in p.get("flags") or []}
        if flag.startswith("ensemble_unavailable:")
    )
    try:
        line = map_choice(
            config.judge_method, config.judge_model, config.likelihood_ensemble, embedder=config.embedder
        ).describe()
        for partner, count in down.items():
            alone = map_choice(config.judge_method, config.judge_model, unavailable=partner).describe()
            line = (
                alone
                if count == len(judgments)
                else f"{alone} (on {count} of {len(judgments)} judgments; the others: {line})"
            )
        return line
    except ValueError as exc:
        raise fail(str(exc)) from None


@app.command("judge")
def judge_cmd(
    scenario: Annotated[
        Path,
        typer.Option("--scenario", help="A conversation: JSON/YAML with participants? and context [{speaker, text}]."),
    ],
    method: Method = "likelihood",
    judge_model: JudgeModel = "gemma3-270m",
    ensemble: Ensemble = None,
    embedder: Embedder = None,
    threshold: Threshold = 0.6,
    as_json: JsonFlag = False,
) -> None:
    """Judge one conversation: per participant relevance, novelty, confidence, will, reason and its hand."""
    # CLI start-up: loaded when the command runs
    import yaml
    from pydantic import ValidationError

    # CLI start-up: loaded when the command runs
    from engine.handraise.benchmark import BenchItem, judge_scenario
    from engine.handraise.decisions import failure_flags
    from engine.inputs import InputError, read_text
    from models import safe_yaml

    try:
        data = safe_yaml.load(read_text(scenario))
        if data is not None and not isinstance(data, dict):
            raise TypeError(f"expected a mapping with 'context', not a {type(data).__name__}")
        item = BenchItem.model_validate({"id": scenario.stem, **(data or {})})
    except InputError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise fail(f"{scenario}: {'.'.join(str(p) for p in err['loc']) or 'scenario'}: {err['msg']}") from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise fail(f"{scenario}: {str(exc).strip()}") from None
    cast = item.cast()
    store, resolver, config = _setup(
        method, judge_model, threshold, sorted({p.model_id for p in cast}), _ensemble(ensemble), embedder
    )
    run_id, hands, facts = asyncio.run(judge_scenario(store, item, resolver, config, source=str(scenario)))
    rows = [
        {
            "model": h.model,
            "relevance": h.relevance,
            "novelty": h.novelty,
            "confidence": h.confidence,
            "will": h.will,
            "reason": h.reason,
            "hand": h.status.value,
            "flags": h.flags,
        }
        for h in hands
    ]
    if as_json:
        say(
            json.dumps(
                {
                    "run_id": run_id,
                    "method": method,
                    "judgments": rows,
                    "latency_s": round(facts.latency_s, 4),
                    "calls": facts.calls,
                    "tokens": facts.prompt_tokens + facts.completion_tokens,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    for r in rows:
        say(
            f"{'🙋' if r['hand'] == 'raised' else '  '} {r['model']:<12} will {r['will']:.2f} "
            f"(r {r['relevance']:.2f} n {r['novelty']:.2f} c {r['confidence']:.2f})  {r['reason']}"
            + (f"  ⚠ {', '.join(failure_flags(r['flags']))}" if failure_flags(r["flags"]) else "")
        )
    say(f"run {run_id}  ({facts.latency_s:.2f} s, {facts.calls} call(s))")


@app.command("calibrate")
def calibrate_cmd(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="A labelled calibration split (benchmark format), never the benchmark the judge is reported on.",
        ),
    ] = Path("data/calibration/handraise-calib.jsonl"),
    judge_model: JudgeModel = "gemma3-270m",
    ensemble: Ensemble = None,
    judges: Judges = "all",
    embedders: Embedders = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where the fitted maps go (default: data/calibration/).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Refit the likelihood judge's and the embedding judge's maps (one per embedder) on a calibration split;
    every call is recorded as a run of kind `calibration`. Each map carries its held-out figures (5-fold
    cross-validation by cast), with 95 % intervals and, for a split in several languages, by language."""
    from dashboard.commands import calibrate_and_save  # CLI start-up

    calibrate_and_save(calibration_job(data, judge_model, ensemble, None, judges, embedders), output_dir, as_json)


def calibration_job(
    data: Path,
    judge_model: str = "gemma3-270m",
    ensemble: str | None = None,
    limit: int | None = None,
    judges: str = "all",
    embedders: str | None = None,
) -> RefitJob:
    """The hand-raise refit (`limit`: the split's first N items only, for a quick check): the likelihood map
    and one embedding map per embedder (`judges`: all, likelihood or embedding; `embedders`: comma-separated
    ids, default every one)."""
    # CLI start-up: loaded when the command runs
    from engine.embeddings import EMBEDDER_ID, EMBEDDERS
    from engine.handraise.benchmark import parse_benchmark
    from engine.handraise.decisions import check_embedder
    from engine.handraise.judge import ensemble_id
    from engine.handraise.maps import calibration_rows
    from engine.inputs import read_text

    if judges == "self":
        return self_calibration_job(data, judge_model, limit)
    if judges not in ("all", "likelihood", "embedding"):
        raise fail(f"--judge must be all, likelihood, embedding or self, not {judges!r}")
    try:
        wanted = [check_embedder(e.strip()) for e in (embedders or ",".join(EMBEDDERS)).split(",") if e.strip()]
    except ValueError as exc:
        raise fail(f"--embedder: {exc}") from None
    if not wanted:
        raise fail("--embedder is empty")
    likelihood, embedding = judges in ("all", "likelihood"), judges in ("all", "embedding")
    try:
        items = parse_benchmark(read_text(data), str(data))[:limit]
    except ValueError as exc:  # InputError (the file) or the rows
        raise fail(str(exc)) from None
    partners = _ensemble(ensemble)
    store, resolver, config = _setup("likelihood" if likelihood else "embedding", judge_model, 0.6, [], partners)
    scorers = [judge_model, *(m for m in config.likelihood_ensemble if m != judge_model)]
    if partners is None and likelihood:  # the default ensemble: the partners that cannot run here are left out
        scorers = [m for m in scorers if m == judge_model or _available(m)]
    map_id = ensemble_id(judge_model, scorers[1:])
    fitted_embedders = wanted if embedding else []
    # MiniLM's rows carry the likelihood features too (the likelihood map's novelty reads MiniLM's cosines).
    featured = list(dict.fromkeys(([EMBEDDER_ID] if likelihood else []) + fitted_embedders))
    from engine.refit import RefitJob  # the store and the models: CLI start-up time

    async def rows() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for embedder_id in featured:
            scored = likelihood and embedder_id == EMBEDDER_ID
            out += await calibration_rows(
                items,
                resolver(judge_model) if scored else None,
                partners=[resolver(m) for m in scorers[1:]] if scored else (),
                embedder_id=embedder_id,
            )
        return out

    return RefitJob(
        store,
        "handraise",
        map_id if likelihood else ",".join(fitted_embedders),
        data,
        rows,
        lambda rows: _fit_with_gate(rows, items, data, map_id if likelihood else None, fitted_embedders),
        limit,
    )


def self_calibration_job(data: Path, judge_model: str = "gemma3-270m", limit: int | None = None) -> RefitJob:
    """The self map of `judge_model` (`--judge self`): the seed's self-judgment read by likelihood on the split, each
    seat judged by that model, and the map that corrects its RESPOND bias (engine/handraise/selfmaps.py)."""
    # CLI start-up: loaded when the command runs
    from engine.handraise.benchmark import parse_benchmark
    from engine.handraise.selfjudge import self_map_id
    from engine.handraise.selfmaps import fit_self_calibration, self_calibration_rows
    from engine.inputs import read_text
    from engine.judgemaps import file_sha256
    from engine.refit import RefitJob

    try:
        items = parse_benchmark(read_text(data), str(data))[:limit]
    except ValueError as exc:  # InputError (the file) or the rows
        raise fail(str(exc)) from None
    store, resolver, _ = _setup("self", judge_model, 0.6, [judge_model], None)
    _require_base_model(judge_model)

    async def rows() -> list[dict[str, Any]]:
        return await self_calibration_rows(items, resolver(judge_model))

    def fit(rows: list[dict[str, Any]]) -> list[Any]:
        return [fit_self_calibration(rows, judge_model, str(data), file_sha256(data))]

    return RefitJob(store, "handraise", self_map_id(judge_model), data, rows, fit, limit)


def _require_base_model(model_id: str) -> None:
    """A self map is read only for a model whose self-judgment is read by likelihood (a base model,
    `ModelSpec.preferred_judge`); an instruction model writes its self-judgment, so a map for it would never be
    read: refused (exit 1) before any model runs."""
    from models.catalog import load_catalog  # CLI start-up

    spec = load_catalog().get(model_id)
    if spec.preferred_judge != "likelihood":
        raise fail(
            f"--judge self: {model_id} writes its self-judgment (an instruction model), so a self map for it "
            "would never be read; a self map is fitted for a base model (e.g. gemma3-270m)"
        )


def _fit_with_gate(
    rows: list[dict[str, Any]], items: list[Any], data: Path, map_id: str | None, embedders: list[str]
) -> list[Any]:
    """The gate's map (p(the message asks for an answer), engine/handraise/gate.py) on the split's last messages,
    then the will maps, whose cross-validation reads each dialogue's held-out gate: their held-out figures are the
    gated judge's, as it runs."""
    # CLI start-up: loaded when the command runs
    from engine.embeddings import USE_ID, get_embedder
    from engine.handraise.gate import fit_gate
    from engine.handraise.maps import fit_calibrations
    from engine.judgemaps import file_sha256

    last = [next((t.text for t in reversed(it.context) if t.speaker == "user"), "") for it in items]
    labels = [any(it.labels.values()) for it in items]
    if min(sum(labels), len(labels) - sum(labels)) < 5:  # a quick check on a few items: no gate to fit
        say("handraise: too few dialogues that ask nothing (or that ask) to fit the gate: not refitted", err=True)
        return fit_calibrations(rows, map_id, str(data), file_sha256(data), embedders=embedders)
    gate, held = fit_gate(last, labels, [str(it.language or "unknown") for it in items], get_embedder(USE_ID), data)
    p = {str(it.id): v for it, v in zip(items, held, strict=True)}
    gated = [r | {"needs_answer": p.get(str(r.get("item")), 1.0)} for r in rows]
    return [*fit_calibrations(gated, map_id, str(data), file_sha256(data), embedders=embedders), gate]


def default_calibration_job(data: Path, model_id: str = "gemma3-270m", limit: int | None = None) -> RefitJob:
    """The hand-raise refit with the judge model's default likelihood partners (`calibrate-judge`)."""
    return calibration_job(data, model_id, None, limit)


@app.command("chat")
def chat_cmd(
    messages: Messages,
    method: Method = "likelihood",
    judge_model: JudgeModel = "gemma3-270m",
    ensemble: Ensemble = None,
    embedder: Embedder = None,
    threshold: Threshold = 0.6,
    mode: ChatMode = "focus",
    models: Seats = None,
    answer_model: AnswerModel = None,
    decide: Decide = "approve_all",
    as_json: JsonFlag = False,
) -> None:
    """A conversation with the default cast, one turn per --message: the will judgment, the hands, the cards
    decided by --decide, the approved answers — a run of kind `handraise.conversation`, through the same
    entry point as the Hand raise page."""
    from pydantic import ValidationError  # CLI start-up

    # CLI start-up
    from engine.handraise.conversation import (
        ConversationConfig,
        close_conversation,
        conversation_turn,
        decide_all,
        open_conversation,
        turn_json,
    )
    from engine.handraise.decisions import Mode
    from models.catalog import CatalogError, load_catalog  # CLI start-up

    if decide not in ("approve_all", "skip_all"):
        raise fail(f"--decide must be approve_all or skip_all, not {decide!r}")
    if mode not in [m.value for m in Mode]:
        raise fail(f"--mode must be focus, brainstorm or mention_only, not {mode!r}")
    if not [m for m in messages if m.strip()]:
        raise fail("--message is empty")
    cast = _cast(models, answer_model)
    store, resolver, config = _setup(
        method, judge_model, threshold, sorted({p.model_id for p in cast}), _ensemble(ensemble), embedder
    )
    try:
        require_models(load_catalog(), {p.model_id for p in cast} | {p.answering_model() for p in cast})
        conversation = ConversationConfig(participants=cast, config=config.model_copy(update={"mode": Mode(mode)}))
    except CatalogError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise fail(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
    session = open_conversation(conversation, resolver, store)

    async def talk() -> list[Any]:
        return [
            await conversation_turn(session, text, decide=decide_all(session, decide))  # type: ignore[arg-type]
            for text in messages
            if text.strip()
        ]

    try:
        turns = asyncio.run(talk())
    finally:
        summary = close_conversation(session)
    if as_json:
        say(
            json.dumps(
                {
                    "run_id": session.run_id,
                    "turns": [turn_json(t) for t in turns],
                    "tokens": {k: v for k, v in summary.items() if k != "result"},
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    _say_turns(turns, {p.id: p.name for p in cast})
    say(f"run {session.run_id} · tokens {summary['spent_tokens']} (everyone answering: {summary['baseline_tokens']})")


def _cast(models: str | None, answer_model: str | None) -> list[Any]:
    """The default cast, re-seated on `models` (comma-separated, cycled) and answering with `answer_model`."""
    from engine.handraise.cast import default_cast  # CLI start-up
    from models.catalog import load_catalog  # CLI start-up

    seats = [m.strip() for m in (models or "").split(",") if m.strip()]
    cast = [
        p.model_copy(update={"model_id": seats[i % len(seats)]}) if seats else p
        for i, p in enumerate(default_cast(load_catalog().ids))
    ]
    return [p.model_copy(update={"answer_model": answer_model}) for p in cast] if answer_model else cast


def _say_turns(turns: list[Any], names: dict[str, str]) -> None:
    """Each turn: the message, every hand with its will and what became of it, the answers."""
    from engine.handraise.decisions import failure_flags  # CLI start-up

    for turn in turns:
        say(f"> {turn.text}")
        for h in turn.hands:
            r = turn.resolved[h.model]
            mark = "🙋" if h.status.value in ("raised", "mentioned") else "  "
            say(
                f"  {mark} {names[h.model]:<11} will {h.will:.2f} → {'speaks' if r.approved else 'skips'} "
                f"({r.by}){'  ⚠ ' + ', '.join(failure_flags(h.flags)) if failure_flags(h.flags) else ''}"
            )
        for pid, text in turn.answers.items():
            say(f"  {names[pid]}: {text or turn.answer_errors.get(pid, '(no answer)')}")


def figures() -> Sequence[FigureBuilder]:
    # loaded when used: the report's charts load plotly
    from dashboard.mechanisms.handraise.report import conversation, handraise_eval

    return (
        conversation,
        handraise_eval,
    )


def demo() -> DemoFlow:
    # loaded when used: the flow loads the engine
    from engine.handraise.demo import record_page

    return record_page


def benchmarks() -> tuple[object, ...]:
    # loaded when used: `judgelab bench` only
    from dashboard.mechanisms.handraise import bench, bench_answers

    return (
        bench_answers,
        bench,
    )


UI = MechanismUI(
    "handraise",
    page="pages/handraise.py",
    title="Hand raise",
    icon="🙋",
    url_path="handraise",
    cli=app,
    figures=figures,
    calibration_split="handraise-calib.jsonl",
    calibration_job=default_calibration_job,
    labels=LabelWords(
        "Hand raise (who should speak)",
        buttons={"speak": "Should speak", "skip": "Should stay quiet"},
        answers={"speak": "speak", "skip": "stay quiet"},
        question="Should **{participant}** speak after this message?",
        usable="usable hand labels",
        usable_why="only hands judged by the likelihood judge carry the features a refit needs",
    ),
    demo=demo,
    reopens={"handraise.conversation": "its chat, charts and What-if"},
    bench=benchmarks,
)
