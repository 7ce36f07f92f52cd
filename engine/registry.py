"""The mechanism registry: every `MechanismSpec` (`engine.mechanism`), listed in one order, registration order.

The built-in mechanisms are registered when this module is imported (`BUILTIN`, the plugin table: adding a mechanism
adds its spec there); anything else (a test's toy mechanism) calls `register_mechanism`. Listing them loads their
spec modules only, which import nothing of the mechanisms themselves.
"""

from __future__ import annotations

from engine.confidence import spec as confidence
from engine.director import spec as director
from engine.handraise import spec as handraise
from engine.jury import spec as jury
from engine.mechanism import MechanismSpec, ScorecardRole
from engine.skip import spec as skip

BUILTIN = (handraise.SPEC, skip.SPEC, jury.SPEC, director.SPEC, confidence.SPEC)  # the plugin table, in order

_SPECS: dict[str, MechanismSpec] = {}


def register_mechanism(spec: MechanismSpec) -> MechanismSpec:
    """Add a mechanism (again: a spec of the same name replaces the old one); returns the spec."""
    _SPECS[spec.name] = spec
    return spec


def unregister_mechanism(name: str) -> None:
    """Remove a mechanism (a test's toy mechanism, after the test)."""
    _SPECS.pop(name, None)


def mechanisms() -> list[MechanismSpec]:
    """Every registered mechanism, in registration order."""
    return list(_SPECS.values())


def mechanism_names() -> list[str]:
    return [s.name for s in mechanisms()]


def mechanism_spec(name: str) -> MechanismSpec:
    """The spec of `name`; an unknown name is a ValueError that lists the known ones."""
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; one of {', '.join(_SPECS)}") from None


def scorecard_roles() -> dict[str, ScorecardRole]:
    """Every mechanism's scorecard role by name, in the scorecard's order."""
    return {s.name: s.scorecard for s in mechanisms() if s.scorecard is not None}


for _spec in BUILTIN:
    register_mechanism(_spec)
