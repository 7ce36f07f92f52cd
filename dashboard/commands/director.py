"""`judgelab director check | batch`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dashboard.commands import fail, usable_model

app = typer.Typer(help="Director: hard rules and an LLM rubric for a character's line.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
Character = Annotated[str, typer.Option("--character", help="Character id (data/characters/<id>.yaml).")]


_fail = fail


def _profile(character: str) -> Any:
    from engine.config import ConfigError
    from engine.director import load_character

    try:
        return load_character(character)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _rubric(model_id: str | None) -> tuple[Any, Any]:
    """The rubric and the store its calls go to, or (None, None) for rules only."""
    if model_id is None:
        return None, None
    from engine.director import DirectorRubric

    store, model = usable_model(model_id)
    return DirectorRubric(model), store


@app.command("check")
def check_cmd(
    text: Annotated[str, typer.Argument(help="The line to judge.")],
    character: Character,
    rules_only: Annotated[bool, typer.Option("--rules-only", help="Hard rules only, no model.")] = False,
    model_id: Annotated[str, typer.Option("--model", help="Model for the rubric.")] = "gemma3-270m",
    scene: Annotated[str, typer.Option(help="The scene, for the rubric's frame criterion.")] = "",
    as_json: JsonFlag = False,
) -> None:
    """Judge one line: every rule with its status, the tone breakdown, the rubric, the final status."""
    from engine.director import Director
    from engine.events import run_context

    profile = _profile(character)
    rubric, store = _rubric(None if rules_only else model_id)
    director = Director(profile, rubric=rubric)
    if store is not None:
        with run_context(store, "director.check", {"character": character, "model_id": model_id, "text": text}) as run:
            review = asyncio.run(director.review(text, scene=scene))
            run.emit("director_verdict", **review.payload())
            run.summary = {"status": review.status.name}
    else:
        review = asyncio.run(director.review(text, scene=scene))
    payload = review.payload()
    if as_json:
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    typer.echo(f"{payload['status']}  {payload['normalized']}")
    for rule in payload["rules"]:
        typer.echo(f"  {rule['status']:<5} {rule['rule']:<18} {rule['detail']}")
    tone = payload["tone"]
    typer.echo(f"  tone {tone['score']} = marker {tone['marker']} + vocab {tone['vocab']} + style {tone['style']}")
    if payload["rubric"]:
        typer.echo(f"  rubric {payload['rubric']['status']}: {payload['rubric']}")


@app.command("batch")
def batch_cmd(
    character: Character,
    file: Annotated[Path, typer.Option("--file", help="A .jsonl or .csv script of utterances.")],
    as_json: JsonFlag = False,
) -> None:
    """Judge every line of a script with the hard rules: one line per utterance, then rule hit rates."""
    from engine.director import DirectorConfig, ScriptError, evaluate_rules, hit_rates, load_script

    try:
        lines = load_script(file)
    except ScriptError as exc:
        raise _fail(str(exc)) from None
    cfg = DirectorConfig()
    profiles: dict[str, Any] = {}
    verdicts = []
    out = []
    for line in lines:
        cid = line.character or character
        if cid not in profiles:
            profiles[cid] = _profile(cid)
        profile = profiles[cid]
        verdict = evaluate_rules(line.text, profile, cfg)
        verdicts.append(verdict)
        out.append({"id": line.id, "character": cid, "text": line.text, "status": verdict.status.name,
                    "rules": {r.rule: r.status.name for r in verdict.rules}, "tone": verdict.tone.score})
    rates = hit_rates(verdicts)
    counts = {s: sum(1 for o in out if o["status"] == s) for s in ("PASS", "WARN", "MODIFY", "RETRY")}
    if as_json:
        for row in out:
            typer.echo(json.dumps(row, ensure_ascii=False))
        typer.echo(json.dumps({"summary": {"lines": len(out), "status_counts": counts, "hit_rates": rates}},
                              ensure_ascii=False))
        return
    for row in out:
        typer.echo(f"{row['status']:<5} {row['id']:<10} {row['text']}")
    typer.echo(f"{len(out)} lines · " + " · ".join(f"{k} {v}" for k, v in counts.items()))
    for rule, rate in rates.items():
        typer.echo(f"  {rule:<18} warn {rate['warn']:.0%}  retry {rate['retry']:.0%}")
