"""`judgelab director check | batch`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from dashboard.commands import fail, run_eval, say, usable_model
from dashboard.mechanism_ui import DemoFlow, FigureBuilder, LabelWords, MechanismUI

if TYPE_CHECKING:
    from engine.director.config import DirectorConfig
    from engine.refit import RefitJob

T = TypeVar("T")

app = typer.Typer(help="Director: hard rules and an LLM rubric for a character's line.", no_args_is_help=True)
# This mechanism's page, sub-app, report figures and calibration job (`dashboard.mechanism_ui`).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
RubricJudge = Annotated[
    str,
    typer.Option(
        "--rubric-judge",
        help="auto (default: signals for the bundled Gemma, generate for other models) | signals (each "
        "criterion from a signal the bundled Gemma and the multilingual embedder carry, through maps fitted on "
        "labelled lines) | generate (the model writes five scores as JSON) | likelihood (each criterion's expected "
        "value over 1-5 from the calibrated likelihood of the digits; models that can score).",
    ),
]


def _rubric_judge(value: str, model_id: str | None) -> str:
    """`auto`: the signals for the bundled Gemma run by llama.cpp (the judge with measured signal on it), the model
    writing its scores otherwise; any other value as given (a wrong one is refused by the settings)."""
    if value != "auto":
        return value
    if model_id is None:
        return "generate"
    # CLI start-up: loaded when the command runs
    from engine.director.signals import default_rubric_judge
    from models.catalog import CatalogError, load_catalog

    try:
        backend = load_catalog().get(model_id).backend
    except (CatalogError, KeyError):
        return "generate"  # the model's own check names what is wrong with it
    return default_rubric_judge(model_id, backend)


Character = Annotated[str, typer.Option("--character", help="Character id (data/characters/<id>.yaml).")]
Mend = Annotated[
    bool,
    typer.Option(
        "--mend/--no-mend",
        help="MODIFY (the seed's §1): a line that passes but for what the director can mend itself (over the length "
        "advice, a praise word said alone, a doubled ！) is shown mended; --no-mend shows it as written (PASS/WARN).",
    ),
]


_fail = fail


def _profile(character: str) -> Any:
    # CLI start-up: loaded when the command runs
    from engine.config import ConfigError
    from engine.director.config import load_character

    try:
        return load_character(character)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _store_and_models(model_id: str | None) -> tuple[Any, Any]:
    """The store, and the model source for `model_id` (None for rules only) once the model is usable."""
    if model_id is None:
        from engine.store import Store, StoreError  # CLI start-up

        try:
            return Store(), None
        except StoreError as exc:
            raise _fail(str(exc)) from None
    store, model = usable_model(model_id)
    return store, lambda _id: model


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run an entry point; a model failure the policy does not absorb exits 3 with its message."""
    # CLI start-up: loaded when the command runs
    from engine.config import ConfigError
    from models.errors import ModelError

    try:
        return asyncio.run(coro)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    except ModelError as exc:
        raise _fail(str(exc), code=3) from None


def _director_config(**values: object) -> DirectorConfig:
    """The director's settings from the command's options; a bad value names its option."""
    from pydantic import ValidationError  # CLI start-up

    from engine.director.config import DirectorConfig  # CLI start-up

    try:
        return DirectorConfig.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        option = {"rubric_judge": "--rubric-judge", "on_retries_exhausted": "--policy", "max_retries": "--max-retries"}
        name = str(err["loc"][0]) if err["loc"] else "director"
        raise _fail(f"{option.get(name, name)}: {err['msg']}") from None


@app.command("check")
def check_cmd(
    text: Annotated[str, typer.Argument(help="The line to judge.")],
    character: Character,
    rules_only: Annotated[bool, typer.Option("--rules-only", help="Hard rules only, no model.")] = False,
    model_id: Annotated[str, typer.Option("--model", help="Model for the rubric.")] = "gemma3-270m",
    scene: Annotated[str, typer.Option(help="The scene, for the rubric's frame criterion.")] = "",
    previous: Annotated[
        str, typer.Option("--previous", help="The partner's previous line, for the connectivity criterion.")
    ] = "",
    rubric_judge: RubricJudge = "auto",
    mend: Mend = True,
    as_json: JsonFlag = False,
) -> None:
    """Judge one line: every rule with its status, the tone breakdown, the rubric, the final status (and, for
    MODIFY, the mended line); recorded as a run of kind `director.check`."""
    from engine.director.review import CheckConfig, review_line  # CLI start-up

    _profile(character)
    if not text.strip():
        raise _fail("the line is empty")
    config = CheckConfig(
        character=character,
        text=text,
        scene=scene,
        previous=previous,
        model_id=None if rules_only else model_id,
        director=_director_config(
            rubric_judge=_rubric_judge(rubric_judge, None if rules_only else model_id), mend=mend
        ),
    )
    store, models = _store_and_models(config.model_id)
    result = _run(review_line(config, models, store))
    payload = result.review.payload()
    if as_json:
        say(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    say(f"{payload['status']}  {payload['normalized']}")
    if payload.get("mended") is not None:
        say(f"  mended → {payload['mended']}")
        for change in payload["changes"]:
            say(f"    {change}")
    for rule in payload["rules"]:
        say(f"  {rule['status']:<5} {rule['rule']:<18} {rule['detail']}")
    tone = payload["tone"]
    say(f"  tone {tone['score']} = marker {tone['marker']} + vocab {tone['vocab']} + style {tone['style']}")
    if payload["rubric"]:
        say(f"  rubric {payload['rubric']['status']}: {payload['rubric']}")
    say(f"run {result.run_id}")


@app.command("batch")
def batch_cmd(
    character: Character,
    file: Annotated[Path, typer.Option("--file", help="A .jsonl or .csv script of utterances.")],
    model_id: Annotated[
        str | None,
        typer.Option(
            "--model", help="Also score the LLM rubric with this model (lines the rules RETRY are not scored)."
        ),
    ] = None,
    scene: Annotated[str, typer.Option(help="The scene, for the rubric's frame criterion.")] = "",
    rubric_judge: RubricJudge = "auto",
    mend: Mend = True,
    as_json: JsonFlag = False,
) -> None:
    """Judge every line of a script — each character keeps its conversation state, so the loop and early-topic
    rules fire as in a live dialogue — one line per utterance, then rule hit rates; a run of kind
    `director.batch`."""
    # CLI start-up
    from engine.director.batch import ScriptConfig, run_script, share_text
    from engine.director.scripts import ScriptError, load_script

    try:
        lines = load_script(file)
    except ScriptError as exc:
        raise _fail(str(exc)) from None
    for cid in dict.fromkeys(ln.character or character for ln in lines):
        _profile(cid)
    config = ScriptConfig(
        lines=lines,
        character=character,
        source=file.name,
        scene=scene,
        model_id=model_id,
        director=_director_config(rubric_judge=_rubric_judge(rubric_judge, model_id), mend=mend),
    )
    store, models = _store_and_models(model_id)
    result = _run(run_script(config, models, store))
    out = (  # one row at a time: a long script's table is not built a second time
        {"id": r.id, "character": r.character, "text": r.text, "status": r.status, "rules": r.rules, "tone": r.tone}
        | ({"mended": r.mended, "changes": list(r.changes)} if r.mended is not None else {})
        | ({"rubric": r.rubric} if model_id else {})
        for r in result.rows
    )
    counts, rates = result.status_counts, result.hit_rates
    if as_json:
        for row in out:
            say(json.dumps(row, ensure_ascii=False))
        say(
            json.dumps(
                {
                    "summary": {
                        "lines": len(result.rows),
                        "status_counts": counts,
                        "hit_rates": rates,
                        "run_id": result.run_id,
                    }
                },
                ensure_ascii=False,
            )
        )
        return
    for row in out:
        say(f"{row['status']:<6} {row['id']:<10} {row['text']}")
        if row.get("mended") is not None:
            say(f"{'':<6} {'':<10} → {row['mended']}")
    say(f"{len(result.rows)} lines · " + " · ".join(f"{k} {v}" for k, v in counts.items()))
    for rule, rate in rates.items():
        say(f"  {rule:<18} warn {share_text(rate, 'warn')}  retry {share_text(rate, 'retry')}")
    say(f"run {result.run_id}")


@app.command("duo")
def duo_cmd(
    first: Annotated[str, typer.Option("--first", help="The character who speaks first.")] = "yana",
    second: Annotated[str, typer.Option("--second", help="The other character.")] = "ayu",
    model_id: Annotated[str, typer.Option("--model", help="The model both characters speak with.")] = "gemma3-270m",
    topic: Annotated[str, typer.Option(help="What they talk about.")] = "夏の思い出",
    scene: Annotated[str, typer.Option(help="Where they are.")] = "海辺の散歩",
    turns: Annotated[int, typer.Option(min=1, max=20, help="Lines in all.")] = 4,
    retries: Annotated[int, typer.Option("--max-retries", min=0, max=10, help="Retries of a rejected line.")] = 2,
    policy: Annotated[str, typer.Option("--policy", help="When retries run out: mark | accept_last | drop.")] = "mark",
    rubric: Annotated[bool, typer.Option("--rubric", help="Score the LLM rubric on every line.")] = False,
    rubric_judge: RubricJudge = "generate",
    mend: Mend = True,
    as_json: JsonFlag = False,
) -> None:
    """Two characters talk; every line goes through its director (a rejected draft goes back with the
    director's reasons and suggestion); a run of kind `director.duo`."""
    from pydantic import ValidationError  # CLI start-up

    from engine.director.dialogue import DuoConfig, run_duo  # CLI start-up

    for cid in (first, second):
        _profile(cid)
    try:
        config = DuoConfig(
            first=first,
            second=second,
            model_id=model_id,
            topic=topic,
            scene=scene,
            turns=turns,
            rubric=rubric,
            director=_director_config(
                max_retries=retries, on_retries_exhausted=policy, rubric_judge=rubric_judge, mend=mend
            ),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(f"{'.'.join(str(p) for p in err['loc']) or 'duo'}: {err['msg']}") from None
    store, models = _store_and_models(model_id)
    result = _run(run_duo(config, models, store))
    transcript = result.transcript()
    if as_json:
        say(json.dumps({"run_id": result.run_id, "turns": transcript}, ensure_ascii=False, indent=2))
        return
    for turn in transcript:
        retried = len(turn["attempts"]) - 1
        say(
            f"{turn['status']:<6} {turn['speaker']:<6} {turn['text'] if turn['text'] is not None else '—'}"
            + (f"  ({turn['outcome']}, {retried} retr{'y' if retried == 1 else 'ies'})" if retried else "")
        )
    say(f"run {result.run_id}")


@app.command("eval")
def eval_cmd(
    cases_file: Annotated[
        Path,
        typer.Option(
            "--cases",
            help='Labelled lines, JSONL: {"id", "character", "topic", "previous", "text", "acceptable": true|false} '
            "a line (docs/data-formats.md).",
        ),
    ],
    model_id: Annotated[str, typer.Option("--model", help="Model for the rubric.")] = "gemma3-270m",
    rubric_judge: RubricJudge = "auto",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N lines.")] = None,
    replay: Annotated[
        bool,
        typer.Option("--replay", help="Answer from recorded calls; a request never recorded stops with an error."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Review every labelled line as `director check` does (hard rules, then the rubric with the topic and the
    partner's previous line) in one run of kind `director.eval`: per line its status and the rubric's five scores
    and mean; in total the AUC of the rubric mean against `acceptable` on the lines the hard rules pass, by
    character, with its interval, and the statuses by label."""
    # CLI start-up: loaded when the command runs
    from engine.director.evaluation import DirectorEvalConfig, LineFileError, evaluate_lines, load_lines
    from engine.store import Store, StoreError
    from models.registry import ModelHub

    try:
        lines = load_lines(cases_file)[:limit]
    except LineFileError as exc:
        raise _fail(str(exc)) from None
    judge = _rubric_judge(rubric_judge, model_id)
    config = DirectorEvalConfig(
        source=cases_file.name, lines=lines, model_id=model_id, director=_director_config(rubric_judge=judge)
    )
    if replay:
        try:
            store = Store()
        except StoreError as exc:
            raise _fail(str(exc)) from None
    else:
        store, _ = usable_model(model_id)
    hub = ModelHub(call_log=store)

    def line(item: dict[str, Any]) -> None:
        if not as_json:
            label = "ok " if item["acceptable"] else "bad"
            mean = "—" if item["rubric_score"] is None else f"{item['rubric_score']:.2f}"
            say(f"{item['status']:<5} {label} {item['id'][:24]:<24} rubric {mean}", err=True)

    run_id, items, totals = run_eval(evaluate_lines(store, config, lambda m: hub.get(m, replay=replay), on_item=line))
    if as_json:
        say(json.dumps({"run_id": run_id, "rubric_judge": judge, "items": items, "totals": totals}, ensure_ascii=False))
        return
    ci = totals["auc_ci"]
    auc = "—" if totals["auc"] is None else f"{totals['auc']:.2f}" + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")
    say(f"rubric mean against acceptable: AUC {auc} on {totals['scored']} lines the hard rules pass")
    for character, part in totals["by_character"].items():
        say(f"  {character}: AUC {part['auc']} on {part['scored']} lines")
    for label, counts in totals["status_counts"].items():
        say(f"  {label}: " + " · ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    say(f"run {run_id}")


def calibration_job(data: Path, model_id: str = "gemma3-270m", limit: int | None = None) -> RefitJob:
    """The rubric signals' refit on the labelled lines (`limit`: the first N only): every line's signals read by
    the bundled Gemma and the multilingual embedder, the five criterion maps fitted
    (`director.signals.gemma3-270m+use-m3.json`). The signals are Gemma's: another `model_id` is refused."""
    # CLI start-up: loaded when the command runs
    from engine.director.config import DirectorConfig, load_character
    from engine.director.evaluation import LineFileError, load_lines
    from engine.director.signals import CRITERION_KINDS, EMBEDDER, READER, read_line
    from engine.embeddings import RecordedEmbedder
    from engine.refit import RefitJob

    if model_id != READER:
        raise _fail(f"director: the rubric signals read {READER}; refit them with --model {READER}", code=2)
    try:
        lines = load_lines(data)[:limit]
    except LineFileError as exc:
        raise _fail(str(exc)) from None
    known = {"good", *(k for kinds in CRITERION_KINDS.values() for k in kinds)}
    for number, x in enumerate(lines, 1):
        if x.kind not in known or (x.kind == "good") != x.acceptable:
            raise _fail(
                f"{data.name}: line {number} ({x.id}): kind {x.kind!r} — a calibration line needs one of "
                f"{', '.join(sorted(known))}, 'good' exactly when it is acceptable"
            )
    store, model = usable_model(model_id)
    embedder = RecordedEmbedder.for_model(model, EMBEDDER)
    profiles = {c: load_character(c) for c in {x.character for x in lines}}

    async def rows() -> list[dict[str, Any]]:
        out = []
        for x in lines:
            me = profiles[x.character]
            if not me.partner:
                raise ValueError(f"{x.character}: the rubric signals read a character against her sister")
            sister = profiles.get(me.partner) or load_character(me.partner)
            signals = await read_line(model, embedder, x.text, me, sister, topic=x.topic, previous=x.previous)
            out.append(
                {"features": signals.features, "kind": x.kind, "acceptable": x.acceptable, "character": x.character}
            )
        return out

    cfg = DirectorConfig()
    return RefitJob(
        store,
        "director",
        model_id,
        data,
        rows,  # rows of features with their labels (what fit_director_signals reads)
        lambda rows: _fit_or_none(rows, data, cfg.rubric_pass, cfg.rubric_warn),
        limit,
    )


def _fit_or_none(rows: list[dict[str, Any]], data: Path, warn: float, retry: float) -> list[Any]:
    """The rubric signals' maps; a split too small for them (a quick check on a few lines) fits none, said."""
    from engine.director.signals import fit_director_signals  # CLI start-up

    try:
        return [fit_director_signals(rows, data, warn, retry)]
    except ValueError as exc:
        say(f"director: the rubric signals' maps not refitted: {exc}", err=True)
        return []


def figures() -> Sequence[FigureBuilder]:
    # loaded when used: the report's charts load plotly
    from dashboard.mechanisms.director.report import director

    return (director,)


def demo() -> DemoFlow:
    # loaded when used: the flow loads the engine
    from engine.director.demo import record_page

    return record_page


def benchmarks() -> tuple[object, ...]:
    # loaded when used: `judgelab bench` only
    from dashboard.mechanisms.director import bench

    return (bench,)


UI = MechanismUI(
    "director",
    page="pages/director.py",
    title="Director lab",
    icon="🎬",
    url_path="director",
    cli=app,
    figures=figures,
    calibration_split="director-calib.jsonl",
    calibration_job=calibration_job,
    labels=LabelWords(
        "Director (OK / RETRY)",
        buttons={"ok": "OK", "retry": "RETRY"},
        answers={"ok": "OK", "retry": "RETRY"},
    ),
    demo=demo,
    bench=benchmarks,
)
