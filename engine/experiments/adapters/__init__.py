"""The mechanisms an experiment can sweep, each an adapter in a module of its own over `base.Mechanism`; this
table is the one place they are registered by name."""

from engine.experiments.adapters.base import Mechanism
from engine.experiments.adapters.confidence import ConfidenceMechanism
from engine.experiments.adapters.director import DirectorMechanism
from engine.experiments.adapters.handraise import HandRaise
from engine.experiments.adapters.jury import JuryMechanism
from engine.experiments.adapters.skip import SkipMechanism

_MECHANISMS: dict[str, Mechanism] = {
    "handraise": HandRaise(),
    "jury": JuryMechanism(),
    "confidence": ConfidenceMechanism(),
    "skip": SkipMechanism(),
    "director": DirectorMechanism(),
}


def mechanism(name: str) -> Mechanism:
    try:
        return _MECHANISMS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; one of {', '.join(_MECHANISMS)}") from None


__all__ = ["Mechanism", "mechanism"]
