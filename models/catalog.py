"""The model catalog: `models/catalog.yaml` → validated specs, with availability and its reason."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from models import files, safe_yaml
from models.discovery import backend_class, backends
from models.fieldlines import compose, field_name, line_of, where
from models.secrets import find_secret, plain_url, register_key_names

DEFAULT_CATALOG = Path(__file__).with_name("catalog.yaml")
BUNDLED_MODEL_ID = "gemma3-270m"


class CatalogError(ValueError):
    """The catalog file is broken; the message names the file and the field."""


class Profile(BaseModel):
    """How a model appears on pages: the hand-raise cards, jury seats and charts use it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    icon: str = "🤖"
    color: str = "#4C78A8"
    expertise: list[str] = Field(default_factory=list)
    role: str = ""


def _unsplit_credentials(url: str) -> bool:
    """Whether a URL looks like one whose password held a '/', '?' or '#' written as is: the host part ends there,
    so what is left of the password lands in the path, the fragment or the port (`http://u:pa/ss@host`)."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 — raises for a port that is not a number (`http://u:pass?word@host`)
    except ValueError:  # (a port out of range, `host:99999`, is no password)
        return not parts.netloc.rsplit(":", 1)[-1].isdigit()
    return "@" in parts.path or "@" in parts.fragment


class ModelSpec(BaseModel):
    # A refused value is never quoted back: a base_url may hold a password (errors name the file, line and field).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
    backend: str = Field(
        description="A registered backend: llamacpp, ollama, openai, anthropic, gemini, replay, "
        "or any other module in models/backends (see models.registry)."
    )
    model: str = Field(description="Provider model name, GGUF path, or 'bundled' for the packaged Gemma.")
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="Environment variable holding the key.")
    needs_key: bool = True
    price_in_per_1k: float = Field(default=0.0, ge=0)
    price_out_per_1k: float = Field(default=0.0, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    concurrency: int = Field(default=4, ge=1, le=256)
    options: dict[str, Any] = Field(default_factory=dict)
    profile: Profile
    default_for: list[str] = Field(default_factory=list)
    tuning: Literal["base", "instruct"] = Field(
        default="instruct",
        description="A base model continues text (judge it by likelihood: `score_options`); an instruction "
        "model follows instructions (judge it by generating).",
    )

    @property
    def preferred_judge(self) -> Literal["likelihood", "generate"]:
        """The judge method that suits the model: likelihood for a base model, generation otherwise."""
        return "likelihood" if self.tuning == "base" else "generate"

    @field_validator("base_url")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        # httpx would send them to that address preemptively (Authorization: Basic), to whatever answers there,
        # and a server that echoes its request would put them into runs, calls and events.
        if value and (plain_url(value) != value or _unsplit_credentials(value)):
            raise ValueError(
                "a user name or password in the URL is not allowed: it would be sent with every request to "
                "whatever answers at that address — remove it, and put the key in the environment variable named "
                "by api_key_env (or in .streamlit/secrets.toml)"
            )
        return value

    @field_validator("backend")
    @classmethod
    def _registered(cls, value: str) -> str:
        known = backends()
        if value not in known:
            raise ValueError(f"unknown backend '{value}' — known backends: {', '.join(sorted(known))}")
        return value

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens / 1000 * self.price_in_per_1k + completion_tokens / 1000 * self.price_out_per_1k


class PanelSeat(BaseModel):
    """One seat of a jury panel: a catalog model and the role it plays."""

    model_config = ConfigDict(extra="forbid")

    model: str
    role_name: str
    role_focus: str = ""
    judge: Literal["", "likelihood", "generate", "neighbours"] = ""  # "": as JURY_JUDGE says


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    models: list[ModelSpec]
    panels: dict[str, list[PanelSeat]] = Field(default_factory=dict, description="Named jury panels.")
    _source: str = PrivateAttr(default="the model catalog")  # the file it was loaded from, for errors

    def panel(self, name: str) -> list[PanelSeat]:
        """A named panel's seats; a missing one is a CatalogError naming the panel and the catalog file."""
        if name not in self.panels:
            known = ", ".join(self.panels) or "none"
            raise CatalogError(
                f"{self._source}: field 'panels': unknown panel '{name}' — known panels: {known} "
                f"(add '{name}' under panels:, or choose one of those)"
            )
        return self.panels[name]

    def get(self, model_id: str) -> ModelSpec:
        for spec in self.models:
            if spec.id == model_id:
                return spec
        known = ", ".join(s.id for s in self.models)
        raise KeyError(f"unknown model '{model_id}' — known models: {known}")

    def default_for(self, role: str) -> ModelSpec:
        for spec in self.models:
            if role in spec.default_for or "*" in spec.default_for:
                return spec
        return self.get(BUNDLED_MODEL_ID)

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.models]


def _display_loc(loc: list[str | int], data: Any) -> list[str | int]:
    """The error's path with a model named by its id rather than its index, when it has one."""
    if len(loc) >= 2 and loc[0] == "models" and isinstance(loc[1], int):
        try:
            ident = data["models"][loc[1]].get("id")
        except (KeyError, IndexError, TypeError, AttributeError):
            ident = None
        if isinstance(ident, str) and ident:
            return [f"models[{ident}]", *loc[2:]]
    return loc


def _format_validation(path: Path, text: str, exc: ValidationError, data: Any) -> str:
    """`file:line: field 'models[x].backend': message`, one a line; the line is the field's own."""
    root = compose(text)
    lines = []
    for err in exc.errors(include_url=False):
        loc = list(err["loc"])
        lines.append(
            f"{where(str(path), line_of(root, loc))}: field '{field_name(_display_loc(loc, data))}': {err['msg']}"
        )
    return "\n".join(lines)


def _cross_check(path: Path, text: str, catalog: Catalog) -> None:
    """What one field alone cannot say: ids are unique, and every panel seat names a model of the catalog."""
    problems: list[tuple[list[str | int], str]] = []
    seen: set[str] = set()
    for i, spec in enumerate(catalog.models):
        if spec.id in seen:
            problems.append((["models", i, "id"], f"models[{spec.id}].id': duplicate id"))
        seen.add(spec.id)
    embedders = ("minilm", "use-m3")  # engine.embeddings.EMBEDDERS: what a neighbours seat reads with
    for name, seats in catalog.panels.items():
        for i, seat in enumerate(seats):
            if seat.judge == "neighbours":
                if seat.model not in embedders:
                    problems.append(
                        (
                            ["panels", name, i, "model"],
                            f"panels.{name}[{i}].model': a neighbours seat reads with an embedder, not "
                            f"'{seat.model}' — known embedders: {', '.join(embedders)}",
                        )
                    )
            elif seat.model not in seen:
                problems.append(
                    (
                        ["panels", name, i, "model"],
                        f"panels.{name}[{i}].model': unknown model '{seat.model}' — known models: {', '.join(seen)}",
                    )
                )
    if problems:
        root = compose(text)
        raise CatalogError("\n".join(f"{where(str(path), line_of(root, loc))}: field '{msg}" for loc, msg in problems))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and validate a catalog file; errors name the file and the field."""
    path = Path(path or os.environ.get("JUDGELAB_CATALOG") or DEFAULT_CATALOG)
    try:
        text = files.read_text(path)  # regular files only, within JUDGELAB_MAX_INPUT_MB
        data = safe_yaml.load(text)
    except files.InputError as exc:
        raise CatalogError(str(exc).replace(": file not found", ": catalog file not found")) from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping with a 'models' list")
    try:
        catalog = Catalog.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(_format_validation(path, text, exc, data)) from None
    _cross_check(path, text, catalog)
    catalog._source = str(path)
    register_key_names(spec.api_key_env for spec in catalog.models)  # their values are redacted everywhere
    return catalog


@lru_cache(maxsize=4)
def cached_catalog(path: str | None = None) -> Catalog:
    return load_catalog(path)


def api_key_for(spec: ModelSpec) -> str | None:
    """The key for a spec, from the environment or `.streamlit/secrets.toml` only: its `api_key_env`, then
    the variables its backend declares (`Requires.key_env`)."""
    names = [spec.api_key_env] if spec.api_key_env else []
    names += backend_class(spec.backend).requires.key_env
    for name in names:
        value = find_secret(name)
        if value:
            return value
    return None
