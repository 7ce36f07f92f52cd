"""The mechanism registry: one `MechanismSpec` per mechanism, the facts every engine consumer reads about it (its
experiment adapter, export tables, scorecard role, demo page) so none of them keeps its own list of names.

A mechanism's package registers its spec in a `spec.py` that imports nothing but this module; code is named by
``"module:attribute"`` references and resolved when used, so the registry never imports a mechanism and no import
cycle can close through it. The built-in specs are loaded on first use from `BUILTIN` (the plugin table: adding a
mechanism adds its spec module here); anything else (a test's toy mechanism) calls `register_mechanism`.

Surfaces that show mechanisms in a fixed order of their own (the scorecard's roles, the experiment's choices, the
export tables) sort by `MechanismSpec.order[surface]`; a spec without a position for a surface comes after those
with one, in registration order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The built-in mechanisms' spec modules, in registration order (the scorecard's order of roles).
BUILTIN = (
    "engine.handraise.spec",
    "engine.skip.spec",
    "engine.jury.spec",
    "engine.director.spec",
    "engine.confidence.spec",
)


@dataclass(frozen=True)
class ExportTable:
    """One table of a run's export (`engine.exports.tables`): built by `build` ("module:function" taking the run's
    `RunRecord`), or one flattened row per event of the types in `events`."""

    name: str
    description: str
    build: str = ""
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScorecardRole:
    """The mechanism's row in the model scorecard (`engine.experiments.scorecard`).

    `steps` ("module:function", `(plan, model_id)` → [(model_id, method), …]) says what to run: called once per
    model when `per_model`, else once with None after every per-model role; empty, a per-model role runs the model
    with each of its `methods` the plan picks (`engine.experiments.scorecard.by_method`). `run` (async, `(store,
    models, model_id, method, plan, executor)` → {"metrics", "runs", …}) runs one step; `paired` (optional,
    `(store, best_row, row)` → Comparison | None) compares a row with the role's best on the same items. The
    target is what "good enough for this role" means. `methods`: the judge methods `--methods` may pick.
    `diagnoses` (optional, `(scorecard | None)` → [Diagnosis]): what the scorecard found about the role's judges
    that have no shipped map (`judgelab models judges`, the Models page). The runner and its helpers live with
    the mechanism (`engine/<mechanism>/scorecard.py`)."""

    metric: str
    higher_is_better: bool
    target: float
    source: str
    run: str
    steps: str = ""
    per_model: bool = True
    paired: str = ""
    methods: tuple[str, ...] = ()
    diagnoses: str = ""


@dataclass(frozen=True)
class LabelSpec:
    """What a researcher's label of the mechanism's items may say, and where its items come from (`engine.labels`).

    - `values`: the values a label takes (None: any short non-empty text, e.g. a jury case's verdicts);
      `positive`: the value the judge's probability is the probability of (agreement, the queue's cut);
    - `key` ("module:function", keyword parts → str): the one way an item's key is built (`item_key`);
    - `readers`: run kind → "module:function" (`(store, run)` → [LabelItem]) reading a stored run's items;
    - `map_name`: the judge map a label-refitted version replaces (engine/judgemaps; "": none);
    - `refit` ("module:function", as `engine.labels.refit_from_labels`): refits the judge from labels ("": the
      judge records no features to refit from);
    - `usable` ("module:function", labels → int): how many of them a refit can learn from ("": all of them), and
      `min_labels` the fewest it needs (the Labels page's refit button counts against it);
    - `default_map` ("module:function", catalog model ids → map id or None): the map a refit replaces when
      neither the refit nor a label names one ("": the first model's)."""

    values: tuple[str, ...] | None
    key: str
    positive: str = ""
    readers: Mapping[str, str] = field(default_factory=dict)
    map_name: str = ""
    refit: str = ""
    usable: str = ""
    min_labels: int = 0
    default_map: str = ""


@dataclass(frozen=True)
class MechanismSpec:
    """What the engine's consumers need to know about one mechanism.

    - `experiment`: "module:Class" of its experiment adapter (`engine.experiments` sweeps it);
      `experiment_cases` its default case set and `experiment_space` an example search space (YAML);
    - `tables`: its export tables; `scorecard`: its scorecard role (None: not scored);
    - `demo_page`: the demo page its calls belong to (`engine.demo`);
    - `order`: its position on surfaces with an order of their own ("experiments", "scorecard", "exports",
      "labels");
    - `labels`: what its labels say and which runs hold its items (None: it takes no labels)."""

    name: str
    label: str
    demo_page: str
    experiment: str = ""
    experiment_cases: str = ""
    experiment_space: str = ""
    tables: tuple[ExportTable, ...] = ()
    scorecard: ScorecardRole | None = None
    order: Mapping[str, int] = field(default_factory=dict)
    labels: LabelSpec | None = None


_SPECS: dict[str, MechanismSpec] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        importlib.import_module(module)  # each registers itself


def register_mechanism(spec: MechanismSpec) -> MechanismSpec:
    """Add a mechanism (again: a spec of the same name replaces the old one); returns the spec."""
    _SPECS[spec.name] = spec
    return spec


def unregister_mechanism(name: str) -> None:
    """Remove a mechanism (a test's toy mechanism, after the test)."""
    _SPECS.pop(name, None)


def mechanisms(surface: str | None = None) -> list[MechanismSpec]:
    """Every registered mechanism: in registration order, or in `surface`'s order (see the module's docstring)."""
    _load_builtin()
    specs = list(_SPECS.values())
    if surface is None:
        return specs
    # by position, not `specs.index`: that compares whole specs, and the label store asks for every label it checks
    placed = sorted(enumerate(specs), key=lambda pair: pair[1].order.get(surface, len(specs) + pair[0]))
    return [spec for _, spec in placed]


def mechanism_names(surface: str | None = None) -> list[str]:
    return [s.name for s in mechanisms(surface)]


def mechanism_spec(name: str) -> MechanismSpec:
    """The spec of `name`; an unknown name is a ValueError that lists the known ones."""
    _load_builtin()
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; one of {', '.join(_SPECS)}") from None


def scorecard_roles() -> dict[str, ScorecardRole]:
    """Every mechanism's scorecard role by name, in the scorecard's order."""
    return {s.name: s.scorecard for s in mechanisms("scorecard") if s.scorecard is not None}


def resolve(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names (imported on first use)."""
    module, _, attribute = ref.partition(":")
    if not module or not attribute:
        raise ValueError(f"{ref!r}: a reference is 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)


def resolve_callable(ref: str) -> Callable[..., Any]:
    found = resolve(ref)
    if not callable(found):
        raise TypeError(f"{ref!r} names {type(found).__name__}, not a callable")
    return found  # type: ignore[no-any-return]
