"""The mechanisms an experiment can sweep, each an adapter in a module of its own over `base.Mechanism`; each is
registered by name in its mechanism's `MechanismSpec.experiment` (`engine.mechanism`), and looked up here."""

from engine.experiments.adapters.base import Mechanism
from engine.mechanism import mechanism_spec, resolve_callable

_ADAPTERS: dict[str, Mechanism] = {}  # one adapter per mechanism, made on first use


def mechanism(name: str) -> Mechanism:
    """The experiment adapter of `name`, as its `MechanismSpec.experiment` names it."""
    spec = mechanism_spec(name)
    if not spec.experiment:
        raise ValueError(f"mechanism {name!r} has no experiment adapter")
    if name not in _ADAPTERS:
        adapter: Mechanism = resolve_callable(spec.experiment)()
        _ADAPTERS[name] = adapter
    return _ADAPTERS[name]


__all__ = ["Mechanism", "mechanism"]
