"""The backends by name. Each ChatModel subclass that declares `requires` registers itself in `REGISTERED` when
its module is imported (`ChatModel.__init_subclass__`); `backends()` imports every module of models/backends
once to find them (cheap: a provider's SDK loads only when a model of it is built).

It sits below the catalog and the base class, so both can ask which backends exist (the catalog checks a spec's
`backend`, and finds the key variables a backend declares) without the catalog importing the registry above it.
The backend modules are plugins: found on disk and imported by name, so no import statement here depends on them.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING

import models.backends

if TYPE_CHECKING:
    from models.base import ChatModel

# backend name → ChatModel class, filled by the classes themselves. Read it through `backends()`, which imports
# every backend module first.
REGISTERED: dict[str, type[ChatModel]] = {}


@functools.cache
def _import_backend_modules() -> None:
    package = models.backends
    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):  # _http and the like are helpers, not backends
            importlib.import_module(f"{package.__name__}.{module.name}")


def backends() -> dict[str, type[ChatModel]]:
    """Every registered backend class by name."""
    _import_backend_modules()
    return dict(REGISTERED)


def backend_class(name: str) -> type[ChatModel]:
    known = backends()
    if name not in known:
        raise KeyError(f"unknown backend '{name}' — known backends: {', '.join(sorted(known))}")
    return known[name]
