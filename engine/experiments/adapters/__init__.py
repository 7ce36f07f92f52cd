"""The mechanisms an experiment can sweep: each one's adapter over `base.ExperimentAdapter` lives in its package
(`engine/<mechanism>/experiment.py`) and is named by its `MechanismSpec.experiment` (`engine.mechanism`); it is
looked up here, so the experiments never import a mechanism's adapter themselves."""

from engine.experiments.adapters.base import ExperimentAdapter
from engine.mechanism import mechanism_spec, resolve_callable

_ADAPTERS: dict[str, ExperimentAdapter] = {}  # one adapter per mechanism, made on first use


def mechanism(name: str) -> ExperimentAdapter:
    """The experiment adapter of `name`, as its `MechanismSpec.experiment` names it."""
    spec = mechanism_spec(name)
    if not spec.experiment:
        raise ValueError(f"mechanism {name!r} has no experiment adapter")
    if name not in _ADAPTERS:
        adapter: ExperimentAdapter = resolve_callable(spec.experiment)()
        _ADAPTERS[name] = adapter
    return _ADAPTERS[name]


__all__ = ["ExperimentAdapter", "mechanism"]
