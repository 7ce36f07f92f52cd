"""Sub-commands of `judgelab`, one module per mechanism, and what they share."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from models.terminal import terminal_safe as terminal_safe

if TYPE_CHECKING:
    from engine.refit import RefitJob
    from models.catalog import Catalog


T = TypeVar("T")


def say(message: object = "", *, err: bool = False, nl: bool = True, fg: str | None = None) -> None:
    """Print a line the way every command does: model, case and file text is untrusted, so control and
    escape sequences are shown, never sent to the terminal (keys are redacted by the wrapped streams)."""
    typer.secho(terminal_safe(str(message)), err=err, nl=nl, fg=fg)


def say_data(data: str | bytes) -> None:
    """A data stream on stdout (a CSV, JSONL, JSON or HTML export): piped or redirected, the very bytes a file
    would hold (CR LF line ends, control characters and all; keys redacted by value as everywhere); on a
    terminal, shown as `say` shows text, so nothing in it can act on the terminal."""
    from models.secrets import redact  # CLI start-up

    text = redact(data) if isinstance(data, str) else data.decode("utf-8-sig")  # bytes: redacted by the engine
    stream = sys.stdout
    if stream is None:  # started with stdout closed (`>&-`)
        raise fail("stdout: closed — give --output FILE")
    if stream.isatty():
        say(text.replace("\r\n", "\n"), nl=False)
        return
    raw = getattr(stream, "buffer", None)
    try:
        stream.flush()
        if raw is None:  # a text-only stream (a test's): text, no newline translation on it
            stream.write(text)
        else:
            raw.write(text.encode("utf-8"))
            raw.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted; nothing more goes to the closed pipe
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        raise typer.Exit(1) from None
    except OSError as exc:
        raise fail(f"stdout: cannot write ({exc.strerror or exc})") from None


def write_output(output: Path | None, data: str | bytes, *, option: str = "--output") -> bool:
    """An export to where `--output` says: stdout when it is None or `-` (`say_data`; False returned), else
    the file, written atomically (True returned). Text is redacted by value first, so a file and stdout hold
    the same bytes. A place that cannot be written (a folder, a missing folder, a read-only one, a device such
    as /dev/full, a full disk) is a one-line error, exit 1."""
    from models.files import OutputError, write_atomic  # CLI start-up
    from models.secrets import redact  # CLI start-up

    if output is None or str(output) == "-":
        say_data(data)
        return False
    try:
        write_atomic(output, redact(data) if isinstance(data, str) else data)
    except OutputError as exc:
        raise fail(f"{option} {exc}") from None
    return True


def check_output(output: Path | None, *, option: str = "--output") -> None:
    """Refuse, before any work, an `--output` that cannot be a file (a folder, a device, in no folder)."""
    from models.files import OutputError, check_target  # CLI start-up

    if output is None or str(output) == "-":
        return
    try:
        check_target(output)
    except OutputError as exc:
        raise fail(f"{option} {exc}") from None


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print the error the way every command does (keys redacted) and return the Exit to raise."""
    from models.secrets import redact  # CLI start-up

    say(f"error: {redact(message)}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def with_options(options: type[Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """For Typer commands that share a set of options: `options` is a dataclass whose fields are annotated
    with their `typer.Option` and carry their defaults. The decorated command takes them as one `opts`
    argument; its CLI lists them after the command's own parameters, as if each command wrote them out."""
    hints = typing.get_type_hints(options, include_extras=True)
    shared = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(options)
    ]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "opts"]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            values = {p.name: kwargs.pop(p.name) for p in shared}
            command(*args, opts=options(**values), **kwargs)

        params = [*own, *shared]
        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": signature.return_annotation}
        return wrapper

    return decorate


def usable_model(model_id: str) -> tuple[Any, Any]:
    """(store, model) for a catalog id, every call recorded in the store. Exit 1 for a broken catalog
    or database or an unknown id, exit 2 (with the reason) for an unavailable model."""
    # CLI start-up: loaded when the command runs
    from engine.store import Store, StoreError
    from models.catalog import CatalogError, load_catalog
    from models.registry import ModelHub, check_availability

    try:
        catalog = load_catalog()
        spec = catalog.get(model_id)
        store = Store()
    except (CatalogError, StoreError) as exc:
        raise fail(str(exc)) from None
    except KeyError as exc:
        raise fail(str(exc.args[0])) from None
    availability = asyncio.run(check_availability(spec))
    if not availability.available:
        raise fail(f"{model_id} is unavailable: {availability.reason}", code=2)
    return store, ModelHub(catalog, call_log=store).get(model_id)


def require_models(catalog: Catalog, model_ids: set[str] | list[str]) -> None:
    """Every id must be in the catalog (else exit 1) and available (else exit 2, naming every one that is
    not and why)."""
    from models.registry import check_availability  # CLI start-up

    problems = []
    for model_id in sorted(set(model_ids)):
        try:
            spec = catalog.get(model_id)
        except KeyError as exc:
            raise fail(str(exc.args[0])) from None
        availability = asyncio.run(check_availability(spec))
        if not availability.available:
            problems.append(f"{model_id} is unavailable: {availability.reason}")
    if problems:
        raise fail("; ".join(problems), code=2)


def run_calibration(job: RefitJob, output_dir: Path | None) -> dict[str, Any]:
    """What every calibrate command does: the engine's refit (`engine.refit.refit`), its error said as one."""
    from engine.refit import RefitError, refit  # the store and the models: CLI start-up time

    try:
        return refit(job, output_dir)
    except RefitError as exc:
        raise fail(str(exc)) from exc


def calibrate_and_save(job: RefitJob, output_dir: Path | None, as_json: bool) -> None:
    """A mechanism's `calibrate` command: the refit, printed as JSON."""

    say(json.dumps(run_calibration(job, output_dir), ensure_ascii=False, indent=None if as_json else 1))


def run_eval(coro: Coroutine[Any, Any, T]) -> T:
    """A labelled-file evaluation's entry point run to its end: a replay miss exits 4 (nothing guessed, the run
    stored as failed), another model failure 3, each with its message."""
    # CLI start-up: loaded when the command runs
    from models.errors import ModelError, ReplayMiss

    try:
        return asyncio.run(coro)
    except ReplayMiss as exc:
        raise fail(f"{exc}. Nothing was guessed; the run is stored as failed", code=4) from None
    except ModelError as exc:
        raise fail(str(exc), code=3) from None
