"""Settings from the environment (JUDGELAB_*), and YAML files validated with errors naming file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

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

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'judgelab.db'}"


def get_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(_describe("environment (JUDGELAB_*)", exc)) from None


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
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise ConfigError(_describe(str(path), exc)) from None
