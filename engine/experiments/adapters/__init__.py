"""The mechanisms an experiment can sweep: each one's adapter over `base.ExperimentAdapter` lives in its package
(`engine/<mechanism>/experiment.py`) and is loaded by its `MechanismSpec.experiment` (`engine.mechanism`); it is
looked up here, so the experiments never import a mechanism's adapter themselves."""

from engine.experiments.adapters.base import ExperimentAdapter
from engine.registry import mechanism_spec

_ADAPTERS: dict[str, ExperimentAdapter] = {}  # one adapter per mechanism, made on first use


def mechanism(name: str) -> ExperimentAdapter:
    """The experiment adapter of `name`, as its `MechanismSpec.experiment` loads it."""
    spec = mechanism_spec(name)
    if not spec.experiment:
        raise ValueError(f"mechanism {name!r} has no experiment adapter")
    if name not in _ADAPTERS:
        _ADAPTERS[name] = spec.experiment()()
    return _ADAPTERS[name]


__all__ = ["ExperimentAdapter", "mechanism"]
