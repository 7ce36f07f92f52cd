"""The run history: headline figures of a stored run, and two runs of one kind compared (a config diff plus
their headline figures side by side). Searching, tagging, renaming and deleting are the store's
(`Store.search_runs`, `RunFilter`, `set_tags`, `rename_run`, `delete_run`); this module only reads."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.comparison import signed, supported_digits
from engine.mechanism import RunHooks
from engine.quoting import short_text
from engine.registry import mechanisms
from engine.stats import Interval
from engine.store import Run, Store

Scalar = str | int | float | bool | None
# Summary keys that hold a whole result object: its figures are already top-level summary keys.
WHOLE_RESULTS = frozenset({"result"})
MAX_DEPTH = 2  # summary figures come from this many levels of nesting ("with_cache.judge_calls")


def flatten(value: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted path, leaf) for every leaf of a JSON-like value; list items are `[i]`. An empty dict or
    list is a leaf of its own, so a config that gains one is still a change."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{i}]")
    else:
        yield prefix, value


@dataclass(frozen=True)
class ConfigChange:
    path: str
    change: Literal["changed", "added", "removed"]
    a: object = None
    b: object = None


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ConfigChange]:
    """Every leaf that differs between two configs, in the order the first config lists them (then what
    only the second has)."""
    left, right = dict(flatten(a)), dict(flatten(b))
    changes: list[ConfigChange] = []
    for path, value in left.items():
        if path not in right:
            changes.append(ConfigChange(path, "removed", a=value))
        elif not _same(value, right[path]):
            changes.append(ConfigChange(path, "changed", a=value, b=right[path]))
    changes += [ConfigChange(path, "added", b=value) for path, value in right.items() if path not in left]
    return changes


def _same(x: object, y: object) -> bool:
    # 1 and 1.0 are one setting; True and 1 are not.
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    return bool(x == y)


def _summary_figures(summary: Mapping[str, Any], prefix: str = "", depth: int = 1) -> Iterator[tuple[str, Scalar]]:
    for key, value in summary.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, bool | int | float | str) or value is None:
            yield name, value
        elif key.endswith("_ci") and isinstance(value, list) and len(value) == 2:
            if all(_finite(v) for v in value):
                yield name, f"{value[0]:.4g}–{value[1]:.4g}"  # a figure's 95 % interval, beside it
        elif isinstance(value, Mapping) and depth < MAX_DEPTH and key not in WHOLE_RESULTS:
            yield from _summary_figures(value, name, depth + 1)


def headline(run: Run, totals: Mapping[str, Any] | None = None) -> dict[str, Scalar]:
    """The figures a run is judged by: status, duration, calls, errors, tokens and cost (what replayed calls
    would have cost, when any were replayed), then the scalar figures of its summary."""
    t = totals or {}
    figures: dict[str, Scalar] = {
        "status": run.status,
        "duration_s": None if run.duration_s is None else round(run.duration_s, 3),
        "calls": int(t.get("calls", 0)),
        "errors": int(t.get("errors", 0)),
        "tokens": int(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0)),
        "cost": float(t.get("cost", 0.0) or 0.0),
    }
    if t.get("would_cost") is not None:
        figures["would_cost"] = float(t["would_cost"])
    for name, value in _summary_figures(run.summary):
        figures.setdefault(name, value)
    for name, value in _result_intervals(run.summary, figures):
        figures.setdefault(name, value)
    return figures


def _result_intervals(summary: Mapping[str, Any], figures: Mapping[str, Scalar]) -> Iterator[tuple[str, Scalar]]:
    """The interval of a top-level figure kept only inside the whole result (the skip simulation's calls saved):
    beside its figure, as every other interval is."""
    for key in WHOLE_RESULTS:
        result = summary.get(key)
        if not isinstance(result, Mapping):
            continue
        for name, value in result.items():
            base = str(name).removesuffix("_ci")
            pair = isinstance(value, list) and len(value) == 2 and all(_finite(v) for v in value)
            if name != base and base in figures and name not in figures and pair:
                yield str(name), f"{value[0]:.4g}–{value[1]:.4g}"


@dataclass(frozen=True)
class RunComparison:
    a: Run
    b: Run
    changes: list[ConfigChange]
    figures: list[tuple[str, Scalar, Scalar]]  # name, a's value, b's value (None where a run has none)


class NotComparable(ValueError):
    """Two runs of different kinds: their configs and figures mean different things."""


def compare_runs(a: Run, b: Run, totals: Mapping[str, Mapping[str, Any]] | None = None) -> RunComparison:
    """Two runs of one kind: what their configs change, and their headline figures side by side."""
    if a.kind != b.kind:
        raise NotComparable(f"{a.id} is a {a.kind} run and {b.id} a {b.kind} run — compare two runs of one kind")
    totals = totals or {}
    left, right = headline(a, totals.get(a.id)), headline(b, totals.get(b.id))
    names = list(left) + [n for n in right if n not in left]
    return RunComparison(
        a=a, b=b, changes=config_diff(a.config, b.config), figures=[(n, left.get(n), right.get(n)) for n in names]
    )


def _digits(summary: Mapping[str, Any], prefix: str = "", depth: int = 1) -> Iterator[tuple[str, int]]:
    """(figure name, the decimals its interval supports) for every summary figure stored with a `<name>_ci`."""
    for key, value in summary.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        ci = summary.get(f"{key}_ci")
        if isinstance(value, int | float) and isinstance(ci, list | tuple) and len(ci) == 2:
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in ci):
                yield name, supported_digits(Interval(float(ci[0]), float(ci[1]), "stored", 0))
        elif isinstance(value, Mapping) and depth < MAX_DEPTH and key not in WHOLE_RESULTS:
            yield from _digits(value, name, depth + 1)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def figure_text(value: Scalar, digits: int | None = None) -> str:
    """A headline figure as people read it: a float to the digits its interval supports (`digits`), else four
    significant digits — never 0.17630555555555555, never nan."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if digits is not None else f"{value:.4g}"
    return cell(value)


def figure_rows(comparison: RunComparison, skip: frozenset[str] = frozenset()) -> list[dict[str, str]]:
    """The headline figures side by side as text — figure, A, B, B − A (one value per run: no interval; the
    compared metrics, `skip`, have theirs in the item comparison) — rounded as `figure_text`."""
    digits = dict(_digits(comparison.a.summary)) | dict(_digits(comparison.b.summary))
    rows = []
    for name, x, y in comparison.figures:
        if name in skip or name.endswith("_ci"):
            continue
        numbers = all(_finite(v) for v in (x, y))
        d = digits.get(name)
        delta = ""
        if numbers and x != y:
            gap = y - x  # type: ignore[operator]
            if isinstance(gap, int):
                delta = f"{gap:+d}"
            elif d is not None:
                delta = signed(gap, d)
            else:  # four significant digits; float noise (0.1 + 0.2 − 0.3) is 0
                noise = abs(gap) <= 1e-9 * max(1.0, abs(float(x)), abs(float(y)))  # type: ignore[arg-type]
                delta = "0" if noise else f"{gap:+.4g}"
        rows.append({"figure": name, "A": figure_text(x, d), "B": figure_text(y, d), "B − A": delta})
    return rows


def cell(value: object, limit: int = 200) -> str:
    """A config or figure value as one line of text (JSON for anything but a string), cut at `limit`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the history as people read it: experiments grouped, runs named -------------------------------------------

EXPERIMENT_KIND = "experiment"
# Runs that belong to an experiment (its cells, its recordings): listed under it, not in the history itself.
MEMBER_KINDS = ("experiment.cell", "experiment.record")
NAME_CHARS = 90


def experiment_of(run: Run) -> str | None:
    """The experiment a run belongs to (or is), None for any other run."""
    if run.kind != EXPERIMENT_KIND and run.kind not in MEMBER_KINDS:
        return None
    eid = run.config.get("experiment_id")
    return str(eid) if eid else None


def _short(text: str, limit: int = NAME_CHARS) -> str:
    return short_text(text, limit)


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def run_hooks(kind: str) -> RunHooks | None:
    """How the history names runs of `kind`: its mechanism's (`MechanismSpec.runs`; a kind is `<mechanism>.<what>`),
    None for a kind no mechanism names."""
    name = kind.partition(".")[0]
    spec = next((s for s in mechanisms() if s.name == name), None)
    return spec.runs() if spec is not None and spec.runs is not None else None


def _derived_name(run: Run, first_message: str | None) -> str:
    """What the run is about, from what it stored: its mechanism's words (a case, the first message, a script), an
    experiment's sweep or cell, a model's prompt."""
    cfg, kind = run.config, run.kind
    hooks = run_hooks(kind)
    if hooks is not None:
        return hooks.about(run, first_message)
    if kind == EXPERIMENT_KIND:
        definition = cfg.get("definition")
        name = definition.get("name") if isinstance(definition, Mapping) else None
        return str(name or "")
    if kind == "experiment.cell":
        params = cfg.get("params")
        label = "trial" if "trial" in cfg else "cell"
        number = cfg.get("trial", cfg.get("cell"))
        text = _params(params) if isinstance(params, Mapping) else ""
        return f"{label} {number}" + (f": {text}" if text else "")
    if kind == "experiment.record":
        params = cfg.get("call_params")
        return "recording" + (f": {_params(params)}" if isinstance(params, Mapping) and params else " of the cases")
    if kind in ("models.prompt", "models.check") and cfg.get("model_id"):
        return f"model {cfg['model_id']}"
    return ""


def _default_name(run: Run) -> bool:
    """A name its entry point gave without saying what the run is about (an id, a kind): replaced by the
    derived one. Any other name (given by whoever started it, or a rename) is kept."""
    name, cfg = run.name.strip(), run.config
    if not name or name == "model scorecard":
        return True
    hooks = run_hooks(run.kind)
    if hooks is not None and name in hooks.generic_names(run):
        return True
    eid = cfg.get("experiment_id")
    return bool(eid) and name.startswith(str(eid))


def display_names(store: Store, runs: Sequence[Run]) -> dict[str, str]:
    """`display_name` of each run, by id: a run whose mechanism names it by its first event (a conversation by
    its first message) reads that event, one query per event type for all of them."""
    wanted: dict[str, list[str]] = {}
    for run in runs:
        hooks = run_hooks(run.kind)
        if hooks is not None and hooks.first_event:
            wanted.setdefault(hooks.first_event, []).append(run.id)
    firsts: dict[str, str] = {}
    for event, ids in wanted.items():
        for run_id, payload in store.first_events(ids, event).items():
            text = str((payload or {}).get("text") or "")
            if text:
                firsts[run_id] = text
    return {run.id: display_name(run, firsts.get(run.id)) for run in runs}


def display_name(run: Run, first_message: str | None = None) -> str:
    """The run's name as people read it, one line: its own name when someone gave it one, else what it is
    about (a jury case's title, a conversation's first message, a script, a sweep's name or a cell's
    settings), else its stored name."""
    if run.name.strip() and not _default_name(run):
        return _short(run.name)
    return _short(_derived_name(run, first_message) or run.name)


def experiment_line(run: Run) -> str:
    """An experiment run in one line: its cells and best figure ('264 cells · best f1 0.6213 (cell 12)')."""
    summary, cfg = run.summary, run.config
    cells = summary.get("cells", cfg.get("cells"))
    parts = [f"{cells} cells" if cells is not None else "cells"]
    best, metric = summary.get("best"), summary.get("metric")
    if isinstance(best, Mapping) and metric and isinstance(best.get(metric), int | float):
        parts.append(f"best {metric} {best[metric]:.4g} (cell {best.get('cell', best.get('trial'))})")
    elif run.status == "running":
        parts.append("running")
    return " · ".join(parts)


def left_open(run: Run) -> bool:
    """An open-ended run (a conversation: its mechanism's `RunHooks.open_ended`) that was closed because its page
    went away (the browser session ended, no turn for too long, or the dashboard that held it stopped). It has no
    end of its own, so this is how most of them close: not a failure, and not "interrupted" in the sense of work
    cut off."""
    hooks = run_hooks(run.kind)
    return run.status == "interrupted" and hooks is not None and hooks.open_ended(run)


def turn_event(run: Run) -> str:
    """The event that counts an open-ended run's turns (a conversation's messages); "" for any other run."""
    hooks = run_hooks(run.kind)
    return hooks.first_event if hooks is not None and hooks.open_ended(run) else ""


def count_turns(store: Store, runs: Sequence[Run]) -> dict[str, int]:
    """The turns of each open-ended run among `runs` (`turn_event`), one query per event type."""
    wanted: dict[str, list[str]] = {}
    for run in runs:
        if turn_event(run):
            wanted.setdefault(turn_event(run), []).append(run.id)
    counts: dict[str, int] = {}
    for event, ids in wanted.items():
        counts |= store.count_events(ids, event)
    return counts


def left_open_reason(run: Run) -> str:
    """Why it was closed, in words: the registry's reason ("its browser session ended", "no turn for 30 min"),
    or the dashboard's process going away."""
    error = run.error or ""
    marker = "the conversation was left ("
    if marker in error:
        return error.split(marker, 1)[1].rsplit(")", 1)[0]
    return "the dashboard that held it stopped"


def status_words(run: Run, turns: int | None = None) -> str:
    """The run's status as the history shows it: a conversation left open says so, with its turns."""
    if not left_open(run):
        return run.status
    if turns is None:
        return "left open"
    return f"left open after {turns} turn{'s' if turns != 1 else ''}" if turns else "left open, no turn"
