"""What a mechanism is to the engine: its `MechanismSpec`, the facts every engine consumer reads about it (its
experiment adapter, export tables, scorecard role, labels, demo page) so none of them keeps its own list of names;
the registry of specs is `engine.registry`.

A mechanism declares its spec in `engine/<mechanism>/spec.py`, which imports nothing of the mechanism itself: each
part that needs code is a typed loader (Inspect's `@modelapi` pattern), a small function that imports its part's
module when called and returns the part — the experiment adapter class, the export tables, the scorecard's hooks,
the labels' hooks. The hooks are dataclasses of callables typed by the protocols below, so mypy checks every
mechanism's code against what its consumers call, and go-to-definition follows them. Listing the mechanisms loads
the spec modules only (`tests/test_mechanism_registry.py` counts the modules).

"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from engine import stats
    from engine.diagnostics import Diagnosis
    from engine.experiments.adapters.base import ExperimentAdapter, Models
    from engine.experiments.execution import HubModels
    from engine.experiments.scorecard import ScorecardPlan
    from engine.exports.record import RunRecord
    from engine.labels.items import LabelItem
    from engine.labels.refit import LabelRefit
    from engine.labelstore import Label
    from engine.store import Run, Store


# -- export tables -----------------------------------------------------------------------------------------------


class TableBuilder(Protocol):
    """Builds one table of a run's export: its rows."""

    def __call__(self, record: RunRecord, /) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class ExportTable:
    """One table of a run's export (`engine.exports.tables`): built by `build`, or one flattened row per event of
    the types in `events`."""

    name: str
    description: str
    build: TableBuilder | None = None
    events: tuple[str, ...] = ()


# -- the scorecard -----------------------------------------------------------------------------------------------

Step = tuple[str | None, str | None]  # (model, method) of one scorecard row


class RoleSteps(Protocol):
    """What a role runs: `(plan, model_id)` → [(model_id, method), …]."""

    def __call__(self, plan: ScorecardPlan, model_id: str | None, /) -> list[Step]: ...


@dataclass(frozen=True)
class RoleStep:
    """One step of a scorecard role: the store its runs go to, the models, the model and judge method of the row
    (None for a role that takes every model at once), the plan and the experiment executor."""

    store: Store
    models: Models | HubModels
    model_id: str | None
    method: str | None
    plan: ScorecardPlan
    executor: str

    def named(self) -> tuple[str, str]:
        """(model, method) of a row that names both, as a per-model role's steps do."""
        if self.model_id is None or self.method is None:
            raise ValueError("this role's step names a model and a method")
        return self.model_id, self.method


class RoleRun(Protocol):
    """Runs one step of a role: its metrics, its runs and anything the row shows."""

    async def __call__(self, step: RoleStep, /) -> dict[str, Any]: ...


class RolePaired(Protocol):
    """Compares a row with its role's best on the same items (None: no shared items)."""

    def __call__(self, store: Store, best: dict[str, Any], row: dict[str, Any], /) -> stats.Comparison | None: ...


class RoleDiagnoses(Protocol):
    """What the scorecard found about the role's judges that have no shipped map."""

    def __call__(self, scorecard: dict[str, Any] | None, /) -> list[Diagnosis]: ...


@dataclass(frozen=True)
class ScorecardHooks:
    """A role's code: `run` runs one step; `steps` says what to run (None: a per-model role runs each model with
    each of its `methods` the plan picks); `paired` and `diagnoses` are optional."""

    run: RoleRun
    steps: RoleSteps | None = None
    paired: RolePaired | None = None
    diagnoses: RoleDiagnoses | None = None


@dataclass(frozen=True)
class ScorecardRole:
    """The mechanism's row in the model scorecard (`engine.experiments.scorecard`): the metric it is judged by
    and the target that means "good enough for this role" (with where the target comes from); called once per
    model when `per_model`, else once after every per-model role; `methods`: the judge methods `--methods` may
    pick. `hooks` loads its code (`engine/<mechanism>/scorecard.py`)."""

    metric: str
    higher_is_better: bool
    target: float
    source: str
    hooks: Callable[[], ScorecardHooks]
    per_model: bool = True
    methods: tuple[str, ...] = ()


# -- labels ------------------------------------------------------------------------------------------------------


class ItemKey(Protocol):
    """The one way an item's key is built from its keyword parts."""

    def __call__(self, **parts: object) -> str: ...


class ItemReader(Protocol):
    """A stored run's items a researcher can label."""

    def __call__(self, store: Store, run: Run, /) -> list[LabelItem]: ...


class LabelRefitter(Protocol):
    """Refits the mechanism's judge from labels (as `engine.labels.refit_from_labels` calls it)."""

    def __call__(
        self,
        store: Store,
        *,
        user: str | None = ...,
        with_split: bool = ...,
        seed: int = ...,
        labels: Sequence[Label] | None = ...,
        models: Any = ...,
        config: Any = ...,
    ) -> LabelRefit: ...


@dataclass(frozen=True)
class LabelHooks:
    """The labels' code (`engine/<mechanism>/labels.py`): `key` builds an item's key; `readers`: run kind → the
    reader of its items."""

    key: ItemKey
    readers: Mapping[str, ItemReader] = field(default_factory=dict)


@dataclass(frozen=True)
class RefitHooks:
    """Refitting the judge from labels: `refit` refits it, `usable` counts the labels it can learn from (None: all),
    `default_map` names the map a refit replaces when nothing names one (None: the first model's)."""

    refit: LabelRefitter
    usable: Callable[[Sequence[Label]], int] | None = None
    default_map: Callable[[Sequence[str]], str | None] | None = None


@dataclass(frozen=True)
class LabelSpec:
    """What a researcher's label of the mechanism's items may say (`engine.labels`): `values` (None: any short
    non-empty text, e.g. a jury case's verdicts); `positive`, the value the judge's probability is the probability
    of; `map_name`, the judge map a label-refitted version replaces ("": none). `hooks` loads the labels' code;
    `refit` loads the refit's (None: the judge records no features to refit from), which needs `min_labels`."""

    values: tuple[str, ...] | None
    hooks: Callable[[], LabelHooks]
    positive: str = ""
    map_name: str = ""
    refit: Callable[[], RefitHooks] | None = None
    min_labels: int = 0


# -- judge maps -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeMapFacts:
    """What the diagnostics need to know of one of the mechanism's fitted judge maps (`engine.diagnostics`):
    `name` (the map's name, `skip.likelihood`), the labelled `split` under data/calibration/ it is fitted on and the
    field of its items that holds the `label`; `signs`: class → feature → +1 / −1, the sign a coefficient must have
    because of what its feature means (evidence *for* the class must raise it).

    `figure`: the stored cross-validated figure that diagnoses it against chance — "auc" (against 0.5, the
    Hanley–McNeil interval from the split's class counts), "accuracy" (against the split's majority class),
    "top1" (against a random pick of the speakers: the label is participant → should speak) or "own_auc" (its
    own stored interval, `cv_auc_ci`: a label per dialogue, not per split item). `family`: the other maps of the
    mechanism (`<mechanism>.*` with no facts of their own) share its split and figure (the jury's channel, role,
    panel, seat, neighbours and stack maps); their coefficients' signs are their own."""

    name: str
    split: str
    label: str
    signs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    figure: Literal["auc", "accuracy", "top1", "own_auc"] = "auc"
    family: bool = False


# -- runs in the history ----------------------------------------------------------------------------------------


class RunAbout(Protocol):
    """What a run of the mechanism is about, in a few words, from what it stored (its config; `first`: the text of
    its first `RunHooks.first_event`); "" when it stored nothing to say."""

    def __call__(self, run: Run, first: str | None, /) -> str: ...


@dataclass(frozen=True)
class RunHooks:
    """How the history names and reads the mechanism's runs (`engine.history`): `about` says what a run is
    about; `first_event` is the event whose first text names a run (a conversation's first message; "": none);
    `generic_names` the names its entry points give without saying what the run is about (replaced by `about`);
    `open_ended` says whether a run has no end of its own (a conversation: closed when its page went away, so
    "interrupted" reads "left open", no failure), and then its turns are its `first_event`s."""

    about: RunAbout
    first_event: str = ""
    generic_names: Callable[[Run], Sequence[str]] = lambda run: ()
    open_ended: Callable[[Run], bool] = lambda run: False


# -- the spec ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MechanismSpec:
    """What the engine's consumers need to know about one mechanism.

    - `experiment`: loads its experiment adapter's class (None: experiments do not sweep it);
      `experiment_cases` its default case set and `experiment_space` an example search space (YAML);
    - `tables`: loads its export tables; `scorecard`: its scorecard role (None: not scored);
    - `demo_page`: the demo page its calls belong to (`engine.demo`);
    - `labels`: what its labels say and which runs hold its items (None: it takes no labels);
    - `runs`: loads how the history names its runs (None: by their stored names). Its run kinds are
      ``<name>.<what>`` (`jury.run`, `skip.simulate`);
    - `maps`: its fitted judge maps the diagnostics read (their splits, labels and expected signs)."""

    name: str
    label: str
    demo_page: str
    experiment: Callable[[], type[ExperimentAdapter]] | None = None
    experiment_cases: str = ""
    experiment_space: str = ""
    tables: Callable[[], Sequence[ExportTable]] = tuple
    scorecard: ScorecardRole | None = None
    labels: LabelSpec | None = None
    runs: Callable[[], RunHooks] | None = None
    maps: tuple[JudgeMapFacts, ...] = ()
