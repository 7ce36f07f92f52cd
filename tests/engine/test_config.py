"""Config and catalog files: errors name the file and the field; keys only from env or secrets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from engine.config import ConfigError, Settings, get_settings, load_yaml
from models.catalog import CatalogError, api_key_for, load_catalog
from models.registry import check_all
from models.secrets import find_secret, redact


class Sample(BaseModel):
    threshold: float = Field(ge=0, le=1)
    name: str


def test_load_yaml_validates(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("threshold: 0.6\nname: focus\n")
    assert load_yaml(good, Sample).threshold == 0.6


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("threshold: 2\nname: x\n", "field 'threshold'"),
        ("name: x\n", "field 'threshold': Field required"),
        ("threshold: [0.5\n", "not valid YAML (line"),
    ],
)
def test_load_yaml_errors_name_file_and_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_yaml(path, Sample)
    assert str(path) in str(info.value) and message in str(info.value)


def test_missing_and_binary_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_yaml(tmp_path / "nope.yaml", Sample)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_yaml(binary, Sample)


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_THREADS", "3")
    assert Settings().threads == 3
    monkeypatch.setenv("JUDGELAB_THREADS", "zero")
    with pytest.raises(ConfigError, match="JUDGELAB_THREADS='zero'"):  # the variable, as the user set it
        get_settings()


def test_shipped_catalog_has_the_required_entries() -> None:
    catalog = load_catalog()
    assert {"gemma3-270m", "ollama-llama3.2", "gpt-4o", "claude-haiku", "gemini-flash"} <= set(catalog.ids)
    bundled = catalog.get("gemma3-270m")
    assert bundled.backend == "llamacpp" and bundled.model == "bundled"
    for role in ("judge", "juror", "director", "evaluator"):
        assert catalog.default_for(role).id == "gemma3-270m"
    for spec in catalog.models:
        assert spec.profile.name and spec.profile.icon and spec.profile.color.startswith("#")
    assert catalog.get("gpt-4o").price_in_per_1k > 0


def test_unavailable_models_say_why_and_never_crash() -> None:
    results = {a.model_id: a for a in asyncio.run(check_all(load_catalog()))}
    assert results["gemma3-270m"].available
    assert not results["gpt-4o"].available and "OPENAI_API_KEY" in results["gpt-4o"].reason
    assert not results["claude-haiku"].available and "ANTHROPIC_API_KEY" in results["claude-haiku"].reason
    assert not results["gemini-flash"].available and "GEMINI_API_KEY" in results["gemini-flash"].reason


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("models: [{id: x, backend: nope, model: m, profile: {name: X}}]", "field 'models[x].backend'"),
        ("models: [{id: x, backend: openai, model: m}]", "field 'models[x].profile': Field required"),
        (
            "models: [{id: x, backend: openai, model: m, profile: {name: X}, price_in_per_1k: -1}]",
            "field 'models[x].price_in_per_1k'",
        ),
        (
            "models: [{id: x, backend: openai, model: m, profile: {name: X}, api_key: sk-123}]",
            "field 'models[x].api_key': Extra inputs are not permitted",
        ),
        ("models:\n  - id: x\n    backend: [", "not valid YAML"),
        ("- just a list", "expected a mapping"),
    ],
)
def test_broken_catalog_names_file_and_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(content)
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_duplicate_ids_refused(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n" + "  - {id: a, backend: openai, model: m, profile: {name: A}}\n" * 2)
    with pytest.raises(CatalogError, match="duplicate id"):
        load_catalog(path)


def test_keys_from_secrets_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('OPENAI_API_KEY = "sk-from-secrets-123456"\n')
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets))
    spec = load_catalog().get("gpt-4o")
    assert api_key_for(spec) == "sk-from-secrets-123456"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123456")
    assert api_key_for(spec) == "sk-from-env-123456"  # the environment wins
    assert redact("error: bad key sk-from-env-123456") == "error: bad key <OPENAI_API_KEY>"


def test_broken_secrets_file_means_no_key_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("OPENAI_API_KEY = [unterminated")
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets))
    assert find_secret("OPENAI_API_KEY") is None
