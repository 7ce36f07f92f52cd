"""`judgelab director check | batch`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from dashboard.commands import fail, say, usable_model
from dashboard.mechanism_ui import LabelWords, MechanismUI, register_ui

if TYPE_CHECKING:
    from engine.director import DirectorConfig

T = TypeVar("T")

app = typer.Typer(help="Director: hard rules and an LLM rubric for a character's line.", no_args_is_help=True)
# This mechanism's page, sub-app, report figures and calibration job (`dashboard.mechanism_ui`).
UI = register_ui(
    MechanismUI(
        "director",
        page="pages.director:render",
        title="Director lab",
        icon="🎬",
        url_path="director",
        cli="dashboard.commands.director:app",
        figures=("dashboard.report:_director",),
        order={"nav": 2, "cli": 1, "figures": 3, "demo": 2},
        labels=LabelWords(
            "Director (OK / RETRY)",
            buttons={"ok": "OK", "retry": "RETRY"},
            answers={"ok": "OK", "retry": "RETRY"},
        ),
        demo="engine.director.demo:record_page",
    )
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
RubricJudge = Annotated[
    str,
    typer.Option(
        "--rubric-judge",
        help="generate (the model writes five scores as JSON) | likelihood (each criterion's expected value "
        "over 1-5 from the calibrated likelihood of the digits; models that can score).",
    ),
]
Character = Annotated[str, typer.Option("--character", help="Character id (data/characters/<id>.yaml).")]


_fail = fail


def _profile(character: str) -> Any:
    # CLI start-up: loaded when the command runs
    from engine.config import ConfigError
    from engine.director import load_character

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

    from engine.director import DirectorConfig  # CLI start-up

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
    rubric_judge: RubricJudge = "generate",
    as_json: JsonFlag = False,
) -> None:
    """Judge one line: every rule with its status, the tone breakdown, the rubric, the final status; recorded
    as a run of kind `director.check`."""
    from engine.director import CheckConfig, review_line  # CLI start-up

    _profile(character)
    if not text.strip():
        raise _fail("the line is empty")
    config = CheckConfig(
        character=character,
        text=text,
        scene=scene,
        model_id=None if rules_only else model_id,
        director=_director_config(rubric_judge=rubric_judge),
    )
    store, models = _store_and_models(config.model_id)
    result = _run(review_line(config, models, store))
    payload = result.review.payload()
    if as_json:
        say(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    say(f"{payload['status']}  {payload['normalized']}")
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
    rubric_judge: RubricJudge = "generate",
    as_json: JsonFlag = False,
) -> None:
    """Judge every line of a script — each character keeps its conversation state, so the loop and early-topic
    rules fire as in a live dialogue — one line per utterance, then rule hit rates; a run of kind
    `director.batch`."""
    from engine.director import ScriptConfig, ScriptError, load_script, run_script, share_text  # CLI start-up

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
        director=_director_config(rubric_judge=rubric_judge),
    )
    store, models = _store_and_models(model_id)
    result = _run(run_script(config, models, store))
    out = (  # one row at a time: a long script's table is not built a second time
        {"id": r.id, "character": r.character, "text": r.text, "status": r.status, "rules": r.rules, "tone": r.tone}
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
        say(f"{row['status']:<5} {row['id']:<10} {row['text']}")
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
    as_json: JsonFlag = False,
) -> None:
    """Two characters talk; every line goes through its director (a rejected draft goes back with the
    director's reasons and suggestion); a run of kind `director.duo`."""
    from pydantic import ValidationError  # CLI start-up

    from engine.director import DuoConfig, run_duo  # CLI start-up

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
            director=_director_config(max_retries=retries, on_retries_exhausted=policy, rubric_judge=rubric_judge),
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
            f"{turn['status']:<5} {turn['speaker']:<6} {turn['text'] if turn['text'] is not None else '—'}"
            + (f"  ({turn['outcome']}, {retried} retr{'y' if retried == 1 else 'ies'})" if retried else "")
        )
    say(f"run {result.run_id}")
