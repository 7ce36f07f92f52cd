"""Sub-commands of `judgelab`, one module per mechanism, and what they share."""

from __future__ import annotations

import asyncio
from typing import Any

import typer


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print the error the way every command does (keys redacted) and return the Exit to raise."""
    from models.secrets import redact

    typer.secho(f"error: {redact(message)}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def usable_model(model_id: str) -> tuple[Any, Any]:
    """(store, model) for a catalog id, every call recorded in the store. Exit 1 for a broken catalog
    or database or an unknown id, exit 2 (with the reason) for an unavailable model."""
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


def require_models(catalog: Any, model_ids: set[str] | list[str]) -> None:
    """Every id must be in the catalog (else exit 1) and available (else exit 2, naming every one that is
    not and why)."""
    from models.registry import check_availability

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
