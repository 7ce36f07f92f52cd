"""Fitted, versioned maps from a likelihood judge's raw scores to a mechanism's numbers.

A judge on a small base model gives log-probabilities, not calibrated numbers. A map per component is
learnt on a calibration split (never the benchmark it is reported on): logistic regression (Platt
scaling) on one feature, or isotonic regression where the relation is monotone but not sigmoid. The
fitted parameters ship as JSON in `data/calibration/`; `judgelab calibrate-judge` refits them.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.config import get_settings
from engine.inputs import max_input_bytes, read_text
from models.files import read_bytes

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "data" / "calibration"


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

    def __call__(self, values: dict[str, float]) -> float:
        xs = self._values(values)
        if self.kind == "logistic":
            z = sum(c * x for c, x in zip(self.coef, xs, strict=True)) + self.intercept
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
        return sum(c * x for c, x in zip(self.coef, self._values(values), strict=True)) + self.intercept


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
    return (directory or CALIBRATION_DIR) / f"{name}.{model_id}.json"


def save_calibration(cal: Calibration, directory: Path | None = None) -> Path:
    path = calibration_path(cal.name, cal.model_id, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal.model_dump(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def load_calibration(name: str, model_id: str, directory: Path | None = None) -> Calibration | None:
    """The map in use: a version adopted from the user's labels (`adopt_version`), else the shipped (or
    refitted) calibration, or None when there is none for this model: the judge then falls back to the
    uncalibrated probabilities and flags it. With `directory`, that folder's file only."""
    if directory is None:
        adopted = adopted_version(name, model_id)
        if adopted is not None:
            path = version_path(name, model_id, adopted)
            if path.is_file():
                return _read_calibration(path)
    path = calibration_path(name, model_id, directory)
    if not path.is_file():
        return None
    return _read_calibration(path)


def _read_calibration(path: Path) -> Calibration:

    try:
        return Calibration.model_validate_json(read_text(path))
    except ValueError as exc:
        raise ValueError(f"{path}: not a valid calibration file: {exc}") from None


# -- versioned maps (refitted from a user's labels) and the one in use ----------------------------------------
# Each version is a file <maps_dir>/<name>.<model_id>/<version>.json; `in_use.json` in <maps_dir> names the
# adopted version of each map ("shipped", or no entry, means the file in data/calibration/).
SHIPPED = "shipped"
POINTER = "in_use.json"


def maps_dir() -> Path:
    return get_settings().resolved_maps_dir


def version_path(name: str, model_id: str, version: str) -> Path:
    if not version or "/" in version or "\\" in version or version.startswith("."):
        raise ValueError(f"not a map version: {version!r}")
    return maps_dir() / f"{name}.{model_id}" / f"{version}.json"


def save_version(cal: Calibration) -> Path:
    """Save a map as a new version (not in use until adopted); a version already saved is never overwritten."""
    path = version_path(cal.name, cal.model_id, cal.version)
    if path.exists():
        raise ValueError(f"map version {cal.version} of {cal.name}.{cal.model_id} exists already")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal.model_dump(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def _pointer() -> dict[str, str]:
    path = maps_dir() / POINTER
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def adopted_version(name: str, model_id: str) -> str | None:
    """The version adopted for this map, None for the shipped one."""
    return _pointer().get(f"{name}.{model_id}")


def adopt_version(name: str, model_id: str, version: str) -> None:
    """Use `version` of the map from now on (`shipped` restores the shipped map); the choice is a small pointer
    file, written atomically, so every process (the pages, the CLI) reads the same map."""
    pointer = _pointer()
    key = f"{name}.{model_id}"
    if version == SHIPPED:
        pointer.pop(key, None)
    else:
        if not version_path(name, model_id, version).is_file():
            raise ValueError(f"no version {version} of {key} (see the map versions)")
        pointer[key] = version
    folder = maps_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{POINTER}.{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(pointer, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(folder / POINTER)


def saved_versions(name: str, model_id: str) -> list[Calibration]:
    """Every saved version of a map, oldest first (unreadable files are left out)."""
    folder = maps_dir() / f"{name}.{model_id}"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(_read_calibration(path))
        except ValueError:
            continue
    return out


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
