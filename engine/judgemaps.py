"""Fitted, versioned maps from a likelihood judge's raw scores to a mechanism's numbers.

A judge on a small base model gives log-probabilities, not calibrated numbers. A map per component is
learnt on a calibration split (never the benchmark it is reported on): logistic regression (Platt
scaling) on one feature, or isotonic regression where the relation is monotone but not sigmoid. The
fitted parameters ship as JSON in `data/calibration/`; `judgelab calibrate-judge` refits them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from engine.config import get_settings
from engine.inputs import max_input_bytes, read_text
from models.files import InputError, MissingFile, read_bytes, replace_all, replace_whole

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "data" / "calibration"


MAX_WEIGHT = 1e12  # a logistic weight: shipped ones < 20, a separable tiny fit ~1e9; beyond, scores can overflow


class FittedMap(BaseModel):
    """Named features → [0, 1]. `logistic`: σ(Σ coef·x + intercept) (Platt scaling, one or more features);
    `isotonic`: a monotone step curve through its knots (one feature); `linear`: clip((x − lo) / (hi − lo))."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["logistic", "isotonic", "linear"]
    features: list[str]
    coef: list[float] = Field(default_factory=list)
    intercept: float = 0.0
    xs: list[float] = Field(default_factory=list)
    ys: list[float] = Field(default_factory=list)
    lo: float = 0.0
    hi: float = 1.0

    @model_validator(mode="after")
    def _consistent(self) -> FittedMap:
        """A map that can be applied: finite numbers, one coefficient a feature (logistic), knots in pairs
        (isotonic), one feature and lo < hi (linear) — a damaged file is refused when read, not when judging."""
        numbers = [*self.coef, self.intercept, *self.xs, *self.ys, self.lo, self.hi]
        if not all(math.isfinite(v) for v in numbers):
            raise ValueError("a non-finite number")
        if any(abs(v) > MAX_WEIGHT for v in [*self.coef, self.intercept]):
            raise ValueError(f"a weight beyond ±{MAX_WEIGHT:g}, which no fit writes")
        if not self.features:
            raise ValueError("no feature")
        if self.kind == "logistic" and len(self.coef) != len(self.features):
            raise ValueError(f"{len(self.coef)} coefficients for {len(self.features)} features")
        if self.kind == "isotonic" and (len(self.features) != 1 or not self.xs or len(self.xs) != len(self.ys)):
            raise ValueError("an isotonic map needs one feature and as many ys as xs (at least one)")
        if self.kind == "linear" and (len(self.features) != 1 or not self.lo < self.hi):
            raise ValueError("a linear map needs one feature and lo < hi")
        return self

    def __call__(self, values: dict[str, float]) -> float:
        xs = self._values(values)
        if self.kind == "logistic":
            z = sum(c * x for c, x in zip(self.coef, xs, strict=True)) + self.intercept
            if math.isnan(z):
                raise ValueError("the map's score is not a number")
            return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
        if self.kind == "linear":
            return min(1.0, max(0.0, (xs[0] - self.lo) / (self.hi - self.lo)))
        return float(np.interp(xs[0], self.xs, self.ys))

    def _values(self, values: dict[str, float]) -> list[float]:
        # `is:<participant>` (a map refitted from a user's labels: who they want to hear) is 0 unless given.
        xs = [float(values[f]) if not f.startswith("is:") else float(values.get(f, 0.0)) for f in self.features]
        if not all(math.isfinite(x) for x in xs):
            raise ValueError(f"non-finite feature in {dict(zip(self.features, xs, strict=True))}")
        return xs

    def linear(self, values: dict[str, float]) -> float:
        """A logistic map's linear score Σ coef·x + intercept (the logit; a multinomial map's class score)."""
        if self.kind != "logistic":
            raise ValueError(f"a {self.kind} map has no linear score")
        z = sum(c * x for c, x in zip(self.coef, self._values(values), strict=True)) + self.intercept
        if not math.isfinite(z):
            raise ValueError("the map's score is not finite")
        return z


class Calibration(BaseModel):
    """The maps of one judge (mechanism, method, model), with where they came from."""

    model_config = ConfigDict(extra="forbid")

    name: str  # e.g. "handraise.likelihood"
    model_id: str
    version: str
    maps: dict[str, FittedMap]
    fitted_on: str = ""
    data_sha256: str = ""
    n_items: int = 0
    fitted_at: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    notes: str = ""
    _fallback: str = PrivateAttr(default="")  # read, never stored: see `fallback`

    @property
    def fallback(self) -> str:
        """Why the shipped map is read instead of the adopted version (set by `load_calibration`), '' if not."""
        return self._fallback

    def with_fallback(self, why: str) -> Calibration:
        out = self.model_copy()
        out._fallback = why
        return out

    @classmethod
    def fitted(
        cls,
        name: str,
        model_id: str,
        maps: dict[str, FittedMap],
        *,
        source: Path | str,
        n_items: int,
        data_sha256: str | None = None,
        metrics: dict[str, Any] | None = None,
        notes: str = "",
    ) -> Calibration:
        """A calibration fitted now on `source`: the version and fit time are this moment, and the data's
        sha256 is read from `source` unless given."""
        version = new_version()
        return cls(
            name=name,
            model_id=model_id,
            version=version,
            fitted_on=str(source),
            data_sha256=data_sha256 if data_sha256 is not None else file_sha256(Path(source)),
            n_items=n_items,
            fitted_at=version,
            maps=maps,
            metrics=metrics or {},
            notes=notes,
        )

    @property
    def label(self) -> str:
        return f"{self.name} · {self.model_id} · {self.version}"

    def apply(self, component: str, values: dict[str, float]) -> float:
        return self.maps[component](values)

    def distribution(self, classes: Sequence[str], values: dict[str, float]) -> list[float]:
        """A multinomial logistic map: the softmax of each class's linear score (one logistic map a class,
        as `fit_multinomial` writes them). KeyError when a class has no map; ValueError for a non-finite
        feature."""
        z = [self.maps[c].linear(values) for c in classes]
        top = max(z)
        weights = [math.exp(v - top) for v in z]
        total = sum(weights)
        return [w / total for w in weights]


def fit_logistic(
    rows: Sequence[dict[str, float]],
    labels: Sequence[bool],
    features: Sequence[str],
    c: float = 1.0,
    balanced: bool = False,
) -> FittedMap:
    """Platt scaling; `balanced` weighs the classes equally, so 0.5 sits between them, not at the base rate."""
    from sklearn.linear_model import LogisticRegression  # heavy: scikit-learn, ~1 s

    x = np.asarray([[float(r[f]) for f in features] for r in rows], dtype=float)
    model = LogisticRegression(C=c, class_weight="balanced" if balanced else None)
    model.fit(x, np.asarray(labels, dtype=int))
    return FittedMap(
        kind="logistic",
        features=list(features),
        coef=[float(v) for v in model.coef_[0]],
        intercept=float(model.intercept_[0]),
    )


def fit_multinomial(
    rows: Sequence[dict[str, float]],
    labels: Sequence[str],
    classes: Sequence[str],
    features: Sequence[str],
    c: float = 1.0,
) -> dict[str, FittedMap]:
    """Multinomial logistic regression (L2, strength 1/c, on standardised features), written as one logistic
    map per class whose linear scores `Calibration.distribution` softmaxes. The standardisation is folded
    into the coefficients, so a map reads the raw features. Every class must occur in `labels`."""
    from sklearn.linear_model import LogisticRegression  # heavy: scikit-learn, ~1 s

    missing = [k for k in classes if k not in set(labels)]
    if missing:
        raise ValueError(f"no calibration item is labelled {', '.join(missing)}")
    x = np.asarray([[float(r[f]) for f in features] for r in rows], dtype=float)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=5000)
    model.fit((x - mean) / scale, np.asarray(labels))
    order = [list(model.classes_).index(k) for k in classes]
    if len(model.classes_) == 2:  # sklearn keeps one row for two classes: class 1 against class 0
        coef = np.vstack([-model.coef_[0] / 2, model.coef_[0] / 2])
        intercept = np.asarray([-model.intercept_[0] / 2, model.intercept_[0] / 2])
    else:
        coef, intercept = model.coef_, model.intercept_
    out = {}
    for k, i in zip(classes, order, strict=True):
        w = coef[i] / scale
        out[k] = FittedMap(
            kind="logistic",
            features=list(features),
            coef=[float(v) for v in w],
            intercept=float(intercept[i] - float(np.dot(w, mean))),
        )
    return out


def fit_isotonic(rows: Sequence[dict[str, float]], labels: Sequence[bool], feature: str) -> FittedMap:
    from sklearn.isotonic import IsotonicRegression  # heavy: scikit-learn, ~1 s

    model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
    model.fit(np.asarray([float(r[feature]) for r in rows]), np.asarray(labels, dtype=float))
    return FittedMap(
        kind="isotonic",
        features=[feature],
        xs=[float(v) for v in model.X_thresholds_],
        ys=[float(v) for v in model.y_thresholds_],
    )


def file_sha256(path: Path) -> str:

    return hashlib.sha256(read_bytes(path, max_input_bytes())).hexdigest()


def calibration_path(name: str, model_id: str, directory: Path | None = None) -> Path:
    """`<directory>/<name>.<model_id>.json` (default data/calibration/); MapError when either part is not a map
    name or the file would lie outside the folder."""
    folder = directory or CALIBRATION_DIR
    path = folder / f"{check_name(name, 'map name')}.{check_name(model_id, 'map id')}.json"
    inside(path, folder)
    return path


def save_calibration(cal: Calibration, directory: Path | None = None) -> Path:
    """Write a fitted map over the shipped one (or into `directory`), atomically: a failed write leaves the old
    file as it was (MapError, one line)."""
    path = calibration_path(cal.name, cal.model_id, directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_whole(path, _dumped(cal))
    except OSError as exc:
        raise MapError(f"{path.name}: cannot be written ({exc.strerror or exc}); the old file is unchanged") from None
    return path


def logistic_problem(cal: Calibration) -> str:
    """'' when every component is a logistic map (what `Calibration.distribution` applies), else why."""
    other = sorted(c for c, m in cal.maps.items() if m.kind != "logistic")
    return f"{shown(other[0], 40)} is not a logistic map" if other else ""


def save_calibrations(cals: Sequence[Calibration], directory: Path | None = None) -> list[Path]:
    """Write maps that go together (a panel's seats and its stack) all or none: a failed write leaves every old
    file as it was (MapError, one line)."""
    paths = [calibration_path(c.name, c.model_id, directory) for c in cals]
    try:
        for path in dict.fromkeys(p.parent for p in paths):
            path.mkdir(parents=True, exist_ok=True)
        replace_all([(p, _dumped(c)) for p, c in zip(paths, cals, strict=True)])
    except OSError as exc:
        raise MapError(
            f"{paths[0].parent.name}/: cannot be written ({exc.strerror or exc}); no map was changed"
        ) from None
    return paths


def load_calibration(
    name: str, model_id: str, directory: Path | None = None, check: Callable[[Calibration], str] | None = None
) -> Calibration | None:
    """The map in use: a version adopted from the user's labels (`adopt_version`), else the shipped (or refitted)
    one, or None when there is none for this model (the judge falls back to uncalibrated probabilities, flagged).
    An adopted version that cannot be used (a damaged `in_use.json` or version, or one `check` refuses: the judge's
    own test of a map's metrics, '' when usable) gives the shipped map with `fallback` saying why; a shipped map
    `check` refuses raises MapError. With `directory`, that folder's file only."""
    found = adoption(name, model_id) if directory is None else Adoption()
    if found.calibration is not None:
        problem = check(found.calibration) if check is not None else ""
        if not problem:
            return found.calibration
        where = f"{name}.{model_id}/{found.version}.json"
        found = Adoption(problem=f"{POINTER}: {where}: damaged: {problem}", named=True)
    path = calibration_path(name, model_id, directory)
    if not os.path.lexists(path):  # a directory, FIFO or dangling link there is an error, not "no map"
        if found.named and found.problem:  # the adopted version cannot be used and nothing is shipped to read
            raise MapError(f"{found.problem}; no shipped map to read instead")
        return None
    cal = _read_calibration(path)
    problem = check(cal) if check is not None else ""
    if problem:
        raise MapError(f"{_file(path)}: not a valid calibration file: {problem}")
    return cal.with_fallback(found.problem) if found.problem else cal


def map_flags(cal: Calibration | None) -> list[str]:
    """`map_fallback` when a judge reads the shipped map because the adopted version cannot be (its `fallback`)."""
    return ["map_fallback"] if cal is not None and cal.fallback else []


def _read_calibration(path: Path) -> Calibration:
    """A map file, validated; MapError naming it as `_file` does (no machine path) and why."""
    try:
        return parse_calibration(read_bytes(path, max_input_bytes()))
    except InputError as exc:
        raise MapError(f"{_file(path)}: not a valid calibration file: {_why(exc, path)}") from None
    except MapError as exc:
        raise MapError(f"{_file(path)}: not a valid calibration file: {exc}") from None


def _file(path: Path) -> str:
    """A map file as messages name it: `data/calibration/<file>` for a shipped map, else its name."""
    return f"data/calibration/{path.name}" if path.parent == CALIBRATION_DIR else path.name


def _shipped_maps(name: str, model_id: str) -> dict[str, FittedMap]:
    """The components of the shipped map, which every saved version must have (reading only the features they
    read); none when there is no shipped map or it cannot be read (the shipped file's fault, not a version's: see
    `check_shipped`)."""
    try:
        return _read_calibration(calibration_path(name, model_id)).maps
    except MapError:
        return {}


def check_shipped(name: str, model_id: str) -> Calibration | None:
    """The shipped map, validated (None when there is none); MapError (one line, no machine path) when it is
    damaged: `shipped` can then not be adopted, and is listed as damaged."""
    path = calibration_path(name, model_id)
    return _read_calibration(path) if os.path.lexists(path) else None


def parse_calibration(data: bytes | str) -> Calibration:
    """A calibration file's content, validated; MapError with the first problem in one line (no pydantic dump).
    A key given twice in one object is refused (which one counts would be the parser's choice), as the YAML reader
    refuses it; the depth is bounded by then (pydantic refuses deep nesting first)."""
    try:
        cal = Calibration.model_validate_json(data)
    except ValidationError as exc:
        raise MapError(one_line(exc)) from None
    try:
        json.loads(data, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as exc:  # MapError (a duplicate key) is a ValueError
        raise MapError(str(exc) if isinstance(exc, MapError) else "not valid JSON") from None
    return cal


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; MapError naming a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MapError(f"the key {shown(key, 40)} is given twice")
        out[key] = value
    return out


def one_line(exc: ValidationError) -> str:
    """A validation error as one line: the first problem's field and message, and how many more there are."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    if not errors:
        return "not valid"
    first = errors[0]
    where = ".".join(
        str(p) if str(p).isprintable() and len(str(p)) <= 40 else shown(p, 40) for p in first.get("loc", ())
    )
    msg = " ".join(str(first.get("msg", "not valid")).split())
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {msg}{more}" if where else f"{msg}{more}"


def _dumped(cal: Calibration) -> str:
    return json.dumps(cal.model_dump(), ensure_ascii=False, indent=1) + "\n"


# -- versioned maps (refitted from a user's labels) and the one in use ----------------------------------------
# Each version is a file <maps_dir>/<name>.<model_id>/<version>.json; `in_use.json` in <maps_dir> names the
# adopted version of each map ("shipped", or no entry, means the file in data/calibration/). Names, model ids and
# versions are closed names (`NAME`, no ".."): a value read from a label or a file is never a path, and every
# file is checked to lie inside its folder once resolved (links included).
SHIPPED = "shipped"
POINTER = "in_use.json"
LOCK = ".in_use.lock"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")


class MapError(ValueError):
    """A map name, file or pointer that cannot be used: one line naming the map (its file relative to the maps
    folder, never a path a label chose) and why."""


def shown(value: object, limit: int = 80) -> str:
    """A value as an error quotes it: its repr (control characters escaped, so one line), cut to `limit`."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_name(value: object) -> bool:
    """Whether `value` is a map name, map id (a catalog model id, or an ensemble's ids joined by "+") or
    version: 1–128 of letters, digits and `. _ : + -`, starting with a letter or digit, no ".."."""
    return isinstance(value, str) and NAME.fullmatch(value) is not None and ".." not in value


def check_name(value: object, what: str) -> str:
    """`value` when it `is_name`, else MapError "'x/../y' is not a <what>"."""
    if not is_name(value):
        raise MapError(f"{shown(value)} is not a {what}")
    return str(value)


def inside(path: Path, folder: Path) -> Path:
    """`path` resolved, which must lie inside `folder` (resolved too): MapError otherwise, also for a link loop
    (RuntimeError before Python 3.13, OSError after) or a path that cannot be resolved."""
    try:
        resolved, root = path.resolve(), folder.resolve()
    except (OSError, RuntimeError):
        raise MapError(f"{path.name}: cannot be resolved (a link loop?)") from None
    if not resolved.is_relative_to(root):
        raise MapError(f"{path.name}: outside the maps folder")
    return resolved


def maps_dir() -> Path:
    return get_settings().resolved_maps_dir


def version_path(name: str, model_id: str, version: str) -> Path:
    """`<maps_dir>/<name>.<model_id>/<version>.json`; MapError for a part that is not a name, for `shipped`
    (not a saved version) and for a path that would resolve outside the maps folder."""
    check_name(version, "map version")
    if version == SHIPPED:
        raise MapError(f"{SHIPPED!r} is the shipped map, not a saved version")
    folder = maps_dir()
    path = folder / f"{check_name(name, 'map name')}.{check_name(model_id, 'map id')}" / f"{version}.json"
    inside(path, folder)
    return path


def _why(exc: InputError, path: Path) -> str:
    """Why the checked reader refused `path`, without the path (a machine path) or a second "cannot be read"."""
    why = str(exc).removeprefix(f"{path}: ")
    return why.removeprefix("cannot be read (").removesuffix(")") if why.startswith("cannot be read (") else why


def _relative(path: Path) -> str:
    """A version file as messages name it: `<name>.<model_id>/<version>.json` (no machine path)."""
    return f"{path.parent.name}/{path.name}"


def save_version(cal: Calibration) -> Path:
    """Save a map as a new version (not in use until adopted), atomically; a version already saved is never
    overwritten: when `cal.version` is taken (two refits in one second) the file is `<version>-2`, `-3`…, and its
    `version` says so. Returns the file (its stem is the version saved). MapError (one line) when it cannot be
    written; nothing is left but a hidden temporary file then."""
    first = version_path(cal.name, cal.model_id, cal.version)
    try:
        first.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MapError(f"{_relative(first)}: cannot be written ({exc.strerror or exc})") from None
    for n in range(1, 1000):
        version = cal.version if n == 1 else f"{cal.version}-{n}"
        path = version_path(cal.name, cal.model_id, version)
        try:
            replace_whole(path, _dumped(cal.model_copy(update={"version": version})), exclusive=True, clean_stale=True)
        except FileExistsError:
            continue
        except OSError as exc:
            raise MapError(f"{_relative(path)}: cannot be written ({exc.strerror or exc}); nothing was saved") from None
        return path
    raise MapError(f"{_relative(first)}: 1000 versions in one second; nothing was saved")


def check_version(name: str, model_id: str, version: str) -> Calibration:
    """A saved version, loaded and validated: a calibration file of this very map (its name, model id and
    version), with at least the components of the shipped map. MapError (one line, naming the version file
    relative to the maps folder) for a missing, truncated, invalid or foreign one."""
    path = version_path(name, model_id, version)
    where = _relative(path)
    try:
        cal = parse_calibration(read_bytes(path, max_input_bytes()))
    except MissingFile:
        raise MapError(f"no version {version} of {name}.{model_id} (see the map versions)") from None
    except InputError as exc:
        raise MapError(f"{where}: cannot be read ({_why(exc, path)})") from None
    except MapError as exc:
        raise MapError(f"{where}: damaged: {exc}") from None
    if (cal.name, cal.model_id, cal.version) != (name, model_id, version):
        raise MapError(f"{where}: damaged: it holds {shown(cal.label, 120)}, not this version")
    shipped = _shipped_maps(name, model_id)
    missing = sorted(set(shipped) - set(cal.maps))
    if missing or not cal.maps:
        raise MapError(f"{where}: damaged: no {', '.join(missing) or 'map'} component")
    known = {f for fitted in shipped.values() for f in fitted.features}
    for component, fitted in cal.maps.items():  # a feature the judge never gives fails every hand (KeyError)
        unknown = [f for f in fitted.features if known and f not in known and not f.startswith("is:")]
        if unknown:
            raise MapError(f"{where}: damaged: {shown(component, 40)} reads {shown(unknown[0], 40)}, not a feature")
    return cal


@dataclass(frozen=True)
class SavedVersion:
    """A file in a map's versions folder: its calibration, or why it is damaged (one line)."""

    version: str
    calibration: Calibration | None
    damaged: str = ""


def version_files(name: str, model_id: str) -> list[SavedVersion]:
    """Every saved version of a map, oldest first, damaged ones too (their `damaged` says why); temporary files
    and names that are not versions are left out."""
    folder = maps_dir() / f"{check_name(name, 'map name')}.{check_name(model_id, 'map id')}"
    versions = (
        [p.stem for p in folder.glob("*.json") if is_name(p.stem) and p.stem != SHIPPED] if folder.is_dir() else []
    )
    out = []
    for version in sorted(versions, key=_order):
        try:
            out.append(SavedVersion(version, check_version(name, model_id, version)))
        except MapError as exc:
            why = str(exc).partition(": ")[2]  # without the file's name, which the listing shows
            out.append(SavedVersion(version, None, why.removeprefix("damaged: ")))
    return out


def _order(version: str) -> tuple[str, int, str]:
    """Versions in the order they were made: the time, then the `-2`, `-3`… of one second."""
    base, _, n = version.partition("-")
    return base, int(n) if n.isdigit() else 0, version


def saved_versions(name: str, model_id: str) -> list[Calibration]:
    """Every usable saved version of a map, oldest first (damaged files are left out: see `version_files`)."""
    return [v.calibration for v in version_files(name, model_id) if v.calibration is not None]


def _read_pointer() -> tuple[dict[str, object], str]:
    """`in_use.json`'s entries, and why it is damaged ('' when sound or absent: no entries then)."""
    try:
        text = read_text(maps_dir() / POINTER)
    except MissingFile:
        return {}, ""
    except InputError as exc:
        return {}, f"{POINTER} cannot be read ({_why(exc, maps_dir() / POINTER)})"
    try:
        data = json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        return {}, f"{POINTER} is not JSON ({exc.msg}, line {exc.lineno})"
    except MapError as exc:
        return {}, f"{POINTER}: {exc}"
    except (ValueError, RecursionError):
        return {}, f"{POINTER} is not JSON"
    if not isinstance(data, dict):
        return {}, f"{POINTER} is not an object"
    return data, ""


@dataclass(frozen=True)
class Adoption:
    """The adopted version of a map and its calibration (None: the shipped map), or, when the adopted one cannot
    be used, why (`problem`: the shipped map is read then, flagged)."""

    version: str | None = None
    calibration: Calibration | None = None
    problem: str = ""
    named: bool = False  # `in_use.json` names this map (its problem is this map's, not the pointer's)


def adoption(name: str, model_id: str) -> Adoption:
    """What `in_use.json` adopts for this map, checked: a damaged pointer, a value that is not a version, a
    missing or damaged version give no version and a one-line `problem`."""
    key = f"{check_name(name, 'map name')}.{check_name(model_id, 'map id')}"
    entries, problem = _read_pointer()
    if problem or key not in entries:
        return Adoption(problem=problem)
    value = entries[key]
    if not is_name(value):
        return Adoption(problem=f"{POINTER}: {key}: {shown(value)} is not a map version", named=True)
    try:
        return Adoption(str(value), check_version(name, model_id, str(value)), named=True)
    except MapError as exc:  # it names the version file (`<name>.<model_id>/<version>.json`)
        return Adoption(problem=f"{POINTER}: {exc}", named=True)


def adopted_version(name: str, model_id: str) -> str | None:
    """The version adopted for this map, None for the shipped one (or an adopted one that cannot be used)."""
    return adoption(name, model_id).version


def adopt_version(name: str, model_id: str, version: str) -> None:
    """Use `version` of the map from now on (`shipped` restores the shipped map). The version is loaded and
    validated first (`check_version`); the choice is a small pointer file, replaced atomically under a lock (two
    adopts at once both land), so every process (the pages, the CLI) reads the same map. Entries of a damaged
    pointer are dropped. MapError (one line) otherwise, the pointer unchanged."""
    key = f"{check_name(name, 'map name')}.{check_name(model_id, 'map id')}"
    if version != SHIPPED:
        check_version(name, model_id, check_name(version, "map version"))
    else:
        check_shipped(name, model_id)
    folder = maps_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _locked(folder / LOCK):
            entries, _ = _read_pointer()
            pointer = {k: v for k, v in entries.items() if isinstance(v, str) and is_name(v) and k != key}
            if version != SHIPPED:
                pointer[key] = version
            replace_whole(folder / POINTER, json.dumps(pointer, indent=1, sort_keys=True) + "\n", clean_stale=True)
    except OSError as exc:
        raise MapError(f"{POINTER}: cannot be written ({exc.strerror or exc}); the map in use is unchanged") from None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created), held for the block: one pointer update at a time, across processes."""
    # O_NOFOLLOW: a link planted as the lock file never makes adopt create or open a file elsewhere (ELOOP).
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def new_version() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def cross_validated_auc(
    rows: Sequence[dict[str, float]], labels: Sequence[bool], features: Sequence[str], folds: int = 5
) -> float | None:
    """The rank AUC of held-out p(component) from class-balanced logistic maps fitted on the other folds
    (stratified, fixed seed); None when a class has fewer items than folds."""
    from sklearn.linear_model import LogisticRegression  # heavy: scikit-learn, ~1 s
    from sklearn.metrics import roc_auc_score  # heavy: scikit-learn, ~1 s
    from sklearn.model_selection import StratifiedKFold  # heavy: scikit-learn, ~1 s

    y = np.asarray(labels, dtype=int)
    if min(int(y.sum()), int(len(y) - y.sum())) < folds:
        return None
    x = np.asarray([[float(r[f]) for f in features] for r in rows], dtype=float)
    held_out = np.zeros(len(y))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(x, y):
        held_out[test] = LogisticRegression(class_weight="balanced").fit(x[train], y[train]).decision_function(x[test])
    return round(float(roc_auc_score(y, held_out)), 4)


def fit_single_map(
    name: str,
    model_id: str,
    component: str,
    feature: str | Sequence[str],
    rows: Sequence[dict[str, float]],
    labels: Sequence[bool],
    source: Path,
) -> Calibration:
    """One class-balanced logistic map (feature(s) → p(component)) with its provenance and its 5-fold
    cross-validated AUC on the split."""
    features = [feature] if isinstance(feature, str) else list(feature)
    return Calibration.fitted(
        name,
        model_id,
        {component: fit_logistic(rows, labels, features, balanced=True)},
        source=source,
        n_items=len(rows),
        metrics={"cv_auc": cross_validated_auc(rows, labels, features), "cv_folds": "5 stratified"},
        notes=f"p({component}) = logistic({', '.join(features)}), class-balanced",
    )


def read_jsonl_items(path: Path, required: dict[str, type]) -> list[dict[str, Any]]:
    """A labelled calibration split: one JSON object a line with the required typed fields; a bad line is an
    error naming the file and line, and nothing is returned."""

    text = read_text(path)  # InputError (a ValueError) for a missing, binary or oversized file
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise ValueError(f"{path}:{n}: expected an object")
        for key, kind in required.items():
            if not isinstance(item.get(key), kind):
                raise ValueError(f"{path}:{n}: '{key}' must be {kind.__name__}")
        items.append(item)
    if not items:
        raise ValueError(f"{path}: no items")
    return items
