"""A judge's map refitted from the user's labels, compared honestly with the map in use, versioned, and adopted
only on request: what every mechanism's refit shares.

A mechanism's `LabelSpec` names its refit (`refit`, "module:function": the hand raise's is
`engine.handraise.label_refit:refit_hand_raise`, the one mechanism whose judge records features), its map
(`map_name`), the labels a refit can use (`usable`, `min_labels`: `usable_count`, `labels_needed`) and the map it
replaces by default (`default_map`: `default_map_id`). `refit_from_labels` dispatches to that refit, which fits a
candidate on the labels, cross-validates it and compares it with the map in use on the same held-out labels (a
`LabelRefit`). Saved as a new version whose provenance names the labels (`save_candidate`), it is used only once
adopted (`adopt_map`); any earlier version, or the shipped map, can be restored (`map_versions`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from engine import stats
from engine.judgemaps import (
    SHIPPED,
    Adoption,
    Calibration,
    adopt_version,
    adoption,
    check_shipped,
    one_line,
    save_version,
    version_files,
)
from engine.labels.agreement import kappa_stat
from engine.labelstore import Label, LabelError, label_spec, label_specs
from engine.registry import mechanism_spec
from engine.store import Store

if TYPE_CHECKING:
    from models.source import ModelLookup


@dataclass
class LabelRefit:
    """A candidate map from the user's labels beside the map in use, on the same held-out labels."""

    mechanism: str
    model_id: str  # the map id (the judge model, or its ensemble's id)
    n_labels: int
    folds: int
    candidate: Calibration
    current: Calibration | None
    candidate_score: float | None
    candidate_score_ci: stats.Interval | None
    current_score: float | None
    current_score_ci: stats.Interval | None
    comparison: stats.Comparison  # candidate − current, paired, exact McNemar
    provenance: str
    held_out: list[dict[str, Any]] = field(default_factory=list)  # key, run_id, label, current, candidate
    n_split: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "model_id": self.model_id,
            "n_labels": self.n_labels,
            "n_split": self.n_split,
            "folds": self.folds,
            "candidate_version": self.candidate.version,
            "current_version": None if self.current is None else self.current.version,
            "candidate_score": rounded(self.candidate_score),
            "candidate_score_ci": self.candidate_score_ci.as_list() if self.candidate_score_ci else None,
            "current_score": rounded(self.current_score),
            "current_score_ci": self.current_score_ci.as_list() if self.current_score_ci else None,
            "comparison": self.comparison.to_dict(),
            "provenance": self.provenance,
            "kappa": self.kappas(),
        }

    def kappas(self) -> dict[str, Any]:
        """Cohen's κ with your labels on the held-out labels, before (the map in use) and after (the new map), each
        with its bootstrap interval: agreement beyond what the base rates give by chance."""
        out: dict[str, Any] = {}
        rows = [r for r in self.held_out if r.get("label") is not None]
        for side, column in (("before", "current"), ("after", "candidate")):
            if side == "before" and self.current is None:
                out[side] = None
                continue
            value, interval = kappa_of([str(r["label"]) for r in rows], [str(r[column]) for r in rows])
            out[side] = {"kappa": rounded(value), "kappa_ci": interval.as_list() if interval else None}
        return out


def kappa_of(truth: list[str], predicted: list[str]) -> tuple[float | None, stats.Interval | None]:
    """Cohen's κ of predictions against labels and its bootstrap interval (engine.labels.agreement's kernel)."""
    if not truth:
        return None, None
    return stats.bootstrap(kappa_stat(truth, predicted))


def rounded(value: float | None) -> float | None:
    """A score as stored and shown (4 decimals), or None."""
    return None if value is None else round(value, 4)


@dataclass(frozen=True)
class MapVersion:
    """One version of a map: `shipped` (data/calibration/) or one refitted from labels."""

    version: str
    created: str
    provenance: str
    in_use: bool
    n_labels: int = 0
    damaged: str = ""  # why this version cannot be used (one line): never in use, never adoptable
    fallback: str = ""  # the shipped map only: why it is read although another version was adopted

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created": self.created,
            "provenance": self.provenance,
            "in_use": self.in_use,
            "n_labels": self.n_labels,
            "damaged": self.damaged,
            "fallback": self.fallback,
        }


def refittable() -> tuple[str, ...]:
    """The mechanisms whose judge can be refitted from labels (`LabelSpec.refit`: it records the features a fit
    reads), in the labels' order."""
    return tuple(name for name, spec in label_specs().items() if spec.refit)


def usable_count(mechanism: str, labels: Sequence[Label]) -> int:
    """How many of `labels` a refit of `mechanism` can learn from (its `LabelSpec.usable`; all of them when it
    names no count)."""
    spec = label_spec(mechanism)
    usable = spec.refit().usable if spec.refit else None
    return int(usable(labels)) if usable else len(labels)


def labels_needed(mechanism: str) -> int:
    """The fewest usable labels a refit of `mechanism` needs (its `LabelSpec.min_labels`)."""
    return label_spec(mechanism).min_labels


def default_map_id(mechanism: str, ids: Sequence[str]) -> str | None:
    """The map a refit of `mechanism` replaces when neither the refit nor a label names one, given the catalog's
    model ids (its `LabelSpec.default_map`; else the first model's own map; None for no models)."""
    spec = label_spec(mechanism)
    default_map = spec.refit().default_map if spec.refit else None
    if default_map:
        found = default_map(ids)
        return None if found is None else str(found)
    return ids[0] if ids else None


def refit_from_labels(
    store: Store,
    *,
    mechanism: str = "handraise",
    user: str | None = None,
    with_split: bool = False,
    seed: int = 0,
    labels: Sequence[Label] | None = None,
    models: ModelLookup | None = None,
    config: Any = None,
) -> LabelRefit:
    """Refit `mechanism`'s judge from the user's labels, by its own refit (`LabelSpec.refit`; `config`: the
    mechanism's own config, None for its default); LabelError when it has none (its judge records no features) or
    the labels cannot be fitted."""
    names = refittable()
    if mechanism not in names:
        covered = " and ".join(f"the {mechanism_spec(name).label.lower()}" for name in names)
        raise LabelError(f"mechanism: refitting from labels covers {covered}; {mechanism!r} has no recorded features")
    try:
        hooks = label_specs()[mechanism].refit
        assert hooks is not None  # `refittable` says so
        refit = hooks().refit(
            store, user=user, with_split=with_split, seed=seed, labels=labels, models=models, config=config
        )
    except ValidationError as exc:  # a fit whose numbers make no map (non-finite coefficients…): one line
        raise LabelError(f"labels: the fit gives no usable map ({one_line(exc)})") from None
    except ArithmeticError as exc:  # an overflow in the fit
        raise LabelError(f"labels: the fit failed ({' '.join(str(exc).split())})") from None
    return refit


# -- versions ---------------------------------------------------------------------------------------------------


def save_candidate(refit: LabelRefit) -> Path:
    """Save the candidate as a new version of its map (not in use until `adopt_map`); when its version was taken
    (two refits in one second) it is saved as the next free one, and `refit.candidate` says which."""
    path = save_version(refit.candidate)
    if path.stem != refit.candidate.version:
        refit.candidate = refit.candidate.model_copy(update={"version": path.stem})
    return path


def map_name(mechanism: str) -> str:
    """The map file `mechanism`'s judge reads (`<name>.<model_id>.json`: its `LabelSpec.map_name`)."""
    names = {name: spec.map_name for name, spec in label_specs().items() if spec.map_name}
    if mechanism not in names:
        raise LabelError(f"mechanism: {mechanism!r} has no map ({', '.join(names)})")
    return names[mechanism]


def adopt_map(store: Store | None, mechanism: str, model_id: str, version: str) -> None:
    """ "Use this map": `version` (or `shipped`) is the map the judge reads from now on, in every process. The
    version is loaded and checked first: a damaged one is refused (LabelError, one line)."""
    try:
        adopt_version(map_name(mechanism), model_id, version)
    except ValueError as exc:
        raise LabelError(f"version: {exc}") from None


def map_versions(mechanism: str, model_id: str) -> list[MapVersion]:
    """The shipped map (when there is one) and every version refitted from labels, oldest first; a damaged
    version is listed with why (never in use), and when the adopted version cannot be used the shipped map is in
    use with `fallback` saying why. LabelError for a map id that is not one."""
    name = map_name(mechanism)
    try:
        in_use = adoption(name, model_id)
        files = version_files(name, model_id)
    except ValueError as exc:
        raise LabelError(f"map: {exc}") from None
    out = [] if (shipped := _shipped(name, model_id, in_use)) is None else [shipped]
    for saved in files:
        cal = saved.calibration
        out.append(
            MapVersion(
                version=saved.version,
                created=flat(cal.fitted_at if cal else ""),
                provenance=flat(cal.notes if cal else ""),
                in_use=cal is not None and saved.version == in_use.version,
                n_labels=_count(cal.metrics.get("labels")) if cal else 0,
                damaged=saved.damaged,
            )
        )
    return out


def _shipped(name: str, model_id: str, in_use: Adoption) -> MapVersion | None:
    """The shipped map as a version (None when there is none); a damaged one is listed as such, never in use (the
    judge cannot read it)."""
    try:
        cal, damaged = check_shipped(name, model_id), ""
        if cal is None:
            return None
    except ValueError as exc:
        cal, damaged = None, str(exc).partition(": not a valid calibration file: ")[2] or str(exc)
    return MapVersion(
        version=SHIPPED,
        created=flat(cal.fitted_at if cal else ""),
        provenance=flat(f"shipped: fitted on {cal.fitted_on}" if cal else ""),
        in_use=in_use.version is None and cal is not None,
        damaged=damaged,
        fallback=in_use.problem,
    )


def flat(text: str) -> str:
    """A version file's text (provenance, time) on one line: a line break in it (a label's user name, a hand-edited
    file) is shown as its escape, so a listing line can never be split into a forged one."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def map_in_use(mechanism: str, model_id: str) -> MapVersion | None:
    """The version the judge reads now (what the Conversation caption names)."""
    return next((v for v in map_versions(mechanism, model_id) if v.in_use), None)


def created_at(version: MapVersion) -> datetime | None:
    try:
        return datetime.strptime(version.created, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return None
