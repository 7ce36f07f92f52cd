"""Settings from the environment (JUDGELAB_*), and YAML files validated with errors naming file and field."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from models import files, safe_yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data"

T = TypeVar("T", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file or value is wrong; the message names the file and the field."""


class Settings(BaseSettings):
    """Process-wide settings. Every field can be set as JUDGELAB_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="JUDGELAB_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="Any SQLAlchemy URL; default sqlite:///data/judgelab.db (WAL mode)."
    )
    data_dir: Path = Field(default=DATA_DIR, description="Scenarios, benchmarks, recordings, the default DB.")
    catalog: Path | None = Field(default=None, description="Model catalog YAML; default models/catalog.yaml.")
    threads: int | None = Field(default=None, ge=1, description="Threads for local llama.cpp models.")
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0)
    preload: bool = Field(default=False, description="Load the bundled model and embedder when the app starts.")
    max_input_mb: float = Field(
        default=10.0,
        gt=0,
        le=4096,
        description="Largest file (or upload) any command or page reads; a larger one is refused with a message.",
    )
    max_cells: int = Field(
        default=100_000,
        ge=1,
        description="Most cells (grid × repeats) an experiment may have; a larger one is refused at validation.",
    )
    ray_connect_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="How long the Ray executor waits for the cluster at RAY_ADDRESS."
    )
    run_stale_after_s: float = Field(
        default=120.0,
        ge=10,
        description="A running run owned by a process on "
        "another host whose heartbeat is older than this is marked interrupted.",
    )
    conversation_idle_s: float = Field(
        default=1800.0,
        ge=1,
        description="A dashboard conversation with no turn "
        "for this long (or whose browser session is gone) is closed as interrupted.",
    )

    user: str | None = Field(
        default=None, description="The local user name labels are recorded under; default the OS user name."
    )
    auto_labels: bool = Field(
        default=True, description="Hand-raise Speak/Skip and @mentions become labels (engine/labels)."
    )
    refit_every: int = Field(
        default=20, ge=1, le=10_000, description="The Hand raise page offers a refit after this many new approvals."
    )
    maps_dir: Path | None = Field(
        default=None,
        description="Where maps refitted from labels are versioned, with the pointer to the one in use; "
        "default <data_dir>/maps.",
    )

    @field_validator("maps_dir", mode="before")
    @classmethod
    def _absolute_maps_dir(cls, value: object) -> object:
        """The maps folder holds the pointer every process reads: an empty value (which meant the current folder),
        a `~` (never expanded here: a folder named `~` was made) or a relative path (another folder for a CLI and
        a dashboard started in different places) is refused, not guessed."""
        if isinstance(value, str | Path):
            text = str(value)
            if not text.strip():
                raise ValueError("empty: unset it for <data_dir>/maps, or give a folder's absolute path")
            if text.startswith("~"):
                raise ValueError("'~' is not expanded here: give the folder's absolute path")
            if not Path(text).is_absolute():
                raise ValueError("a relative folder differs between processes started elsewhere: give an absolute path")
        return value

    @property
    def resolved_maps_dir(self) -> Path:
        return self.maps_dir or self.data_dir / "maps"

    @property
    def resolved_user(self) -> str:
        if self.user:
            return self.user
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "local"

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'judgelab.db'}"


def get_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(_describe_env(exc)) from None


def max_input_bytes() -> int:
    """The size limit of a user file or upload (JUDGELAB_MAX_INPUT_MB), in bytes."""
    return int(get_settings().max_input_mb * 1024 * 1024)


def _describe_env(exc: ValidationError) -> str:
    """One line per bad variable, named as the user set it (JUDGELAB_THREADS, not 'threads')."""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        name = f"JUDGELAB_{field.upper()}"
        value = os.environ.get(name, err.get("input"))
        lines.append(f"environment: {name}={value!r}: {err['msg']}")
    return "\n".join(lines)


def _describe(source: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"{source}: field '{where}': {err['msg']}")
    return "\n".join(lines)


def load_yaml(path: str | Path, model: type[T]) -> T:
    """Read a YAML file into `model`; any problem is a ConfigError naming the file and the field."""
    path = Path(path)
    try:
        raw: object = safe_yaml.load(files.read_text(path, max_input_bytes()))
    except files.InputError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise ConfigError(_describe(str(path), exc)) from None
